"""Dataset name -> loader (``loader.LOADERS``, filled by ``discover``): the checks of a config's
data section and the reads of a run's dataset."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cscore.data import table
from cscore.data.loader import LOADERS, Loader, option_names
from cscore.data.options import check_options, loader_options
from cscore.data.schema import DataError

LOADERS.discover("cscore.data")  # every module here: each loader module registers its loader

__all__ = ["LOADERS", "Loader", "check_config", "load_config", "load_data", "load_examples",
           "options_of", "preload", "task_of"]

# what ``preload`` read, by ``data_key``: ``load_data`` takes it (once)
PRELOADED: dict[str, tuple] = {}


def task_of(name: str | None) -> str | None:
    """The task of every row the named loader writes (None: unknown, or data=table), before any read."""
    return LOADERS.get(name).task if name is not None and name in LOADERS else None


def options_of(data: Mapping):
    """The loader's ``Options`` of a composed ``cfg.data`` section; an undeclared key is a DataError."""
    loader = LOADERS.get(data["name"])
    given = loader_options(data)
    check_options(given, option_names(loader.Options), loader.name)
    return loader.Options(**given)


def check_config(data: Mapping) -> None:
    """Before any file is read: a known dataset, options its loader takes, a ``data.path`` that exists."""
    options = vars(options_of(data))
    if data["name"] == "table" and isinstance(options.get("columns"), Mapping):
        check_options(dict(options["columns"]), table.ROLES, "table", prefix="data.columns.")
    path = data.get("path")
    if path and not Path(str(path)).expanduser().exists():
        raise DataError(f"data file {Path(str(path)).expanduser()} does not exist (data.path={path})")
    notes = options.get("annotations")
    if notes and not Path(str(notes)).expanduser().is_file():
        raise DataError(f"data.annotations={notes}: no such file (SummEval's model_annotations.aligned.jsonl)")


def load_examples(name: str, path: str | None = None, options=None):
    """The named dataset, read with ``options`` (its loader's ``Options``; None: the defaults)."""
    loader = LOADERS.get(name)
    if options is not None and not isinstance(options, loader.Options):
        raise TypeError(f"data={name} takes a {loader.Options.__name__}, got {type(options).__name__}")
    return loader.load(path, options)


def data_key(data) -> str:
    """What a typed ``data`` section asks a loader for: its name, path and options (none set: the defaults)."""
    options = data.options if data.options is not None else LOADERS.get(data.name).Options()
    return repr((data.name, data.path, sorted(vars(options).items())))


def preload(data) -> None:
    """Load a run's dataset now (its errors come before torch is imported) for ``load_data``."""
    key = data_key(data)
    if key not in PRELOADED:
        PRELOADED[key] = load_data(data)


def load_data(data):
    """The dataset a run's typed ``data`` section names (what ``preload`` read, if it did)."""
    found = PRELOADED.pop(data_key(data), None)
    return found if found is not None else load_examples(data.name, data.path, data.options)


def load_config(data: Mapping):
    """The dataset a composed ``cfg.data`` section (a plain dict) names (a key at None is not given)."""
    given = {k: v for k, v in data.items() if v is not None}
    return load_examples(data["name"], data.get("path"), options_of({**given, "name": data["name"]}))
