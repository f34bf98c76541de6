"""The runtime settings' defaults, written once: the config schema (``config/run.py``, ``runtime.*``)
and the Python API's keyword defaults read them from here."""

TOKEN_BUDGET = 4096  # padded tokens per batch (batch size x longest item)
MAX_LENGTH = 1024  # prompt + hypothesis tokens
TEMPERATURES = (0.5, 1.0, 1.5)  # computed in the one forward pass per model
