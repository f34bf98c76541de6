"""FED (Mehri and Eskenazi, SIGDIAL 2020): open-domain dialogue rated at turn and dialog level
(``data.level``); no references. Fields, groups and aspects: docs/datasets.md (FED)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from cscore.data import paths
from cscore.data.io import read_json
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, is_number, require, table_of

NAME = "fed"
DATASET_DIR, DEFAULT_FILE = "fed", "fed_data.json"
LEVELS = ("both", "turn", "dialog")


@dataclass
class FedOptions:
    level: str | None = option(doc="FED: turn | dialog | both")


SYSTEM_LABEL = re.compile(r"^System:\s?")


def aspect_name(name: str) -> str:
    """'Semantically appropriate' -> 'semantically_appropriate' (lower_snake_case)."""
    return re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_")


def _scores(annotations: dict, row_id: str, where: str, report: LoadReport) -> dict:
    scores = {}
    for raw_name, values in annotations.items():
        aspect = aspect_name(str(raw_name))
        if not aspect:
            raise DataError(f"{where}: annotation name {raw_name!r} has no letters or digits")
        col = HUMAN_PREFIX + aspect
        if col in scores:
            raise DataError(f"{where}: two annotation names map to {col!r}")
        if not isinstance(values, list):
            values = [values]
        for k, v in enumerate(values):
            if not is_number(v):
                kind = "N/A" if isinstance(v, str) and v.strip().upper().startswith("N/A") else "non-numeric"
                report.ignore(row_id, f"annotation {kind} ignored: {aspect}",
                              f"{where}, {raw_name!r}[{k}] = {str(v)[:80]!r}")
        kept = [float(v) for v in values if is_number(v)]
        scores[col] = sum(kept) / len(kept) if kept else math.nan
        if not kept:
            report.ignore(row_id, f"no numeric annotation ({col} = NaN)", f"{where}, {raw_name!r}")
    return scores


def _split_last_system(context: str) -> tuple[str, str]:
    lines = context.split("\n")
    last = max((i for i, line in enumerate(lines) if SYSTEM_LABEL.match(line)), default=None)
    if last is None:
        return context, ""
    return "\n".join(lines[:last]), SYSTEM_LABEL.sub("", lines[last], count=1)


def _items(data, file) -> list[tuple[int, str, dict]]:
    """(index, "turn" | "dialog", item) for every item of the array, each checked."""
    if not isinstance(data, list):
        raise DataError(f"{file}: expected a JSON array of items, got {type(data).__name__}")
    items = []
    for i, item in enumerate(data):
        where = f"{file}: item {i}"
        if not isinstance(item, dict):
            raise DataError(f"{where}: expected an object, got {type(item).__name__}")
        require(item, ("context", "system", "annotations"), where)
        if not isinstance(item["context"], str) or not isinstance(item["annotations"], dict):
            raise DataError(f"{where}: 'context' must be a string and 'annotations' an object")
        if "response" in item and not isinstance(item["response"], str):
            raise DataError(f"{where}: 'response' must be a string")
        items.append((i, "turn" if "response" in item else "dialog", item))
    return items


def _groups(items) -> dict[int, str]:
    """Item index -> conversation: pending turn items join the next dialog item whose context they prefix."""
    group = {i: f"fed/turn/{i}" for i, kind, _ in items if kind == "turn"}  # unless a dialog item continues it
    pending, n_conv = [], 0
    for i, kind, item in items:
        if kind == "turn":
            pending.append((i, item))
            continue
        group[i] = conv = f"fed/conv{n_conv}"
        n_conv += 1
        for j, turn in pending:
            if item["context"] == turn["context"] or item["context"].startswith(turn["context"] + "\n"):
                group[j] = conv
        pending = []
    return group


def load(path: str | None = None, options: FedOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    """FED's turn- and/or dialog-level items (``data.level``: both, the default, turn or dialog)."""
    level = (options or FedOptions()).level or "both"
    if level not in LEVELS:
        raise DataError(f"data.level={level} is not a FED level; use data.level=turn, dialog or both")
    file = paths.resolve(path, DATASET_DIR, DEFAULT_FILE)
    items = _items(read_json(file), file)
    group = _groups(items)
    report = LoadReport(NAME if level == "both" else f"{NAME}_{level}", [str(file)])
    rows = []
    for i, kind, item in items:
        if level != "both" and kind != level:
            continue
        row_id = f"fed/{kind}/{i}"
        if kind == "turn":
            source, hypothesis = item["context"], SYSTEM_LABEL.sub("", item["response"], count=1)
        else:
            source, hypothesis = _split_last_system(item["context"])
        rows.append({"id": row_id, "group": group[i], "system": str(item["system"]), "task": "dialogue",
                     "source": source, "reference": None, "hypothesis": hypothesis, "lang_pair": None, "level": kind,
                     **_scores(item["annotations"], row_id, f"{file}: item {i}", report)})
    return table_of(rows, report, f"{file}: no {level}-level items")


@LOADERS
class Fed(Loader):
    name = "fed"
    task = "dialogue"
    Options = FedOptions
    load = staticmethod(load)
