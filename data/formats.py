"""Read a user's table (.csv / .tsv as text, .jsonl, .parquet, a ``save_to_disk`` folder or a hub id) into
(label, frame, where): nested fields become dotted columns, ``where[i]`` says where row i is."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from cscore.data.io import import_datasets, iter_jsonl, read_parquet, read_text
from cscore.data.schema import DataError

READERS = {".csv": lambda file: read_delimited(file, ","), ".tsv": lambda file: read_delimited(file, "\t"),
           ".jsonl": lambda file: read_jsonl(file), ".parquet": lambda file: framed(str(file), read_parquet(file))}
NEEDS_DATASETS = "reading a datasets folder or hub id"


def read(path: str | None, hub_id: str | None = None, split: str | None = None):
    """(label, frame, where) of a file, a save_to_disk folder or a hub dataset."""
    if hub_id:
        return framed_split(import_datasets(NEEDS_DATASETS).load_dataset(hub_id), split, f"hub:{hub_id}")
    if path is None:
        raise DataError("data.path is required (a file or a save_to_disk folder) when no hub id is given")
    file = Path(path).expanduser()
    if file.is_dir():
        try:
            ds = import_datasets(NEEDS_DATASETS).load_from_disk(str(file))
        except FileNotFoundError as err:
            raise DataError(f"{file}: a folder, but not one written by datasets' save_to_disk ({err})") from None
        return framed_split(ds, split, str(file))
    if not file.is_file():
        raise DataError(f"data file {file} does not exist (data.path={path})")
    if split is not None:
        raise DataError(f"{file}: data.split={split} applies to a datasets folder or hub id, not to a file")
    suffix = file.suffix.lower()
    if suffix in READERS:
        return READERS[suffix](file)
    raise DataError(f"{file}: unknown file type {suffix or '(no suffix)'!r}; expected {', '.join(READERS)} "
                    "or a folder written by datasets' save_to_disk")


def rows_where(label, n: int) -> list[str]:
    return [f"{label} row {i}" for i in range(1, n + 1)]


def framed(label: str, df: pd.DataFrame):
    """(label, flattened frame, where) of a frame read whole (no line numbers)."""
    df = flatten(df)
    return label, df, rows_where(label, len(df))


def flatten(df: pd.DataFrame) -> pd.DataFrame:
    """Nested mappings -> dotted columns (``{"scores": {"a": 1}}`` -> ``scores.a``)."""
    if not any(df[c].map(lambda v: isinstance(v, dict)).any() for c in df.columns if df[c].dtype == object):
        return df
    return pd.json_normalize(df.to_dict("records"))


def read_delimited(file: Path, sep: str):
    text = read_text(file)
    try:
        header = next(csv.reader(io.StringIO(text), delimiter=sep), [])
    except csv.Error as err:
        raise DataError(f"{file}:1: the header row is not readable: {err}") from None
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise DataError(f"{file}:1: the header repeats column name(s) {dup}")
    try:
        df = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, na_filter=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{file}: empty file (no header row)") from None
    except pd.errors.ParserError as err:
        raise DataError(f"{file}: not readable as {'TSV' if sep == chr(9) else 'CSV'}: {str(err).strip()}") from None
    return str(file), df, rows_where(file, len(df))


def read_jsonl(file: Path):
    pairs = list(iter_jsonl(file))
    records = [rec for _, rec in pairs]
    return str(file), pd.json_normalize(records) if records else pd.DataFrame(), [w for w, _ in pairs]


def framed_split(ds, split: str | None, label: str):
    """``framed`` of the chosen split of a DatasetDict; of a Dataset as it is."""
    datasets = import_datasets(NEEDS_DATASETS)
    if not isinstance(ds, datasets.DatasetDict):
        if split is not None:
            raise DataError(f"{label} holds one dataset without splits; leave out data.split (it is {split})")
        return framed(label, ds.to_pandas())
    names = list(ds)
    if split is None:
        if len(names) != 1:
            raise DataError(f"{label} has splits {names}; choose one with data.split=<split>")
        split = names[0]
    if split not in ds:
        raise DataError(f"{label} has no split {split!r} (data.split={split}); its splits: {names}")
    return framed(f"{label}[{split}]", ds[split].to_pandas())

