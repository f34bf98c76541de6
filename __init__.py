"""cscore: contrastive evaluation metrics, run as reproducible experiments.

The Python API (``ModelPair``, ``load_model``, ``PairStatistics``) lives in
``cscore.scorers.api``; it is re-exported here lazily so that ``import cscore.metaeval``
does not pull in torch.
"""

from cscore.version import __version__  # noqa: F401 (the package's version)

_API = {"ModelPair", "PairStatistics", "load_model", "ScoringInput"}


def __getattr__(name):
    if name in _API:
        from cscore.scorers import api

        return getattr(api, name)
    raise AttributeError(f"module 'cscore' has no attribute {name!r}")
