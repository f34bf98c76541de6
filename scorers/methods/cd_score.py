"""cd_score: the contrastive-decoding objective used as a score, ContrastScore Eq. 4
(Li et al. 2023):
    log(p_exp / p_ama)  if h_t is in V_head = {v : p_exp(v) >= alpha * max_w p_exp(w)}
    outside             otherwise (the paper: -inf, which rules the hypothesis out).
The head uses the expert distribution at t_exp. ``outside`` may be set to a finite
penalty to make the ablation usable for correlations."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import logp
from cscore.scorers.methods.params import Param, common, setting


@dataclass
class CdScoreParams(MethodParams):
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


@METHODS
class CdScore(Method):
    name = "cd_score"
    aligned = True  # a cross-family pair computes it on aligned units (engine/align.py)
    Params = CdScoreParams

    @classmethod
    def token_scores(cls, stats, p: CdScoreParams) -> np.ndarray:
        le = logp(stats["expert"], p.t_exp, p.clamp)
        in_head = stats["expert"].lp(p.t_exp) >= np.log(p.alpha) + stats["expert"].lp_max(p.t_exp)
        ratio = le - logp(stats["amateur"], p.t_ama, p.clamp)
        return np.where(in_head, ratio, float(p.outside))

    @classmethod
    def nonfinite_hint(cls, p: CdScoreParams) -> str:
        if float(p.outside) == float("-inf"):
            return ("; method.outside=-inf (the paper's CD-score) makes a hypothesis -inf as soon as one of its "
                    "tokens falls outside the expert's plausibility head: a finite method.outside (e.g. -50) "
                    "penalises instead")
        return ""
