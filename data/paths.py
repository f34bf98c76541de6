"""Where the shared human-judgment data lives: ``$CSCORE_SHARED_DATA``, else the first
``shared/data`` folder walking up from the working directory, then from this package."""

from __future__ import annotations

import os
from pathlib import Path

from cscore.data.schema import DataError

ENV_VAR = "CSCORE_SHARED_DATA"
PACKAGE_DIR = Path(__file__).resolve().parent


def _search_starts() -> list[Path]:
    return [Path.cwd().resolve(), PACKAGE_DIR]


def shared_data_dir() -> Path | None:
    """The shared data folder, or None if it cannot be found (or ``$CSCORE_SHARED_DATA`` is not a folder)."""
    env = os.environ.get(ENV_VAR)
    if env:
        folder = Path(env).expanduser()
        return folder if folder.is_dir() else None
    for start in _search_starts():
        for folder in (start, *start.parents):
            candidate = folder / "shared" / "data"
            if candidate.is_dir():
                return candidate
    return None


def default_file(*parts: str) -> Path:
    """``<shared data>/<parts...>``; a DataError saying what was looked for, where, and how to fix it."""
    rel = Path(*parts)
    root = shared_data_dir()
    if root is not None and (root / rel).is_file():
        return root / rel
    env = os.environ.get(ENV_VAR)
    if root is not None:
        where = f"looked for {root / rel}, which does not exist"
    elif env:
        where = f"{ENV_VAR} is set to {env!r}, which is not a folder"
    else:
        starts = " and from ".join(str(s) for s in _search_starts())
        where = f"{ENV_VAR} is not set and no shared/data folder was found walking up from {starts}"
    raise DataError(f"default data file {rel} not found: point data.path=/path/to/{rel.name} at the file, or set "
                    f"{ENV_VAR} to the folder that holds {rel.as_posix()} ({where})")


def resolve(path: str | None, dataset_dir: str, default_name: str, source_file: str | None = None) -> Path:
    """The file a loader reads: ``path`` (a file, or a folder holding ``default_name``), else
    ``<shared data>/<dataset_dir>/<source_file or default_name>``."""
    if path:
        file = Path(path).expanduser()
        if file.is_dir():
            file = file / (source_file or default_name)
        if not file.is_file():
            raise DataError(f"data file {file} does not exist (data.path={path})")
        return file
    return default_file(dataset_dir, source_file or default_name)
