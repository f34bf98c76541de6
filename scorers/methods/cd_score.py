"""cd_score: the contrastive-decoding objective used as a score, ContrastScore Eq. 4
(Li et al. 2023):
    log(p_exp / p_ama)  if h_t is in V_head = {v : p_exp(v) >= alpha * max_w p_exp(w)}
    outside             otherwise (the paper: -inf, which rules the hypothesis out).
The head uses the expert distribution at t_exp. ``outside`` may be set to a finite
penalty to make the ablation usable for correlations."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.common import logp
from cscore.scorers.methods.params import Param, common, setting

NAME = "cd_score"


@dataclass
class Params:
    name: str = setting("cd_score", doc="the method")
    variant: str = setting("cd_score", doc="the score column and label: score.<variant>")
    alpha: float = setting(0.1, Param(float, lo=0.0, hi=1.0, lo_open=True),
                           "the head: tokens with p_exp >= alpha * max p_exp (else `outside`)")
    t_exp: float = common("t_exp", 0.5)
    t_ama: float = common("t_ama", 1.5)
    outside: float = setting(float("-inf"), Param(float, allow_neg_inf=True),
                             "the score of a token outside the head (the paper: -inf)")
    clamp: float | None = common("clamp", None)
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


def needs(**_) -> tuple[str, ...]:
    return ("expert", "amateur")


def token_scores(stats, *, alpha: float, t_exp: float, t_ama: float, outside: float,
                 clamp: float | None) -> np.ndarray:
    le = logp(stats["expert"], t_exp, clamp)
    in_head = stats["expert"].lp(t_exp) >= np.log(alpha) + stats["expert"].lp_max(t_exp)
    ratio = le - logp(stats["amateur"], t_ama, clamp)
    return np.where(in_head, ratio, float(outside))


def nonfinite_hint(params: dict) -> str:
    """Why this method's own scores may be non-finite by design, and what to set instead."""
    if float(params.get("outside", 0.0)) == float("-inf"):
        return ("; method.outside=-inf (the paper's CD-score) makes a hypothesis -inf as soon as one of its tokens "
                "falls outside the expert's plausibility head: a finite method.outside (e.g. -50) penalises instead")
    return ""
