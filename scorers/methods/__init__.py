"""Scoring methods: pure functions of per-token statistics.

Each method is one small module with ``NAME``, ``needs(**params)`` (which models it reads)
and ``token_scores(stats, **params)`` (one value per hypothesis token). ``score`` adds the
shared length handling (``norm``, ``skip_first``). A new method is one new file plus one
line in ``METHODS``.
"""

from __future__ import annotations

import inspect

import numpy as np

from cscore.scorers.methods import cd_score, contrast, division, ensemble, single
from cscore.scorers.methods.common import aggregate

METHODS = {m.NAME: m for m in (single, ensemble, contrast, division, cd_score)}
AGGREGATION_KEYS = ("norm", "skip_first")


def get(name: str):
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: {sorted(METHODS)}") from None


def split_params(name: str, params: dict) -> tuple[dict, dict]:
    """Split params into (token-level params, aggregation params); reject unknown keys."""
    module = get(name)
    accepted = set(inspect.signature(module.token_scores).parameters) - {"stats"}
    token, agg = {}, {}
    for key, value in params.items():
        if key in AGGREGATION_KEYS:
            agg[key] = value
        elif key in accepted:
            token[key] = value
        else:
            raise ValueError(f"method {name!r} has no parameter {key!r}; it takes {sorted(accepted | set(AGGREGATION_KEYS))}")
    return token, agg


def token_scores(name: str, stats: dict, **params) -> np.ndarray:
    token, _ = split_params(name, params)
    return get(name).token_scores(stats, **token)


def score(name: str, stats: dict, **params) -> np.ndarray:
    """Per-item scores of method ``name`` on ``stats`` ({"expert": TokenStats, ...})."""
    token, agg = split_params(name, params)
    values = get(name).token_scores(stats, **token)
    offsets = next(iter(stats.values())).offsets
    return aggregate(values, offsets, **agg)
