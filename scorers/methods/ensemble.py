"""ensemble: log of the mixed probability, ContrastScore Eq. 6 (gamma = 0.5) and Eq. 8:
    log(gamma * p_exp + (1 - gamma) * p_ama), computed in log space."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.common import floor_log, logp
from cscore.scorers.methods.params import common, setting

NAME = "ensemble"


@dataclass
class Params:
    name: str = setting("ensemble", doc="the method")
    variant: str = setting("ensemble", doc="the score column and label: score.<variant>")
    gamma: float = common("gamma", 0.5)
    t_exp: float = common("t_exp", 1.0)
    t_ama: float = common("t_ama", 1.0)
    floor: float | None = common("floor", 1.0e-30)
    clamp: float | None = common("clamp", None)
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


def needs(**_) -> tuple[str, ...]:
    return ("expert", "amateur")


def token_scores(stats, *, gamma: float, t_exp: float, t_ama: float, clamp: float | None,
                 floor: float | None) -> np.ndarray:
    le = logp(stats["expert"], t_exp, clamp)
    la = logp(stats["amateur"], t_ama, clamp)
    with np.errstate(divide="ignore"):
        mixed = np.logaddexp(np.log(gamma) + le, np.log1p(-gamma) + la)
    return floor_log(mixed, floor)
