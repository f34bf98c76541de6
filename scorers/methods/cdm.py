"""cdm: Discriminative CDM (Sec. 3.4.2): the contrastive momentum m_t = log p_e(x_t | s_<t) - log p_a(x_t | s_<t)
pooled over the hypothesis; ``pooling`` is this method's name for the aggregation key ``norm``.

``pooling``: ``sum`` (m(s) = log p_e(s) - log p_a(s)), or ``mean`` / ``max`` / ``min`` (the paper's
Avg- / Max- / Min-Pooled); ``t`` = 1 gives the paper's plain log-probabilities."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import logp
from cscore.scorers.methods.params import Param, common, setting

POOLING = ("sum", "mean", "min", "max")  # a subset of common.NORMS + common.POOLINGS


@dataclass
class CdmParams(MethodParams):
    """Discriminative CDM (Sec. 3.4.2): m_t = log p_e(x_t|s_<t) - log p_a(x_t|s_<t), pooled."""
    name: str = setting("cdm", doc="the method")
    variant: str = setting("cdm", doc="the score column and label: score.<variant>")
    pooling: str = setting("mean", Param(str, choices=POOLING),
                           "sum | mean | min | max (the paper's Avg- / Min- / Max-Pooled); the comparison rows are "
                           "pooled alike")
    t: float = common("t", 1.0, "temperature of both models (the paper: 1, plain log-probabilities)")
    clamp: float | None = common("clamp", None, "clip log-probs to [clamp, 0] before the difference")
    skip_first: bool = common("skip_first", False)


def momentum(stats, t: float = 1.0, clamp: float | None = None) -> np.ndarray:
    """m_t per scored token (flat, as the statistics store the tokens)."""
    return logp(stats["expert"], t, clamp) - logp(stats["amateur"], t, clamp)


@METHODS
class Cdm(Method):
    name = "cdm"
    Params = CdmParams
    aliases = {"pooling": "norm"}
    aligned = True  # a cross-family pair computes it on aligned units (engine/align.py)

    @classmethod
    def token_scores(cls, stats, p: CdmParams) -> np.ndarray:
        return momentum(stats, p.t, p.clamp)
