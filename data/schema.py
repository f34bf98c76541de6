"""The one example table every loader returns.

Columns (one row per scored hypothesis):
  id          unique string id of the row
  group       document / source-segment id (the hypotheses of one group share a source)
  system      the system that produced the hypothesis
  task        summarization | translation | dialogue
  source      source text (article, source sentence, dialogue context)
  reference   reference text, or None
  hypothesis  the text to score (non-empty)
  lang_pair   e.g. "zh-en" for translation, else None
  human.<aspect>  human scores, one float column per aspect
Nothing is dropped silently: every removed row is recorded in a ``LoadReport``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

REQUIRED = ("id", "group", "system", "task", "source", "hypothesis")
OPTIONAL = ("reference", "lang_pair")
HUMAN_PREFIX = "human."
TASKS = ("summarization", "translation", "dialogue")


class DataError(ValueError):
    """A dataset that cannot be used as given (the message says where and why)."""


@dataclass
class LoadReport:
    dataset: str
    source_files: list[str] = field(default_factory=list)
    n_read: int = 0
    dropped: list[dict] = field(default_factory=list)  # rows left out: {"id", "reason", "where"}
    ignored: list[dict] = field(default_factory=list)  # values left out of a kept row (e.g. an N/A rating)

    def drop(self, row_id, reason: str, where: str = "") -> None:
        self.dropped.append({"id": str(row_id), "reason": reason, "where": where})

    def ignore(self, row_id, reason: str, where: str = "") -> None:
        self.ignored.append({"id": str(row_id), "reason": reason, "where": where})

    def summary(self) -> dict:
        def by_reason(entries):
            out: dict[str, int] = {}
            for d in entries:
                out[d["reason"]] = out.get(d["reason"], 0) + 1
            return out

        return {"dataset": self.dataset, "files": self.source_files, "read": self.n_read,
                "dropped": len(self.dropped), "dropped_by_reason": by_reason(self.dropped),
                "ignored_values": len(self.ignored), "ignored_by_reason": by_reason(self.ignored)}


def human_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(HUMAN_PREFIX)]


def aspects(df: pd.DataFrame) -> list[str]:
    return [c[len(HUMAN_PREFIX):] for c in human_columns(df)]


def validate(df: pd.DataFrame, report: LoadReport) -> pd.DataFrame:
    """Check the table; drop (and record) rows with an empty hypothesis; raise on the rest."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise DataError(f"{report.dataset}: example table lacks required columns {missing}")
    for c in OPTIONAL:
        if c not in df.columns:
            df[c] = None
    if not human_columns(df):
        raise DataError(f"{report.dataset}: no human score columns ({HUMAN_PREFIX}<aspect>)")
    df = df.copy()
    for c in ("id", "group", "system"):
        df[c] = df[c].astype(str)
    dup = df["id"][df["id"].duplicated()].unique()
    if len(dup):
        raise DataError(f"{report.dataset}: duplicate ids {list(dup[:5])}{' ...' if len(dup) > 5 else ''}")
    bad_task = sorted(set(df["task"]) - set(TASKS))
    if bad_task:
        raise DataError(f"{report.dataset}: unknown task(s) {bad_task}; expected one of {TASKS}")
    for c in human_columns(df):
        values = pd.to_numeric(df[c], errors="coerce")
        bad = df["id"][values.isna() & df[c].notna()]
        if len(bad):
            raise DataError(f"{report.dataset}: non-numeric {c} for ids {list(bad[:5])}")
        df[c] = values.astype(np.float64)
    empty = df["hypothesis"].isna() | (df["hypothesis"].astype(str).str.strip() == "")
    for row_id in df.loc[empty, "id"]:
        report.drop(row_id, "empty hypothesis")
    empty_src = ~empty & (df["source"].isna() | (df["source"].astype(str).str.strip() == ""))
    for row_id in df.loc[empty_src, "id"]:
        report.drop(row_id, "empty source")
    df = df.loc[~(empty | empty_src)].reset_index(drop=True)
    if df.empty:
        raise DataError(f"{report.dataset}: no usable rows left ({len(report.dropped)} dropped)")
    cols = list(REQUIRED) + list(OPTIONAL) + human_columns(df)
    extra = [c for c in df.columns if c not in cols]
    return df[cols + extra]
