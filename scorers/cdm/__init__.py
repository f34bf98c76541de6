"""CDM: generating degraded negatives (generate.py) and the pooled discriminator's features (pooler.py)."""

STRATEGIES = ("span", "sentence", "utterance", "multi")  # how a negative is degraded (cdm.generate.strategy)
