"""What every dataset loader is: a ``Loader`` subclass registered by name in ``LOADERS``
(``@LOADERS`` on the class, in the loader's own module), saying the task of the rows it writes and
the options it takes (``Options``: a dataclass of ``option`` fields, each a ``data.<key>`` of the
config) as class attributes, with ``load(path=None, options=None) -> (validated example table,
LoadReport)``, ``options`` an instance of its ``Options`` (None: the defaults; the config's keys
become one in ``registry.options_of``, which refuses a key it does not declare)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from cscore.data.schema import DataError
from cscore.registry import Registry, suggest


def option(default: Any = None, doc: str = ""):
    """One option of a loader's ``Options``: its default (None: not given, the loader's own default
    applies) and its meaning (docs/reference/config.md lists it under the loader)."""
    return field(default=default, metadata={"doc": doc})


def option_names(options: type) -> tuple[str, ...]:
    """The keys an ``Options`` dataclass declares, in order."""
    return tuple(f.name for f in fields(options))


@dataclass
class NoOptions:
    """The options of a loader that takes none."""


class Loader:
    """One dataset. ``task``: the task of every row it writes, which picks the prompt template
    before any data is read (None: the user's table says, ``data.task``); ``Options``: the
    dataclass of the options it takes (``data.<key>``; the typed run config holds one, and
    ``check_config`` checks them before any file is read)."""

    name: ClassVar[str] = ""
    task: ClassVar[str | None] = None
    Options: ClassVar[type[Any]] = NoOptions
    load: ClassVar[Callable[..., Any]]
    builds_on: ClassVar[tuple[str, ...]] = ()  # the loaders whose module its own may import (qags_cnndm: qags_xsum)


class Loaders(Registry[Loader]):
    """The dataset loaders by name; an unknown name is a DataError spelled as the command line does."""

    def unknown(self, name: str) -> str:
        return f"unknown dataset data={name}{suggest(name, self.entries, 'data=')}; known: {', '.join(self.names())}"


LOADERS = Loaders("dataset", Loader, error=DataError)
