"""QAGS-XSum (Wang, Cho and Lewis, ACL 2020): 239 BBC articles, each with one summary written by
BART fine-tuned on XSum, and human aspect ``fact`` (factual consistency). See shared/data/README.md,
section 2. The release's other half, QAGS-CNNDM, has the same layout (``cscore.data.qags_cnndm``):
``Part`` holds what differs between the two.

Files:
  mturk_xsum.jsonl   (default) the original crowd file: per article, its summary sentences, each
                     with the yes/no answers of the workers ("is it supported by the article?").
                     A .jsonl file whose records hold ``summary_sentences`` is read this way.
  data.pkl           BARTScore's pickle (read without allowing any class or function, see
                     ``bartscore``); ``ref_summ`` there is a copy of the article, so it is not used.
  qags_xsum.jsonl    the conversion of data.pkl (same fields as summeval.jsonl, scores {"fact"}).
Option: source_file, a file name inside the shared ``qags_xsum/`` folder, used when no path is given.

Score rule for the crowd file: a summary sentence is factual (1) when strictly more than half of
its workers answered "yes" (a tie would count as 0; the file has 3 answers per sentence, so none
occur), and ``fact`` = the fraction of the summary's sentences that are factual. This rule
reproduces BARTScore's ``fact`` exactly for all 239 summaries (tested). Every XSum summary has one
sentence, so ``fact`` is 0 or 1 (116 ones, 123 zeros).

Rows: system is the fixed name ``bart-xsum`` in every file. No article id exists in the data (the
pickle's keys 0..238 and the crowd file's line order are positions only), so group is a stable hash
of the article text, normalized so that both files give the same value: whitespace removed,
PTB quotes (`` and '') turned into ", lower-cased. id = "<group>/bart-xsum". The position (pickle
key / crowd-file record number, 0-based) is kept in the extra column ``doc_index``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from cscore.data.bartscore import record_to_row, records_for
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, validate


@dataclass
class QagsOptions:
    """QAGS-XSum's and QAGS-CNNDM's options."""
    source_file: str | None = option(doc="a file name inside the dataset's shared folder")


ANSWERS = {"yes": 1, "no": 0}


class Part(NamedTuple):
    """One half of the QAGS release: its dataset name (also the shared folder), default file, the
    system that wrote its summaries, and the prefix of its article ids."""
    name: str
    default_file: str
    system: str
    prefix: str


XSUM = Part("qags_xsum", "mturk_xsum.jsonl", "bart-xsum", "xsum-")
NAME, DEFAULT_FILE, SYSTEM = XSUM.name, XSUM.default_file, XSUM.system


def article_group(text: str, prefix: str = XSUM.prefix) -> str:
    norm = re.sub(r"\s+", "", text.replace("``", '"').replace("''", '"')).lower()
    return prefix + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:16]


def _row(index: int, article: str, hypothesis, fact: float, where: str, part: Part = XSUM) -> dict:
    if not isinstance(article, str):
        raise DataError(f"{where}: the article is not a string ({type(article).__name__})")
    group = article_group(article, part.prefix)
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


def load(path: str | None = None, options: QagsOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    return load_part(XSUM, path, options)


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
            rows.append(
                _row(
                    int(key) if key.isascii() and key.isdigit() and len(key) < 19 else index,
                    conv["source"],
                    conv["hypothesis"],
                    conv[HUMAN_PREFIX + "fact"],
                    where,
                    part,
                )
            )
    if not rows:
        raise DataError(f"{file}: no records")
    report.n_read = len(rows)
    return validate(pd.DataFrame(rows), report), report


@LOADERS
class QagsXsum(Loader):
    name = "qags_xsum"
    task = "summarization"
    Options = QagsOptions
    load = staticmethod(load)
