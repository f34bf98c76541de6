"""baseline: established metrics (BLEU, chrF, ROUGE, BERTScore, ...) as rows of the same tables, set in the
``baseline`` config group (``cscore.scorers.baselines``); ``cscore run method=baseline baseline=<name>``."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import setting


@dataclass
class BaselineParams(MethodParams):
    """The settings of each baseline are in the ``baseline`` group (conf/baseline/)."""
    name: str = setting("baseline", doc="the method")
    variant: str = setting("baseline", doc="the score column and label")


@METHODS
class Baseline(Method):
    name = "baseline"
    kind = "baseline"
    aligned = False  # needs one tokenizer: a cross-family pair is refused
    Params = BaselineParams

    @classmethod
    def needs(cls, p) -> tuple[str, ...]:
        return ()

    @classmethod
    def plan_variants(cls, label: str, params: dict, rows) -> list:
        """No comparison rows: the kind's plan step names the columns from the ``baseline`` group."""
        return []
