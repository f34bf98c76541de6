"""``data=table``: your own outputs and ratings, from any table (``formats``) and a column mapping
(``data.columns``: role -> column); options and defaults: docs/datasets.md (Your own data)."""

from __future__ import annotations

import hashlib
import math
import numbers
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cscore.data import formats
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.options import check_options
from cscore.data.schema import HUMAN_PREFIX, TASKS, DataError, LoadReport, validate
from cscore.registry import suggest

NAME = "table"
COLUMN_ROLES = ("hypothesis", "source", "reference", "system", "group", "id", "lang_pair")  # one column each
ROLES = COLUMN_ROLES + ("human",)
REQUIRED_ROLES = ("hypothesis", "source")
TEXT_ROLES = ("hypothesis", "source", "reference")
MISSING_SCORE = {"", "na", "n/a", "nan", "null", "none"}
NO_SYSTEM = "unknown"


@dataclass
class TableOptions:
    task: str | None = option(doc="summarization | translation | dialogue (picks the prompt)")
    columns: dict | None = option(doc="role -> column name; null: a column named like the role, if there is one")
    lang_pair: str | None = option(doc="e.g. de-en, for every row (or map a column with columns.lang_pair)")
    hub_id: str | None = option(doc="read datasets.load_dataset(hub_id) instead of data.path (needs network)")
    split: str | None = option(doc="which split of a DatasetDict (may be left out when there is only one)")


def map_columns(given: dict, columns, label: str) -> dict:
    """role -> column name (or None) for every role but human."""
    out = {}
    for role in COLUMN_ROLES:
        name = given.get(role)
        if name is not None:
            if name not in columns:
                hint = suggest(name, columns, quoted=True)
                raise DataError(f"{label}: no column {name!r} (data.columns.{role}={name}){hint}; "
                                f"columns: {list(columns)}")
            out[role] = name
        elif role in columns:
            out[role] = role
        elif role in REQUIRED_ROLES:
            raise DataError(f"{label}: no {role} column; set data.columns.{role}=<column> (columns: {list(columns)})")
        else:
            out[role] = None
    return out


def map_human(given, columns, label: str) -> dict:
    """aspect -> column from data.columns.human (a name, a list of names or a mapping); when not given,
    every "human.<aspect>" column."""
    if not given:
        given = [c for c in columns if str(c).startswith(HUMAN_PREFIX)]
    if not given:
        raise DataError(f"{label}: no human score columns; set data.columns.human=[<column>, ...] "
                        f"(columns: {list(columns)})")
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, (list, tuple, dict)):
        raise DataError(f"{label}: data.columns.human must be a column name, a list of names or a mapping "
                        f"aspect -> column; got {given!r}")
    pairs = list(given.items()) if isinstance(given, dict) else [(str(c).removeprefix(HUMAN_PREFIX), c) for c in given]
    out = {}
    for aspect, name in pairs:
        if name not in columns:
            raise DataError(f"{label}: no column {name!r} (data.columns.human){suggest(name, columns, quoted=True)}; "
                            f"columns: {list(columns)}")
        if str(aspect) in out:
            raise DataError(f"{label}: aspect {aspect!r} named twice in data.columns.human")
        out[str(aspect)] = name
    return out


def _missing(value) -> bool:
    """None, NaN or pd.NA (a list or mapping is never missing)."""
    return not isinstance(value, (list, tuple, dict, np.ndarray)) and bool(pd.isna(value))


