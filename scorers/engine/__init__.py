"""The forward-pass engine: batching, packed attention, the LM head's per-token statistics, alignment."""
