"""QAGS-CNNDM (Wang, Cho and Lewis, ACL 2020): the other half of the QAGS release beside XSum.
CNN/DailyMail articles, each with one summary from the bottom-up summarizer of Gehrmann et al.
(2018), as the QAGS paper states (235 summaries), and human aspect ``fact`` (factual consistency).

Files, read exactly as QAGS-XSum's (``cscore.data.qags_xsum``, the same rules and checks):
  mturk_cnndm.jsonl  (default) the original crowd file of W4ngatang/qags (``data/mturk_cnndm.jsonl``):
                     per article its summary sentences (several per summary here), each with the
                     yes/no answers of three workers.
  data.pkl / .jsonl  BARTScore's unified form of the same data (its QAGS_CNN folder), if you have it.
Default place: ``<shared data>/qags_cnndm/mturk_cnndm.jsonl``; anywhere else: data.path=<file>.

``fact`` = the share of the summary's sentences that a strict majority of workers judged supported,
so with three sentences it takes the values 0, 1/3, 2/3 and 1. Rows: system ``bottom-up-cnndm``;
group ``cnndm-<hash of the article>``; id ``<group>/bottom-up-cnndm``; ``doc_index`` the position."""

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
