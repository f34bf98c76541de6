"""baseline: established metrics (BLEU, chrF, ROUGE, BERTScore, BARTScore, T5Score) as rows of the
same tables. The metrics and their settings come from the ``baseline`` config group
(``cscore.scorers.baselines``), not from method parameters; ``cscore run method=baseline
baseline=<name>`` scores them (kind ``baseline``). They read no model pair."""

from __future__ import annotations

NAME = "baseline"
KIND = "baseline"
ACCEPTS = ()


def needs(**_) -> tuple[str, ...]:
    return ()


def plan_variants(label: str, cfg: dict, rows) -> list:
    """No comparison rows: the kind's plan step names the columns from the ``baseline`` group."""
    return []
