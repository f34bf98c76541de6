"""BARTScore's "unified" summarization files (SummEval, QAGS-XSum): .jsonl, .parquet or its
pickle (read by ``io.read_pickle``), as JSONL-shaped records; ``record_to_row`` makes a table row."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from pathlib import Path

from cscore.data import paths
from cscore.data.io import iter_jsonl, read_parquet, read_pickle
from cscore.data.schema import HUMAN_PREFIX, DataError, is_number, require

# How the JSONL fields are called in BARTScore's pickle (for error messages).
PICKLE_NAMES = {"source": "src", "reference": "ref_summ", "references": "ref_summs", "hypothesis": "sys_summ"}


def pickle_records(data, file: Path) -> Iterator[tuple[str, dict]]:
    """The pickle's documents as (where, JSONL-shaped record) pairs, in the pickle's order."""
    if not isinstance(data, dict):
        raise DataError(f"{file}: expected a dict of documents, got {type(data).__name__}")
    for doc_key, doc in data.items():
        where = f"{file}: doc {doc_key!r}"
        require(doc, ("src", "sys_summs"), where)
        if not isinstance(doc["sys_summs"], dict):
            raise DataError(f"{where}: field 'sys_summs' is not a dict")
        for sys_key, summ in doc["sys_summs"].items():
            sys_where = f"{where} system {sys_key!r}"
            require(summ, ("sys_summ", "scores"), sys_where)
            yield sys_where, {"doc_id": doc_key, "system": sys_key, "source": doc["src"],
                              "reference": doc.get("ref_summ"), "references": doc.get("ref_summs"),
                              "hypothesis": summ["sys_summ"], "scores": summ["scores"]}


def parquet_records(file: Path) -> Iterator[tuple[str, dict]]:
    for i, rec in enumerate(read_parquet(file).to_dict("records")):
        yield f"{file}: row {i}", rec


def records_for(path: str | None, source_file: str | None, dataset_dir: str, default_name: str):
    """(file, iterator of (where, record), field names for messages) of a .jsonl / .parquet / .pkl file."""
    file = paths.resolve(path, dataset_dir, default_name, source_file)
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        return file, iter_jsonl(file), {}
    if suffix == ".parquet":
        return file, parquet_records(file), {}
    if suffix in (".pkl", ".pickle"):
        return file, pickle_records(read_pickle(file), file), PICKLE_NAMES
    raise DataError(f"{file}: unknown file type {suffix!r}; expected .jsonl, .parquet or .pkl")


def _text(rec, key, where, names, optional=False):
    value = rec.get(key)
    if value is None or isinstance(value, str):
        if value is None and not optional and key not in rec:
            raise DataError(f"{where}: missing field {names.get(key, key)!r}")
        return value
    raise DataError(f"{where}: field {names.get(key, key)!r} is not a string ({type(value).__name__})")


def _key(rec, key, where, names):
    if key not in rec:
        raise DataError(f"{where}: missing field {names.get(key, key)!r}")
    value = rec[key]
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(value)
    raise DataError(f"{where}: field {names.get(key, key)!r} must be a non-empty string or an integer, got {value!r}")


def scores(rec, aspects, where) -> dict[str, float]:
    """The ``scores`` mapping as {aspect: float}; every aspect present, numeric and finite, no others."""
    if "scores" not in rec:
        raise DataError(f"{where}: missing field 'scores'")
    got = rec["scores"]
    if not isinstance(got, Mapping):
        raise DataError(f"{where}: field 'scores' is not a mapping ({type(got).__name__})")
    out = {}
    for aspect in aspects:
        value = got.get(aspect)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise DataError(f"{where}: missing score field 'scores.{aspect}'")
        if not is_number(value):
            raise DataError(f"{where}: score field 'scores.{aspect}' is not a finite number ({value!r})")
        out[aspect] = float(value)
    extra = sorted(set(got) - set(aspects))
    if extra and any(got[k] is not None for k in extra):
        raise DataError(f"{where}: unexpected score field(s) {['scores.' + str(k) for k in extra]}; "
                        f"expected {list(aspects)}")
    return out


def record_to_row(rec: dict, where: str, aspects, names: Mapping | None = None) -> dict:
    """A JSONL-shaped record -> a row of the example table (plus a ``references`` list)."""
    names = names or {}
    doc_id, system = _key(rec, "doc_id", where, names), _key(rec, "system", where, names)
    refs = rec.get("references")
    if refs is not None:
        if isinstance(refs, str) or not hasattr(refs, "__iter__"):
            raise DataError(f"{where}: field {names.get('references', 'references')!r} is not a list")
        refs = list(refs)  # parquet gives numpy arrays
        if not all(isinstance(r, str) for r in refs):
            raise DataError(f"{where}: field {names.get('references', 'references')!r} holds a non-string")
    return {"id": f"{doc_id}/{system}", "group": doc_id, "system": system, "task": "summarization",
            "source": _text(rec, "source", where, names), "reference": _text(rec, "reference", where, names, True),
            "hypothesis": _text(rec, "hypothesis", where, names), "lang_pair": None, "references": refs,
            **{HUMAN_PREFIX + k: v for k, v in scores(rec, aspects, where).items()}}
