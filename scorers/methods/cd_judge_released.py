"""cd_judge_released: CD-judge as the authors' released code computes it (``scorers/judge/released.py``;
docs/methods/cd-judge.md)."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.methods.base import METHODS, MethodParams
from cscore.scorers.methods.cd_judge import ASPECT_DOC, PARSE_DOC, PARSE_RULES, CdJudge, RangeParam
from cscore.scorers.methods.params import POSITIVE, Param, setting


@dataclass
class CdJudgeReleasedParams(MethodParams):
    """CD-judge as the released code computes it."""
    name: str = setting("cd_judge_released", doc="the method")
    variant: str = setting("cd_judge_released", doc="the score column and label: score.<variant>")
    lam: float = setting(1.0, Param(float, lo=0.0), "assistant weight (released default: --lamb)")
    t: float = setting(1.0, POSITIVE, "temperature, on the main model (released default: --temperature)")
    score_range: list = setting([1, 5], RangeParam(), "any [lo, hi] of integers; or range=0-4 | 1-5 | 2-6 | 3-7")
    aspect: str = setting("${oc.select:data.judge_aspect,coherence}", Param(str), ASPECT_DOC)
    alpha: float = setting(0.1, Param(float, lo=0.0, hi=1.0, lo_open=True), "relative-top: keep p >= alpha * max p ...")
    min_keep: int = setting(1000, Param(int, lo=1), "... or the top min_keep tokens, whichever set is larger")
    max_new_tokens: int = setting(64, Param(int, lo=1), "tokens the judge may write")
    max_prompt_tokens: int = setting(2048, Param(int, lo=2), "truncation=True, max_length=2048 (the first tokens stay)")
    batch_size: int = setting(16, Param(int, lo=1), "prompts per batch")
    repetition_penalty: float | None = setting(None, Param(float, lo=0.0, lo_open=True, nullable=True),
                                               "null: the main model's generation_config value (Qwen2.5: 1.05), else 1")
    parse: str = setting("released", Param(str, choices=PARSE_RULES), PARSE_DOC)


@METHODS
class CdJudgeReleased(CdJudge):
    """cd_judge's rows (``plan_variants``), decoded as the released code does."""
    name = "cd_judge_released"
    kind = "judge_released"
    builds_on = ("cd_judge",)  # its paper method
    aligned = False  # needs one tokenizer: a cross-family pair is refused
    Params = CdJudgeReleasedParams
