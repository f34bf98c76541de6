"""The forward-pass engine: batching under a token budget, packed attention, the LM head's per-token
statistics, encoder-decoder passes, cost estimates (flops) and cross-tokenizer alignment."""
