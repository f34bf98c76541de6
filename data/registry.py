"""Dataset name -> loader (``loader.LOADERS``: ``discover`` imports every module of cscore.data,
each loader module registering its ``Loader``). Every loader is ``load(path=None, **options) ->
(validated example table, LoadReport)`` and rejects options it does not know (``options.check_options``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cscore.data import table
from cscore.data.loader import LOADERS, Loader
from cscore.data.options import check_options, loader_options
from cscore.data.schema import DataError

LOADERS.discover("cscore.data")  # every module here: each loader module registers its loader

__all__ = ["LOADERS", "Loader", "check_config", "check_name", "load_config", "load_data", "load_examples", "preload",
           "task_of"]

# what ``preload`` read before a run's job started, by ``data_key``: the job's ``load_data`` takes it (once)
PRELOADED: dict[str, tuple] = {}


def check_name(name: str) -> None:
    LOADERS.get(name)  # an unknown name: the one-line DataError with its did-you-mean


def task_of(name: str | None) -> str | None:
    """The task of every row the named loader writes (None: an unknown name, or data=table, whose
    data.task says): it picks the prompt template before any data is read (cli/pair_check.py
    measures it against runtime.max_length)."""
    if name is None or name not in LOADERS:
        return None
    return LOADERS.get(name).task


def check_config(data: Mapping) -> None:
    """What a composed ``cfg.data`` section says that can be checked before any file is read, with
    the loaders' own messages: a known dataset, options its loader takes, a ``data.path`` that exists."""
    name = data["name"]
    loader = LOADERS.get(name)
    options = check_options(loader_options(data), loader.options, name)
    if name == "table" and isinstance(options.get("columns"), Mapping):
        check_options(dict(options["columns"]), table.ROLES, name, prefix="data.columns.")
    path = data.get("path")
    if path and not Path(str(path)).expanduser().exists():
        raise DataError(f"data file {Path(str(path)).expanduser()} does not exist (data.path={path})")
    notes = options.get("annotations")
    if notes and not Path(str(notes)).expanduser().is_file():
        raise DataError(f"data.annotations={notes}: no such file (SummEval's model_annotations.aligned.jsonl)")


def load_examples(name: str, path: str | None = None, **options):
    """The named dataset; options left at None are not passed on (the loader's default applies)."""
    loader = LOADERS.get(name)
    options = {k: v for k, v in options.items() if v is not None}
    return loader.load(path, **options)


def data_key(data) -> str:
    """What a typed ``data`` section asks a loader for: its name, path and the options it takes."""
    loader = LOADERS.get(data.name)
    return repr((data.name, data.path, [(k, getattr(data, k, None)) for k in loader.options]))


def preload(data) -> None:
    """Load the dataset a run's typed ``data`` section names now (the precheck: its errors come
    before torch is imported) and keep it for that run's ``load_data``; each key is read once."""
    key = data_key(data)
    if key not in PRELOADED:
        PRELOADED[key] = load_data(data)


def load_data(data):
    """The dataset a run's typed ``data`` section (``cscore.scorers.config.groups.Data``) names:
    ``name``, ``path`` and, of its other settings, the options its loader takes (None: not given;
    an option it does not take was refused before the run: ``check_config``). What ``preload``
    read for it is taken (and forgotten) instead of reading the files again."""
    found = PRELOADED.pop(data_key(data), None)
    if found is not None:
        return found
    loader = LOADERS.get(data.name)
    return load_examples(data.name, data.path, **{k: getattr(data, k, None) for k in loader.options})


def load_config(data: Mapping):
    """The dataset a composed ``cfg.data`` section (as a plain dict) names: ``name``, ``path``, and
    every key but ``options.RUNNER_KEYS`` as loader options."""
    return load_examples(data["name"], data.get("path"), **loader_options(data))
