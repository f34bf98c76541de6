"""binoculars: Hans et al., ICML 2024, as the released code computes it:
    B = mean_t -log q_perf(y_t) / mean_t ( -sum_v p_obs(v) log q_perf(v) )
over the scored hypothesis tokens (docs/methods/distributional.md); reads the distributional statistics.

Both at temperature ``t`` (1 in the released code); ``performer``: the model of the pair that plays it."""

from dataclasses import dataclass

import numpy as np

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import aggregate, logp
from cscore.scorers.methods.params import Param, common, setting

ROLES = ("expert", "amateur")
# the cross-entropy whose log-probabilities are the performer's: -sum p_ama log p_exp is xent_ae
CROSS = {"expert": "xent_ae", "amateur": "xent_ea"}


@dataclass
class BinocularsParams(MethodParams):
    """Binoculars: the performer's log-perplexity over the pair's cross-perplexity (released code)."""
    name: str = setting("binoculars", doc="the method")
    variant: str = setting("binoculars", doc="the score column and label: score.<variant>")
    performer: str = setting("expert", Param(str, choices=ROLES),
                             doc="the model whose log-perplexity and log-probabilities are read; the other observes")
    t: float = common("t", 1.0, "temperature of both distributions (released code: 1)")
    norm: str = setting("mean", Param(str, choices=("mean",)), doc="a ratio of means over the scored tokens")
    skip_first: bool = common("skip_first", False)


@METHODS
class Binoculars(Method):
    name = "binoculars"
    aligned = False  # the distributional statistics need one vocabulary
    Params = BinocularsParams
    reads_distributions = True

    @classmethod
    def token_scores(cls, stats, p: BinocularsParams) -> np.ndarray:
        """-log q_perf(y_t) over its item's mean cross-entropy: their mean over an item is B."""
        nll = -logp(stats[p.performer], p.t)
        xent = stats["amateur"].statistic(CROSS[p.performer], p.t)
        offsets = stats["amateur"].offsets
        per_item = aggregate(xent, offsets, norm="mean", skip_first=p.skip_first)
        return nll / np.repeat(per_item, np.diff(offsets))
