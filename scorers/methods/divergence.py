"""divergence: one distributional statistic of the pair per scored token (an entropy, cross-entropy, KL
or JSD at temperature ``t``), averaged over an item (docs/methods/distributional.md)."""

from dataclasses import dataclass

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import Param, common, setting

STATISTICS = ("entropy", "xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd")


@dataclass
class DivergenceParams(MethodParams):
    """Mean per-token entropy, cross-entropy, KL or JSD of the pair's distributions."""
    name: str = setting("divergence", doc="the method")
    variant: str = setting("${.statistic}", doc="the score column and label: score.<variant> (default: the statistic)")
    statistic: str = setting("jsd", Param(str, choices=STATISTICS),
                             doc="entropy (of ``model``), xent_ea = -sum p_e log p_a, xent_ae its mirror, "
                                 "kl_ea = KL(p_e||p_a), kl_ae = KL(p_a||p_e), jsd")
    model: str = common("model", "expert", "whose entropy (statistic=entropy)")
    t: float = common("t", 1.0, "temperature of both distributions")
    norm: str = common("norm", "mean")
    skip_first: bool = common("skip_first", False)


@METHODS
class Divergence(Method):
    name = "divergence"
    aligned = False  # the distributional statistics need one vocabulary
    Params = DivergenceParams
    reads_distributions = True

    @classmethod
    def needs(cls, p: DivergenceParams) -> tuple[str, ...]:
        return (p.model,) if p.statistic == "entropy" else ("expert", "amateur")

    @classmethod
    def token_scores(cls, stats, p: DivergenceParams) -> np.ndarray:
        owner = p.model if p.statistic == "entropy" else "amateur"  # the pair's statistics sit on its head
        if owner not in stats:
            raise ConfigError(f"divergence: model {owner!r} has no statistics (have {sorted(stats)})")
        return stats[owner].statistic(p.statistic, p.t)
