"""contrast: ContrastScore, Eq. 5 of Wang et al.:
    sum_t log | p_exp^t - gamma * p_ama^t |
with p_exp at temperature t_exp (0.5) and p_ama at t_ama (1.5) (footnote 4), gamma = 0.1.

Computed in log space; ``floor`` guards log(0) (default 1e-30; the released code's 1e-10: the presets).
``weight=jsd``: each token's term weighted by the Jensen-Shannon divergence of the two distributions there
(at ``t_weight``)."""

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import floor_log, logp
from cscore.scorers.methods.params import POSITIVE, Param, common, setting

WEIGHTS = ("none", "jsd")


@dataclass
class ContrastParams(MethodParams):
    """ContrastScore (Eq. 5): sum_t log|p_exp^t - gamma * p_ama^t|, the paper's settings."""
    name: str = setting("contrast", doc="the method")
    variant: str = setting("contrast", doc="the score column and label: score.<variant>")
    gamma: float = common("gamma", 0.1, "amateur scaling (Sec. 4.4)")
    t_exp: float = common("t_exp", 0.5, "expert temperature (footnote 4)")
    t_ama: float = common("t_ama", 1.5, "amateur temperature (footnote 4)")
    floor: float | None = common("floor", 1.0e-30, "|p_exp - gamma p_ama| below this counts as this (guards log 0)")
    clamp: float | None = common("clamp", None, "clip log-probs to [clamp, 0] before combining (released code: -20)")
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False, "leave out the first hypothesis token (false: score it too, Eq. 1)")
    weight: str = setting("none", Param(str, choices=WEIGHTS),
                          doc="none: Eq. 5; jsd: each token's term times the JSD of the two distributions there")
    t_weight: float = setting(1.0, POSITIVE, doc="temperature of both distributions in the JSD weight")


def log_abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log|e^a - e^b|, stable for very small probabilities."""
    hi = np.maximum(a, b)
    gap = np.abs(a - b)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = hi + np.log(-np.expm1(-gap))
    both_zero = np.isneginf(a) & np.isneginf(b)
    return np.where(both_zero, -np.inf, out)


@METHODS
class Contrast(Method):
    name = "contrast"
    aligned = True  # a cross-family pair computes it on aligned units (engine/align.py)
    Params = ContrastParams

    @classmethod
    def distributional(cls, settings: Mapping) -> bool:
        return settings.get("weight", "none") == "jsd"

    @classmethod
    def token_scores(cls, stats, p: ContrastParams) -> np.ndarray:
        a = logp(stats["expert"], p.t_exp, p.clamp)
        la = logp(stats["amateur"], p.t_ama, p.clamp)
        with np.errstate(divide="ignore"):
            b = np.log(p.gamma) + la
        term = floor_log(log_abs_diff(a, b), p.floor)
        if p.weight == "jsd":
            return stats["amateur"].statistic("jsd", p.t_weight) * term
        return term
