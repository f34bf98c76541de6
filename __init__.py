"""cscore: contrastive evaluation metrics, run as reproducible experiments.

The Python API (``cscore.scorers.api``) is re-exported here lazily: ``import cscore.metaeval`` needs no torch.
"""

from cscore.version import __version__  # noqa: F401 (the package's version)

_API = {"ModelPair", "PairStatistics", "load_model", "ScoringInput"}


def __getattr__(name):
    if name in _API:
        from cscore.scorers import api

        return getattr(api, name)
    raise AttributeError(f"module 'cscore' has no attribute {name!r}")
