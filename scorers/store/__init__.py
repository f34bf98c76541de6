"""The statistics store: the on-disk cache of per-item statistics and its partial checkpoints.
It imports no payload type; each payload names itself (to_arrays / from_arrays)."""
