"""single: the generative score of one model, Eq. 1 of ContrastScore:
    Score(h) = sum_t w_t log p(h_t | h_<t, S),  w_t = 1."""

from dataclasses import dataclass

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.common import logp
from cscore.scorers.methods.params import common, setting


@dataclass
class SingleParams(MethodParams):
    name: str = setting("single", doc="the method")
    variant: str = setting("${.model}", doc="the score column and label: score.<variant> (default: the model)")
    model: str = common("model", "expert")
    t: float = common("t", 1.0)
    clamp: float | None = common("clamp", None)
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


@METHODS
class Single(Method):
    name = "single"
    aligned = True  # reads one model, in its own tokens
    Params = SingleParams

    @classmethod
    def needs(cls, p: SingleParams) -> tuple[str, ...]:
        return (p.model,)

    @classmethod
    def token_scores(cls, stats, p: SingleParams) -> np.ndarray:
        if p.model not in stats:
            raise ConfigError(f"single: model {p.model!r} has no statistics (have {sorted(stats)})")
        return logp(stats[p.model], p.t, p.clamp)
