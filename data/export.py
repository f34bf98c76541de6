"""Write a validated example table: a .parquet or .jsonl file, or a ``datasets`` folder
(``data=table`` loads each back)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cscore.data.io import import_datasets
from cscore.data.schema import DataError
from cscore.files import writing


def write_table(df: pd.DataFrame, out) -> str:
    """Write ``df`` to ``out`` (a datasets folder when it is an existing folder or has no suffix); returns what
    was written ("parquet", "jsonl" or "datasets folder")."""
    out = Path(out)
    folder = out.is_dir() or not out.suffix
    with writing("the table", out if folder else out.parent):
        if folder:
            write_datasets_folder(df, out)
            return "datasets folder"
        if out.suffix not in (".parquet", ".jsonl"):
            raise DataError(f"out={out}: expected a .parquet or .jsonl file, or a folder (no suffix) for a datasets "
                            "folder")
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.suffix == ".parquet":
            df.to_parquet(out, index=False)
        else:
            df.to_json(out, orient="records", lines=True, force_ascii=False)
        return out.suffix[1:]


def write_datasets_folder(df: pd.DataFrame, out: Path) -> None:
    datasets = import_datasets("writing a datasets folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "dataset_info.json").is_file():
        raise DataError(f"out={out}: the folder is not empty and holds no datasets folder; "
                        "choose a new or empty folder")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        datasets.Dataset.from_pandas(df, preserve_index=False).save_to_disk(str(out))
    finally:
        if not quiet:
            datasets.enable_progress_bars()
