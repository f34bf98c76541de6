"""division: the ratio score log(p_exp / p_ama) that ContrastScore discusses as an ablation
(Sec. 3.2; unstable when p_ama is near zero)."""

import numpy as np

from cscore.scorers.methods.common import logp

NAME = "division"


def needs(**_) -> tuple[str, ...]:
    return ("expert", "amateur")


def token_scores(stats, t_exp: float = 0.5, t_ama: float = 1.5, clamp: float | None = None) -> np.ndarray:
    return logp(stats["expert"], t_exp, clamp) - logp(stats["amateur"], t_ama, clamp)
