"""baseline: established metrics (BLEU, chrF, ROUGE, BERTScore, BARTScore, T5Score) as rows of the
same tables. The metrics and their settings come from the ``baseline`` config group
(``cscore.scorers.baselines``), not from method parameters; ``cscore run method=baseline
baseline=<name>`` scores them (kind ``baseline``). They read no model pair."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.methods.params import setting

NAME = "baseline"
KIND = "baseline"
ACCEPTS = ()


@dataclass
class Params:
    """The settings of each baseline are in the ``baseline`` group (conf/baseline/)."""
    name: str = setting("baseline", doc="the method")
    variant: str = setting("baseline", doc="the score column and label")


def needs(**_) -> tuple[str, ...]:
    return ()


def plan_variants(label: str, cfg: dict, rows) -> list:
    """No comparison rows: the kind's plan step names the columns from the ``baseline`` group."""
    return []
