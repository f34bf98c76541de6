"""dola: Chuang et al., ICLR 2024 ("DoLa: Decoding by Contrasting Layers"), for scoring a given text.
Per hypothesis token, with M the candidate early exit (``layers``) farthest (JSD) from the final layer:
    log q_N(y_t) - log q_M(y_t)    where q_N(y_t) >= alpha * max_w q_N(w)
and ``outside`` that set. Reads the early-exit heads ``layer_<k>`` of the expert's one pass
(docs/methods/distributional.md).

``outside``: the expert's log q_N(y_t), or the released lm_score's constant -1000."""

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.engine.stats import exit_head
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import Param, common, setting

OUTSIDE = {"expert": None, "released": -1000.0}  # released: dola.py lm_score's relative_top_value
ITEM = re.compile(r"(\d+)(?:-(\d+)(?:/(\d+))?)?")


@dataclass
class DolaParams(MethodParams):
    """DoLa: log q_N - log q_M, M the candidate layer farthest (JSD) from the final layer, per token."""
    name: str = setting("dola", doc="the method")
    variant: str = setting("dola", doc="the score column and label: score.<variant>")
    layers: str = setting("0-14/2", Param(str),
                          doc="the candidate (premature) layers: a comma list of k, a-b (inclusive) or a-b/step; "
                              "0 is the embedding output, each below the expert's depth (paper, 32 layers: 0-14/2)")
    alpha: float = setting(0.1, Param(float, lo=0.0, hi=1.0), doc="the adaptive plausibility constraint (paper: 0.1)")
    outside: str = setting("expert", Param(str, choices=tuple(OUTSIDE)),
                           doc="a token outside the plausible set: expert (its log q_N) or released (-1000)")
    t: float = common("t", 1.0, "temperature of every layer's distribution (paper: 1)")
    norm: str = common("norm", "sum")
    skip_first: bool = common("skip_first", False)


def bucket(spec) -> tuple[int, ...]:
    """The candidate layers ``spec`` names, in order, each once ("0-14/2,20" -> 0, 2, ..., 14, 20)."""
    out: list[int] = []
    for part in str(spec).replace(" ", "").split(","):
        m = ITEM.fullmatch(part)
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))) or m.group(3) == "0":
            raise ConfigError(f"method.layers must be layers as k, a-b or a-b/step joined by commas, got {spec!r}")
        lo, hi, step = int(m.group(1)), int(m.group(2) or m.group(1)), int(m.group(3) or 1)
        out.extend(k for k in range(lo, hi + 1, step) if k not in out)
    return tuple(out)


def chosen(stats: dict, p: DolaParams) -> tuple[np.ndarray, np.ndarray]:
    """(M per token, log q_M(y_t) per token): the candidate farthest (JSD) from the final
    layer, the bucket's first on ties (as the released code's argmax)."""
    layers = bucket(p.layers)
    missing = [k for k in layers if exit_head(k) not in stats]
    if missing:
        raise ConfigError(f"dola: no statistics of candidate layer(s) {missing} (a pass run with method.layers="
                          f"{p.layers!r} keeps them)")
    jsd = np.stack([stats[exit_head(k)].statistic("jsd", p.t) for k in layers])
    lq = np.stack([stats[exit_head(k)].lp(p.t) for k in layers])
    pick = jsd.argmax(axis=0)
    return np.asarray(layers)[pick], np.take_along_axis(lq, pick[None], axis=0)[0]


@METHODS
class Dola(Method):
    name = "dola"
    aligned = False  # one model's layers: a cross-family pair has nothing to add
    Params = DolaParams
    reads_distributions = True

    @classmethod
    def needs(cls, p: DolaParams) -> tuple[str, ...]:
        return ("expert",)

    @classmethod
    def exits(cls, settings: Mapping) -> tuple[int, ...]:
        return bucket(settings.get("layers", DolaParams.layers))

    @classmethod
    def token_scores(cls, stats, p: DolaParams) -> np.ndarray:
        lq_n, lq_max = stats["expert"].lp(p.t), stats["expert"].lp_max(p.t)
        _, lq_m = chosen(stats, p)
        with np.errstate(divide="ignore"):
            inside = lq_n >= np.log(p.alpha) + lq_max
        fallback = lq_n if OUTSIDE[p.outside] is None else np.full_like(lq_n, OUTSIDE[p.outside])
        return np.where(inside, lq_n - lq_m, fallback)
