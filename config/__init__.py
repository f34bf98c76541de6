"""The run's typed config schema (run.py) and its groups (groups.py)."""
