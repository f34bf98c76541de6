"""The LLM judge: the scored pass (judge.py), decoding (decode.py), parsing a rating out of the text
(parse.py), the released implementation's pass (released.py), its statistics (stats.py) and the
per-value probabilities (values.py)."""
