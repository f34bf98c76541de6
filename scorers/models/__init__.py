"""Models: loading a model spec (hub id, local folder, GGUF) into a pool, what identifies its
weights (the cache key), and where a causal LM's parts are (anatomy)."""
