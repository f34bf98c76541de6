"""Dataset name -> loader. Every loader is ``load(path=None, **options) -> (validated example table,
LoadReport)`` and rejects options it does not know (``options.check_options``)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from cscore.data import demo, dstc9, fed, mqm, qags_cnndm, qags_xsum, summeval, table, wmt
from cscore.data.options import check_options, loader_options
from cscore.data.schema import DataError

LOADERS: dict[str, Callable[..., tuple]] = {  # (example table, LoadReport)
    "demo": demo.load,
    "summeval": summeval.load,
    "qags_xsum": qags_xsum.load,
    "qags_cnndm": qags_cnndm.load,
    "mqm": mqm.load,
    "mqm22": partial(wmt.load, name="mqm22"),  # the same loader; the name is for messages and reports
    "mqm23": partial(wmt.load, name="mqm23"),
    "fed": fed.load,
    "dstc9": dstc9.load,
    "table": table.load,
}

# The options each loader takes (``options.check_options``), for checking a config before any file is read
OPTIONS = {"demo": demo.OPTIONS, "summeval": summeval.OPTIONS, "qags_xsum": qags_xsum.OPTIONS,
           "qags_cnndm": qags_xsum.OPTIONS, "mqm": mqm.OPTIONS,
           "mqm22": wmt.OPTIONS, "mqm23": wmt.OPTIONS, "fed": fed.OPTIONS, "dstc9": dstc9.OPTIONS,
           "table": table.OPTIONS}

# The task of every row a named loader writes (data=table takes data.task): picks the prompt template
# before any data is read (cli/pair_check.py measures it against runtime.max_length).
TASKS = {"demo": "summarization", "summeval": "summarization", "qags_xsum": "summarization",
         "qags_cnndm": "summarization", "mqm": "translation", "mqm22": "translation", "mqm23": "translation",
         "fed": "dialogue", "dstc9": "dialogue"}


def check_name(name: str) -> None:
    if name not in LOADERS:
        close = difflib.get_close_matches(str(name), LOADERS, n=1)
        hint = f" (did you mean data={close[0]}?)" if close else ""
        raise DataError(f"unknown dataset data={name}{hint}; known: {', '.join(sorted(LOADERS))}")


def check_config(data: Mapping) -> None:
    """What a composed ``cfg.data`` section says that can be checked before any file is read, with
    the loaders' own messages: a known dataset, options its loader takes, a ``data.path`` that exists."""
    name = data["name"]
    check_name(name)
    options = check_options(loader_options(data), OPTIONS[name], name)
    if name == "table" and isinstance(options.get("columns"), Mapping):
        check_options(dict(options["columns"]), table.ROLES, name, prefix="data.columns.")
    path = data.get("path")
    if path and not Path(str(path)).expanduser().exists():
        raise DataError(f"data file {Path(str(path)).expanduser()} does not exist (data.path={path})")


def load_examples(name: str, path: str | None = None, **options):
    """The named dataset; options left at None are not passed on (the loader's default applies)."""
    check_name(name)
    options = {k: v for k, v in options.items() if v is not None}
    return LOADERS[name](path, **options)


def load_config(data: Mapping):
    """The dataset a composed ``cfg.data`` section (as a plain dict) names: ``name``, ``path``, and
    every key but ``options.RUNNER_KEYS`` as loader options."""
    return load_examples(data["name"], data.get("path"), **loader_options(data))
