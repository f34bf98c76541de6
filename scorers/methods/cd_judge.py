"""cd_judge: LLM-as-a-judge with contrastive decoding (the CD-judge paper, Eq. 1).

The judge writes argmax_v [log p_main(v) − λ · log p_asst,t(v)] over V_head = {v : p_main(v) ≥ α · max p_main}
(α = 0: all). ``decode``: greedy (``scorers/judge/decode.py``), first_token or values (``scorers/judge/values.py``).
``expected``: Σ value · q(value), q a softmax over the score tokens of the same contrast (V_head does not
apply). Rows: ``contrast``, ``main`` and ``asst`` (t = 1). Details: docs/methods/cd-judge.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import POSITIVE, Param, setting

DECODES = ("greedy", "first_token", "values")
ROWS = {"expert": "main", "amateur": "asst"}  # comparison rows: who writes the score


class RangeParam:
    """``[lo, hi]``: two integers, lo < hi (a 5-point scale is hi = lo + 4)."""

    def describe(self) -> str:
        return "[lo, hi] with integers lo < hi, e.g. [1,5]"

    def check(self, key: str, value):
        ok = (isinstance(value, (list, tuple)) and len(value) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) for v in value) and value[0] < value[1])
        if not ok:
            raise ConfigError(f"{key} must be {self.describe()}, got {value!r}")
        if value[1] - value[0] > 100:
            raise ConfigError(f"{key}={list(value)} spans more than 100 values; judge scales are short")
        return [int(value[0]), int(value[1])]


PARSE_RULES = ("paper", "released")
PARSE_DOC = ("how the output is read (after deleting every 'assistant', as the released code): paper: a number "
             "at the start; released: the released parse_output (deletes 'coherence', 'score', ': ', ... first; "
             "the paper's invalid-output tables)")
ASPECT_DOC = ("the aspect the judge rates; default: the data config's judge_aspect (SummEval: coherence | "
              "consistency | relevance | fluency; FED aspects; DSTC9: overall)")


@dataclass
class CdJudgeParams(MethodParams):
    """CD-judge (Eq. 1): the judge writes argmax_v [log p_main(v) - lam * log p_asst,t(v)];
    main = pair.expert, assistant = pair.amateur; lam=0: the main model alone (greedy)."""
    name: str = setting("cd_judge", doc="the method")
    variant: str = setting("cd_judge", doc="the score column and label: score.<variant>")
    lam: float = setting(0.1, Param(float, lo=0.0), "assistant weight (paper grid: 0.01, 0.1, 0.5, 1.0)")
    t: float = setting(1.0, POSITIVE, "assistant temperature (paper grid: 0.5, 1, 2, 3, 4, 5)")
    alpha: float = setting(0.1, Param(float, lo=0.0, hi=1.0), "plausibility set V_head = {v : p_main(v) >= "
                           "alpha * max p_main} (Li et al.), for the chosen token and every decoding step; 0: off")
    decode: str = setting("greedy", Param(str, choices=DECODES), "greedy: decode the judge's output under Eq. 1 "
                          "(the paper); first_token: cscore's fast read of the first token(s); values: Eq. 1 over "
                          "the range's values, each scored whole by each model on its own prompt (the one a "
                          "cross-family pair takes)")
    max_new_tokens: int = setting(64, Param(int, lo=1), "greedy: the longest output (the released code's 64); "
                                  "stops earlier at EOS or, unless full_output, once the parse is settled")
    score_range: list = setting([1, 5], RangeParam(), "or range=0-4 | 1-5 | 2-6 | 3-7; any [lo, hi] of integers")
    aspect: str = setting("${oc.select:data.judge_aspect,coherence}", Param(str), ASPECT_DOC)
    parse: str = setting("paper", Param(str, choices=PARSE_RULES), PARSE_DOC)
    full_output: bool = setting(False, Param(bool), "greedy: true decodes every path to EOS or max_new_tokens "
                                "(output.<row> holds the judge's whole text); false stops once the parse is "
                                "settled (the same score, far fewer steps)")


def judge(stats, *, who: str = "contrast", lam: float = 0.0, t: float = 1.0, alpha: float = 0.0, score_range,
          texts=None, parse: str = "paper") -> dict:
    """Per item: ``score`` and ``status`` (parsed under ``parse``), ``text`` (``texts``, else the first
    token(s) read from ``stats``) and ``expected``."""
    from cscore.scorers.judge.parse import read_score

    lo, hi = int(score_range[0]), int(score_range[1])
    if stats.values.tolist() != list(range(lo, hi + 1)):
        raise ConfigError(f"the judge statistics hold the range {stats.values.min()}-{stats.values.max()}, "
                          f"not {lo}-{hi}")
    c = float(lam) / float(t) if who == "contrast" else 0.0  # λ / t: how they enter (the logsumexp cancels)
    if texts is None:
        texts, _ = stats.decode(who, c, alpha)
    parsed = [read_score(text, lo, hi, parse) for text in texts]
    return {"score": np.array([p[0] for p in parsed], dtype=np.float64),
            "status": np.array([p[1] for p in parsed], dtype=object),
            "text": np.array(texts, dtype=object),
            "expected": stats.expected(who, c)}


@METHODS
class CdJudge(Method):
    name = "cd_judge"
    kind = "judge"
    aligned = False  # greedy / first_token read one vocabulary; decode=values runs on any pair
    Params: ClassVar[type[MethodParams]] = CdJudgeParams  # cd_judge_released: its own

    @classmethod
    def plan_variants(cls, label: str, params: dict, rows) -> list:
        """The method's variant and the main-alone / assistant-alone rows, as (name, method, params)."""
        out = [(row, cls.name, {**params, "who": ROWS[row]}) for row in rows if row in ROWS and row != label]
        return out + [(label, cls.name, {**params, "who": "contrast"})]
