"""CDM: generating degraded negatives (generate.py) and the pooled discriminator's features (pooler.py)."""
