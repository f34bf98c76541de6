"""QAGS-CNNDM: the CNN/DailyMail half of the QAGS release, read as QAGS-XSum's; docs/datasets.md (QAGS)."""

from __future__ import annotations

import pandas as pd

from cscore.data.loader import LOADERS, Loader
from cscore.data.qags_xsum import Part, QagsOptions, load_part
from cscore.data.schema import LoadReport

CNNDM = Part("qags_cnndm", "mturk_cnndm.jsonl", "bottom-up-cnndm", "cnndm-")
NAME, DEFAULT_FILE, SYSTEM = CNNDM.name, CNNDM.default_file, CNNDM.system


def load(path: str | None = None, options: QagsOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    return load_part(CNNDM, path, options)


@LOADERS
class QagsCnndm(Loader):
    name = "qags_cnndm"
    task = "summarization"
    builds_on = ("qags_xsum",)  # its reader and options
    Options = QagsOptions
    load = staticmethod(load)
