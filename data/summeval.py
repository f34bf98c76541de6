"""SummEval (Fabbri et al., TACL 2021) in BARTScore's unified form: 100 CNN/DailyMail articles x 16
systems, the mean of 3 expert ratings (1-5) for four aspects; docs/datasets.md (SummEval)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from cscore.data.bartscore import record_to_row, records_for
from cscore.data.io import import_datasets, iter_jsonl
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.schema import HUMAN_PREFIX, DataError, LoadReport, is_number, table_of

NAME = "summeval"
DEFAULT_FILE = "summeval.jsonl"
ASPECTS = ("coherence", "consistency", "fluency", "relevance")
RATERS, SCALE = 3, (1, 5)  # three expert ratings on 1-5 per summary and aspect
EXPERTS = "experts."  # experts.<aspect>: the per-expert ratings, where the file has them


@dataclass
class SummevalOptions:
    source_file: str | None = option(doc="a file name inside the dataset's shared folder")
    hub_id: str | None = option(doc="load with datasets.load_dataset(hub_id, split=...) (needs network)")
    hub_split: str | None = option(doc="the split of hub_id")
    annotations: str | None = option(doc="SummEval: its original model_annotations.aligned.jsonl, whose "
                                         "per-expert ratings give SummaC's labels")


def hub_records(hub_id: str, split: str | None) -> tuple[str, Iterator[tuple[str, dict]], dict]:
    """(label, (where, record) of each row, no pickle field names): ``records_for``'s answer for a hub dataset."""
    datasets = import_datasets(f"data.hub_id={hub_id}")
    ds = datasets.load_dataset(hub_id, split=split)
    if split is None:  # a DatasetDict
        if len(ds) != 1:
            raise DataError(f"hub dataset {hub_id!r} has splits {sorted(ds)}; choose one with data.hub_split=<split>")
        split, ds = next(iter(ds.items()))
    label = f"hub:{hub_id}[{split}]"
    return label, ((f"{label}: row {i}", dict(rec)) for i, rec in enumerate(ds)), {}


def with_experts(row: dict, rec: dict, where: str) -> dict:
    """``row`` with ``experts.<aspect>`` from the record's ``expert_scores``, checked against its mean."""
    given = rec.get("expert_scores")
    if given is None:
        return row
    if not isinstance(given, Mapping):
        raise DataError(f"{where}: field 'expert_scores' is not a mapping of aspect -> ratings")
    for aspect, ratings in given.items():
        if aspect not in ASPECTS:
            raise DataError(f"{where}: unexpected aspect 'expert_scores.{aspect}'; expected {list(ASPECTS)}")
        values = list(ratings) if hasattr(ratings, "__iter__") and not isinstance(ratings, str) else None
        if not values or not all(is_number(v) for v in values):
            raise DataError(f"{where}: 'expert_scores.{aspect}' must be a non-empty list of numbers, got {ratings!r}")
        mean = sum(values) / len(values)
        if abs(mean - row[HUMAN_PREFIX + aspect]) > 1e-6:
            raise DataError(f"{where}: the mean of 'expert_scores.{aspect}' ({mean:g}) is not "
                            f"scores.{aspect} ({row[HUMAN_PREFIX + aspect]:g})")
        row[EXPERTS + aspect] = [float(v) for v in values]
    return row


def read_annotations(path: str) -> dict[tuple[str, str], dict[str, list]]:
    """{(document, system): {aspect: the experts' ratings}} of SummEval's model_annotations.aligned.jsonl."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"data.annotations={path}: no such file (SummEval's model_annotations.aligned.jsonl)")
    out: dict[tuple[str, str], dict[str, list]] = {}
    for where, rec in iter_jsonl(file):
        experts = rec.get("expert_annotations")
        if not isinstance(rec.get("id"), str) or not isinstance(rec.get("model_id"), str):
            raise DataError(f"{where}: expected SummEval's 'id' and 'model_id' fields "
                            "(model_annotations.aligned.jsonl)")
        if not isinstance(experts, list) or not experts or not all(isinstance(e, Mapping) for e in experts):
            raise DataError(f"{where}: field 'expert_annotations' must be a non-empty list of {{aspect: rating}}")
        out[(rec["id"], rec["model_id"])] = {a: [e.get(a) for e in experts] for a in ASPECTS
                                             if any(a in e for e in experts)}
    return out


def with_annotations(records, annotations: dict, label: str):
    """The records with ``expert_scores`` from ``annotations``; every record must have its entry."""
    for where, rec in records:
        key = (rec.get("doc_id"), rec.get("system"))
        if key not in annotations:
            raise DataError(f"{where}: data.annotations has no summary of document {key[0]!r} by system {key[1]!r} "
                            f"(read {len(annotations)} from the annotations file; {label})")
        yield where, {**rec, "expert_scores": annotations[key]}


def load(path: str | None = None, options: SummevalOptions | None = None) -> tuple[pd.DataFrame, LoadReport]:
    opts = options or SummevalOptions()
    source, records, names = (hub_records(opts.hub_id, opts.hub_split) if opts.hub_id else
                              records_for(path, opts.source_file, NAME, DEFAULT_FILE))
    label = str(source)
    if opts.annotations:
        records = with_annotations(records, read_annotations(opts.annotations), label)
    report = LoadReport(NAME, [label])
    rows = [with_experts(record_to_row(rec, where, ASPECTS, names), rec, where) for where, rec in records]
    if any(EXPERTS + a in r for r in rows for a in ASPECTS):
        for r in rows:  # every row gets the columns (None where a record has no ratings)
            r.update({EXPERTS + a: r.get(EXPERTS + a) for a in ASPECTS})
    return table_of(rows, report, f"{label}: no records")


@LOADERS
class Summeval(Loader):
    name = "summeval"
    task = "summarization"
    Options = SummevalOptions
    load = staticmethod(load)
