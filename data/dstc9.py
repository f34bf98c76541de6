"""The DSTC9 interactive-evaluation track (as flattened for Yeh et al. 2021): 2200 open-domain
dialogues with an overall score; fields: docs/datasets.md (DSTC9)."""

from __future__ import annotations

import pandas as pd

from cscore.data import paths
from cscore.data.io import read_json
from cscore.data.loader import LOADERS, Loader, NoOptions
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, is_number, table_of

DATASET_DIR, DEFAULT_FILE = "dstc9", "dstc9_data.json"
NAME = "dstc9"
NO_REF = "NO REF"


def load(path: str | None = None, options: NoOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    file = paths.resolve(path, DATASET_DIR, DEFAULT_FILE)
    data = read_json(file)
    if not isinstance(data, dict):
        raise DataError(f"{file}: expected a JSON object of parallel lists, got {type(data).__name__}")
    for key in ("contexts", "responses", "scores"):
        if not isinstance(data.get(key), list):
            raise DataError(f"{file}: missing list {key!r} (keys: {sorted(data)})")
    refs = data.get("references")
    n = len(data["contexts"])
    lengths = {k: len(data[k]) for k in ("contexts", "responses", "scores")}
    if refs is not None:
        lengths["references"] = len(refs) if isinstance(refs, list) else -1
    if set(lengths.values()) != {n}:
        raise DataError(f"{file}: the parallel lists differ in length: {lengths}")
    report = LoadReport(NAME, [str(file)], n)
    rows = []
    for i, (context, response, score) in enumerate(zip(data["contexts"], data["responses"], data["scores"])):
        where, row_id = f"{file}: index {i}", f"dstc9/{i}"
        if not isinstance(context, list) or not all(isinstance(t, str) for t in context):
            raise DataError(f"{where}: contexts[{i}] must be a list of strings")
        if not isinstance(response, str):
            raise DataError(f"{where}: responses[{i}] must be a string")
        if score is None:
            report.drop(row_id, "missing score", where)
            continue
        if not is_number(score):
            raise DataError(f"{where}: scores[{i}] is not a number: {score!r}")
        ref = refs[i] if refs is not None else None
        rows.append({"id": row_id, "group": row_id, "system": "unknown", "task": "dialogue",
                     "source": "\n".join(context), "reference": None if ref in (None, NO_REF) else ref,
                     "hypothesis": response, "lang_pair": None, HUMAN_PREFIX + "overall": float(score)})
    return table_of(rows, report, f"{file}: no scored dialogs")


@LOADERS
class Dstc9(Loader):
    name = "dstc9"
    task = "dialogue"
    load = staticmethod(load)
