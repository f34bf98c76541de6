"""The one example table every loader returns, one row per scored hypothesis: ``id`` (unique), ``group``
(the rows sharing a source), ``system``, ``task`` (summarization | translation | dialogue), ``source``,
``reference`` (or None), ``hypothesis`` (non-empty), ``lang_pair`` (e.g. "zh-en", else None) and a float
column ``human.<aspect>`` per aspect. Every removed row is recorded in a ``LoadReport``."""

from __future__ import annotations

import logging
import math
import numbers
from collections import Counter
from dataclasses import dataclass, field
from functools import partialmethod

import numpy as np
import pandas as pd

from cscore.errors import DataError  # defined in errors.py
from cscore.rundir import HUMAN as HUMAN_PREFIX  # human.<aspect>: the run directory's column prefix
from cscore.rundir import human_columns

REQUIRED = ("id", "group", "system", "task", "source", "hypothesis")
OPTIONAL = ("reference", "lang_pair")
TASKS = ("summarization", "translation", "dialogue")


def is_number(value) -> bool:
    """A finite real number that is not a bool (what a human score may be)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def require(record, keys, where: str) -> None:
    """A dict holding ``keys``, or a DataError naming where."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a dict, got {type(record).__name__}")
    for key in keys:
        if key not in record:
            raise DataError(f"{where}: missing field {key!r}")


@dataclass
class LoadReport:
    """What a loader read and left out: ``excluded`` rows (an option asked), ``dropped`` rows (not scorable),
    ``ignored`` values of kept rows; ``references``: human-reference systems scored as systems (-> rows)."""

    dataset: str
    source_files: list[str] = field(default_factory=list)
    n_read: int = 0
    dropped: list[dict] = field(default_factory=list)
    excluded: list[dict] = field(default_factory=list)
    ignored: list[dict] = field(default_factory=list)
    references: dict[str, int] = field(default_factory=dict)

    def _add(self, kind: str, row_id, reason: str, where: str = "") -> None:
        getattr(self, kind).append({"id": str(row_id), "reason": reason, "where": where})

    drop = partialmethod(_add, "dropped")
    exclude = partialmethod(_add, "excluded")
    ignore = partialmethod(_add, "ignored")

    @property
    def left_out(self) -> int:
        """Rows read but not in the table (excluded + dropped)."""
        return len(self.excluded) + len(self.dropped)

    def merge(self, other: "LoadReport") -> None:
        self.n_read += other.n_read
        for name in ("source_files", "dropped", "excluded", "ignored"):
            getattr(self, name).extend(getattr(other, name))
        for system, n in other.references.items():
            self.references[system] = self.references.get(system, 0) + n

    def count_references(self, table: pd.DataFrame) -> None:
        """``references`` recounted on the rows of ``table`` that will be scored (after a split)."""
        counts = table["system"].value_counts()
        self.references = {s: int(counts[s]) for s in self.references if counts.get(s, 0)}

    def reference_line(self) -> str:
        """'mqm: 529 human-reference rows (system ref) scored as a system; ...' ('' when none)."""
        n = sum(self.references.values())
        if not n:
            return ""
        names = (f"system {next(iter(self.references))}" if len(self.references) == 1 else
                 "systems " + ", ".join(f"{s} {k}" for s, k in self.references.items()))
        return (f"{self.dataset}: {n} human-reference row{'' if n == 1 else 's'} ({names}) scored as "
                f"{'a system' if len(self.references) == 1 else 'systems'}; data.exclude_references=true drops them")

    def _entries(self):
        return [(kind, e) for kind in ("excluded", "dropped", "ignored") for e in getattr(self, kind)]

    def reasons(self) -> list[dict]:
        """[{"kind", "reason", "count"}] in order of first occurrence within each kind (excluded first)."""
        counts = Counter((kind, e["reason"]) for kind, e in self._entries())
        return [{"kind": k, "reason": r, "count": n} for (k, r), n in counts.items()]

    def console_lines(self) -> list[tuple[int, str]]:
        """One (logging level, text) per reason: INFO for a deliberate exclusion, WARNING otherwise."""
        out = []
        for r in self.reasons():
            noun = ("value" if r["kind"] == "ignored" else "row") + ("" if r["count"] == 1 else "s")
            level = logging.INFO if r["kind"] == "excluded" else logging.WARNING
            out.append((level, f"{self.dataset}: {r['kind']} {r['count']} {noun}: {r['reason']}"))
        if self.references:
            out.append((logging.INFO, self.reference_line()))
        return out

    def details(self) -> list[dict]:
        """Every entry, one per row (or value): {"kind", "id", "reason", "where"}."""
        return [{"kind": kind, **e} for kind, e in self._entries()]

    def summary(self, details: bool = False) -> dict:
        """Counts by kind and reason; with ``details`` also the per-row list (``details()``)."""
        def by_reason(kind):
            return {r["reason"]: r["count"] for r in self.reasons() if r["kind"] == kind}

        out = {"dataset": self.dataset, "files": self.source_files, "read": self.n_read,
               "excluded": len(self.excluded), "excluded_by_reason": by_reason("excluded"),
               "dropped": len(self.dropped), "dropped_by_reason": by_reason("dropped"),
               "ignored_values": len(self.ignored), "ignored_by_reason": by_reason("ignored"),
               "human_references_scored": sum(self.references.values()),
               "human_references_by_system": dict(self.references)}
        if details:
            out["details"] = self.details()
        return out


