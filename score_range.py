"""The judge's score range (``method.score_range``) check, shared by the prompt loader
(``cscore.data.judge_prompts``) and the judge's parser (``cscore.scorers.judge.parse``)."""

from __future__ import annotations

import numbers

from cscore.errors import ConfigError


def check_range(lo, hi) -> None:
    """A ConfigError unless lo and hi are integers with lo < hi."""
    for name, value in (("minimum", lo), ("maximum", hi)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(f"the judge's score range needs integers; its {name} is {value!r}")
    if lo >= hi:
        raise ConfigError(f"the judge's score range must have minimum < maximum, got {lo}-{hi}")
