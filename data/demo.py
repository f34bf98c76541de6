"""The offline demo set: a SYNTHETIC sanity set written for cscore (demo/CARD.md); numbers on it
say nothing about real metric quality."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cscore.data.io import iter_jsonl
from cscore.data.loader import LOADERS, Loader, NoOptions
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, require, table_of

DEMO_FILE = Path(__file__).parent / "demo" / "demo.jsonl"


def load(path: str | None = None, options: NoOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    file = Path(path) if path else DEMO_FILE
    if not file.is_file():
        raise DataError(f"data file {file} does not exist (data.path={path})")
    report = LoadReport("demo", [str(file)])
    rows = []
    for where, rec in iter_jsonl(file):
        require(rec, ("id", "doc_id", "system", "source", "hypothesis", "scores"), where)
        if not isinstance(rec["scores"], dict):
            raise DataError(f"{where}: field 'scores' is not an object ({type(rec['scores']).__name__})")
        rows.append({"id": rec["id"], "group": rec["doc_id"], "system": rec["system"], "task": "summarization",
                     "source": rec["source"], "reference": rec.get("reference"), "hypothesis": rec["hypothesis"],
                     "lang_pair": None, **{HUMAN_PREFIX + k: v for k, v in rec["scores"].items()}})
    return table_of(rows, report, f"{file}: no records")


@LOADERS
class Demo(Loader):
    name = "demo"
    task = "summarization"
    load = staticmethod(load)
