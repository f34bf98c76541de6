"""ensemble: log of the mixed probability, ContrastScore Eq. 6 (gamma = 0.5) and Eq. 8:
    log(gamma * p_exp + (1 - gamma) * p_ama), computed in log space."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import floor_log, logp
from cscore.scorers.methods.params import common, setting


@dataclass
class EnsembleParams(MethodParams):
    name: str = setting("ensemble", doc="the method")
    variant: str = setting("ensemble", doc="the score column and label: score.<variant>")
    gamma: float = common("gamma", 0.5)
    t_exp: float = common("t_exp", 1.0)
    t_ama: float = common("t_ama", 1.0)
    floor: float | None = common("floor", 1.0e-30)
    clamp: float | None = common("clamp", None)
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


@METHODS
class Ensemble(Method):
    name = "ensemble"
    aligned = True  # a cross-family pair computes it on aligned units (engine/align.py)
    Params = EnsembleParams

    @classmethod
    def token_scores(cls, stats, p: EnsembleParams) -> np.ndarray:
        le = logp(stats["expert"], p.t_exp, p.clamp)
        la = logp(stats["amateur"], p.t_ama, p.clamp)
        with np.errstate(divide="ignore"):
            mixed = np.logaddexp(np.log(p.gamma) + le, np.log1p(-p.gamma) + la)
        return floor_log(mixed, p.floor)
