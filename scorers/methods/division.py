"""division: the ratio score log(p_exp / p_ama) that ContrastScore discusses as an ablation
(Sec. 3.2; unstable when p_ama is near zero)."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import logp
from cscore.scorers.methods.params import common, setting


@dataclass
class DivisionParams(MethodParams):
    name: str = setting("division", doc="the method")
    variant: str = setting("division", doc="the score column and label: score.<variant>")
    t_exp: float = common("t_exp", 0.5)
    t_ama: float = common("t_ama", 1.5)
    clamp: float | None = common("clamp", None)
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


@METHODS
class Division(Method):
    name = "division"
    aligned = True  # a cross-family pair computes it on aligned units (engine/align.py)
    Params = DivisionParams

    @classmethod
    def token_scores(cls, stats, p: DivisionParams) -> np.ndarray:
        return logp(stats["expert"], p.t_exp, p.clamp) - logp(stats["amateur"], p.t_ama, p.clamp)
