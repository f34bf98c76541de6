"""QAGS-XSum (Wang, Cho and Lewis, ACL 2020): 239 BBC articles with one BART summary each and human
aspect ``fact``; ``Part`` holds what differs in QAGS-CNNDM. docs/datasets.md (QAGS)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import pandas as pd

from cscore.data.bartscore import record_to_row, records_for
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, table_of


@dataclass
class QagsOptions:
    """QAGS-XSum's and QAGS-CNNDM's options."""
    source_file: str | None = option(doc="a file name inside the dataset's shared folder")


ANSWERS = {"yes": 1, "no": 0}


class Part(NamedTuple):
    """One half of the QAGS release: dataset name (and shared folder), default file, system, article id prefix."""
    name: str
    default_file: str
    system: str
    prefix: str


XSUM = Part("qags_xsum", "mturk_xsum.jsonl", "bart-xsum", "xsum-")
DEFAULT_FILE = XSUM.default_file


def _row(index: int, article: str, hypothesis, fact: float, where: str, part: Part = XSUM) -> dict:
    if not isinstance(article, str):
        raise DataError(f"{where}: the article is not a string ({type(article).__name__})")
    norm = re.sub(r"\s+", "", article.replace("``", '"').replace("''", '"')).lower()  # the article hash
    group = part.prefix + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]
    return {"id": f"{group}/{part.system}", "group": group, "system": part.system, "task": "summarization",
            "source": article, "reference": None, "hypothesis": hypothesis, "lang_pair": None,
            HUMAN_PREFIX + "fact": fact, "doc_index": index}


def sentence_vote(sentence: dict, where: str) -> int:
    """1 when strictly more than half of the workers said yes, else 0."""
    responses = sentence.get("responses")
    if not isinstance(responses, list) or not responses:
        raise DataError(f"{where}: field 'responses' is missing or empty")
    yes = 0
    for j, resp in enumerate(responses):
        answer = resp.get("response") if isinstance(resp, dict) else None
        answer = answer.strip().lower() if isinstance(answer, str) else answer
        if answer not in ANSWERS:
            raise DataError(f"{where}: field 'responses[{j}].response' is {answer!r}, expected 'yes' or 'no'")
        yes += ANSWERS[answer]
    return int(2 * yes > len(responses))


def mturk_row(index: int, rec: dict, where: str, part: Part = XSUM) -> dict:
    if not isinstance(rec.get("article"), str):
        raise DataError(f"{where}: field 'article' is missing or not a string")
    sentences = rec.get("summary_sentences")
    if not isinstance(sentences, list) or not sentences:
        raise DataError(f"{where}: field 'summary_sentences' is missing or empty")
    texts, votes = [], []
    for k, sent in enumerate(sentences):
        if not isinstance(sent, dict) or not isinstance(sent.get("sentence"), str):
            raise DataError(f"{where}: field 'summary_sentences[{k}].sentence' is missing or not a string")
        texts.append(sent["sentence"].strip())
        votes.append(sentence_vote(sent, f"{where}: summary_sentences[{k}]"))
    return _row(index, rec["article"], " ".join(texts), sum(votes) / len(votes), where, part)


def load_part(part: Part, path: str | None = None,
              options: QagsOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    opts = options or QagsOptions()
    file, records, names = records_for(path, opts.source_file, part.name, part.default_file)
    report = LoadReport(part.name, [str(file)])
    rows = []
    for index, (where, rec) in enumerate(records):
        if "summary_sentences" in rec or "article" in rec:  # the crowd file
            rows.append(mturk_row(index, rec, where, part))
        else:  # BARTScore's form (pickle or its JSONL conversion)
            conv = record_to_row(rec, where, ("fact",), names)
            key = conv["group"]  # the pickle's doc key, 0..238
            position = int(key) if key.isascii() and key.isdigit() and len(key) < 19 else index
            rows.append(_row(position, conv["source"], conv["hypothesis"], conv[HUMAN_PREFIX + "fact"], where, part))
    return table_of(rows, report, f"{file}: no records")


load = partial(load_part, XSUM)


@LOADERS
class QagsXsum(Loader):
    name = "qags_xsum"
    task = "summarization"
    Options = QagsOptions
    load = staticmethod(load)
