"""QAGS-CNNDM: the CNN/DailyMail half of the QAGS release, read as QAGS-XSum's; docs/datasets.md (QAGS)."""

from __future__ import annotations

from functools import partial

from cscore.data.loader import LOADERS, Loader
from cscore.data.qags_xsum import Part, QagsOptions, load_part

CNNDM = Part("qags_cnndm", "mturk_cnndm.jsonl", "bottom-up-cnndm", "cnndm-")
DEFAULT_FILE = CNNDM.default_file


@LOADERS
class QagsCnndm(Loader):
    name = "qags_cnndm"
    task = "summarization"
    builds_on = ("qags_xsum",)  # its reader and options
    Options = QagsOptions
    load = staticmethod(partial(load_part, CNNDM))