def as_text(value, where: str, column: str, role: str):
    """A text cell: a string, a list of strings (joined with newlines), or None when missing."""
    if _missing(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise DataError(f"{where}: column {column!r} (data.columns.{role}) holds {type(value).__name__} "
                    f"{str(value)[:60]!r}, expected text")


def as_key(value, where: str, column: str, role: str) -> str:
    """An id / system / group / lang_pair cell: a non-empty string or an integer, as a string."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, float) and value.is_integer():  # integers of a column with gaps come as floats
        return str(int(value))
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise DataError(f"{where}: column {column!r} (data.columns.{role}) is empty or not a name: {value!r}")


def as_lang_pair(value, where: str, column: str, role: str):
    """A language-pair cell; may be empty (a row that is not a translation)."""
    return None if _missing(value) or value == "" else as_key(value, where, column, role)


def as_score(value) -> float | None:
    """A human score as a float (NaN when missing); None when it is not a number."""
    if _missing(value) or (isinstance(value, str) and value.strip().lower() in MISSING_SCORE):
        return math.nan
    if not isinstance(value, (str, numbers.Real, np.bool_)):
        return None
    try:
        value = float(value)
    except (ValueError, OverflowError):  # not a number; an integer too large for a float
        return None
    return value if math.isfinite(value) else None


def human_scores(df: pd.DataFrame, human: dict, where: list[str], ids: list[str], label: str,
                 report: LoadReport) -> dict:
    """human.<aspect> -> list of floats; a non-numeric cell is a DataError, a missing one NaN (recorded)."""
    out = {}
    for aspect, column in human.items():
        parsed = [as_score(v) for v in df[column]]
        bad = [i for i, v in enumerate(parsed) if v is None]
        if bad:
            more = f" (and {len(bad) - 1} more rows)" if len(bad) > 1 else ""
            raise DataError(f"{where[bad[0]]}: column {column!r} (data.columns.human) is not numeric: "
                            f"{df[column].iloc[bad[0]]!r}{more}")
        values = [v for v in parsed if v is not None]  # every one: a None raised above
        if all(math.isnan(v) for v in values):
            raise DataError(f"{label}: column {column!r} (data.columns.human) holds no scores")
        for i, v in enumerate(values):
            if math.isnan(v):
                report.ignore(ids[i], f"missing human score: {aspect}", where[i])
        out[HUMAN_PREFIX + aspect] = values
    return out


def load(path: str | None = None, options: TableOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    opts = options or TableOptions()
    if not isinstance(opts.columns or {}, dict):
        raise DataError(f"data.columns must map roles to column names, e.g. data.columns.hypothesis=<column>; "
                        f"got {opts.columns!r}")
    given = check_options(opts.columns or {}, ROLES, NAME, prefix="data.columns.")
    if opts.task not in TASKS:
        raise DataError(f"data=table needs data.task={'|'.join(TASKS)} (it picks the prompt); got {opts.task}")
    if bool(path) == bool(opts.hub_id):
        raise DataError("data=table reads data.path=<file or save_to_disk folder> or data.hub_id=<hub id>: set one")
    if opts.lang_pair and given["lang_pair"]:
        raise DataError("set data.lang_pair or data.columns.lang_pair, not both")
    label, df, where = formats.read(path, opts.hub_id, opts.split)
    if df.empty:
        raise DataError(f"{label}: no rows")
    columns = map_columns(given, list(df.columns), label)
    human = map_human(given["human"], list(df.columns), label)

    def cells(role, convert):
        col = columns[role]
        return [convert(v, where[i], col, role) for i, v in enumerate(df[col])] if col else None

    ids = cells("id", as_key) or [f"row{i}" for i in range(1, len(df) + 1)]
    dup = sorted(i for i, n in Counter(ids).items() if n > 1)
    if dup:
        raise DataError(f"{label}: column {columns['id']!r} (data.columns.id) repeats ids {dup[:5]}")
    texts = {role: cells(role, as_text) or [None] * len(df) for role in TEXT_ROLES}
    texts["reference"] = [r if r and r.strip() else None for r in texts["reference"]]
    report = LoadReport(NAME, [label], len(df))
    table = pd.DataFrame({
        "id": ids,
        "group": cells("group", as_key) or ["src-" + hashlib.sha256(s.encode("utf-8")).hexdigest()[:16] if s else i
                                            for s, i in zip(texts["source"], ids)],
        "system": cells("system", as_key) or [NO_SYSTEM] * len(df),
        "task": opts.task,
        **texts,
        "lang_pair": cells("lang_pair", as_lang_pair) or [opts.lang_pair] * len(df),
        **human_scores(df, human, where, ids, label, report),
    })
    return validate(table, report, dict(zip(ids, where))), report


@LOADERS
class Table(Loader):
    name = "table"
    task = None  # data.task says
    Options = TableOptions
    load = staticmethod(load)
