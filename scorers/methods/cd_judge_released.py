"""cd_judge_released: CD-judge as the authors' released code computes it (a preset; see
docs/methods/cd-judge.md, "The released code as a preset", and ``scorers/judge_released.py`` for every detail).

Temperature t on the MAIN model; the relative-top filter (keep max(top-``min_keep``, p ≥ α·max));
the assistant's log-probs fixed at the first step; greedy decoding of up to ``max_new_tokens``
over main − λ·asst; the prompt as one system message without a generation prompt (the
``judge_prompt=released`` files); the output parsed by ``parse_output``'s rules
(``judge_parse.parse_released``). The path of the decode depends on λ and t, so every grid point
decodes again (no judge statistics are cached for this preset)."""

from __future__ import annotations

from cscore.scorers.methods.cd_judge import RangeParam
from cscore.scorers.methods.params import POSITIVE, Param

NAME = "cd_judge_released"
KIND = "judge_released"
ACCEPTS = ("lam", "t", "score_range", "aspect", "alpha", "min_keep", "max_new_tokens", "max_prompt_tokens",
           "batch_size", "repetition_penalty")
ROWS = {"expert": "main", "amateur": "asst"}
PARAMS = {"lam": Param(float, lo=0.0), "t": POSITIVE, "score_range": RangeParam(), "aspect": Param(str),
          "alpha": Param(float, lo=0.0, hi=1.0, lo_open=True), "min_keep": Param(int, lo=1),
          "max_new_tokens": Param(int, lo=1), "max_prompt_tokens": Param(int, lo=2), "batch_size": Param(int, lo=1),
          "repetition_penalty": Param(float, lo=0.0, lo_open=True, nullable=True)}


def needs(**_) -> tuple[str, ...]:
    return ("expert", "amateur")


def plan_variants(label: str, params: dict, rows) -> list:
    out = [(row, NAME, {**params, "who": ROWS[row]}) for row in rows if row in ROWS and row != label]
    return out + [(label, NAME, {**params, "who": "contrast"})]
