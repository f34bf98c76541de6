"""The runtime settings' defaults, read by the config schema (``config/run.py``) and the Python API."""

TOKEN_BUDGET = 4096  # padded tokens per batch (batch size x longest item)
MAX_LENGTH = 1024  # prompt + hypothesis tokens
TEMPERATURES = (0.5, 1.0, 1.5)  # computed in the one forward pass per model