def _float_or_nan(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def validate(df: pd.DataFrame, report: LoadReport, where: dict | None = None) -> pd.DataFrame:
    """Check the table, dropping (and recording) rows with an empty hypothesis or source; ``where``: id -> place."""
    where = where or {}
    label = f"{report.dataset} ({', '.join(report.source_files)})" if report.source_files else report.dataset
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise DataError(f"{label}: example table lacks required columns {missing}")
    for c in OPTIONAL:
        if c not in df.columns:
            df[c] = None
    if not human_columns(df.columns):
        raise DataError(f"{label}: no human score columns ({HUMAN_PREFIX}<aspect>)")
    df = df.copy()
    for c in ("id", "group", "system"):
        df[c] = df[c].astype(str)
    dup = df["id"][df["id"].duplicated()].unique()
    if len(dup):
        raise DataError(f"{label}: duplicate ids {list(dup[:5])}{' ...' if len(dup) > 5 else ''}")
    bad_task = sorted(set(df["task"]) - set(TASKS))
    if bad_task:
        raise DataError(f"{label}: unknown task(s) {bad_task}; expected one of {TASKS}")
    for c in human_columns(df.columns):
        try:
            values = pd.to_numeric(df[c], errors="coerce")
        except OverflowError:  # an integer too large for a float: not a usable score either
            values = pd.Series([_float_or_nan(v) for v in df[c]], index=df.index, dtype=np.float64)
        for what, mask in (("non-numeric", values.isna() & df[c].notna()), ("infinite", np.isinf(values))):
            bad = df["id"][mask]
            if len(bad):
                at = f" (first at {where[bad.iloc[0]]})" if where.get(bad.iloc[0]) else ""
                raise DataError(f"{label}: {what} {c} for ids {list(bad[:5])}{at}")
        df[c] = values.astype(np.float64)
    keep = pd.Series(True, index=df.index)
    for c in ("hypothesis", "source"):  # a row with neither is dropped for its hypothesis
        empty = keep & (df[c].isna() | (df[c].astype(str).str.strip() == ""))
        for row_id in df.loc[empty, "id"]:
            report.drop(row_id, f"empty {c}", where.get(row_id, ""))
        keep &= ~empty
    df = df.loc[keep].reset_index(drop=True)
    if df.empty:
        raise DataError(f"{label}: no usable rows left ({report.left_out} left out: "
                        f"{len(report.excluded)} excluded, {len(report.dropped)} dropped)")
    cols = list(REQUIRED) + list(OPTIONAL) + human_columns(df.columns)
    extra = [c for c in df.columns if c not in cols]
    return df[cols + extra]


def table_of(rows: list[dict], report: LoadReport, empty: str) -> tuple[pd.DataFrame, LoadReport]:
    """A loader's validated table of ``rows`` and its report; ``empty``: the DataError when there are none."""
    if not rows:
        raise DataError(empty)
    report.n_read = report.n_read or len(rows)
    return validate(pd.DataFrame(rows), report), report
