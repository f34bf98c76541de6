"""Models: loading a model spec into a pool, what identifies its weights, where a causal LM's parts are."""
