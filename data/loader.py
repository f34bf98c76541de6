"""A dataset loader: a ``Loader`` registered in ``LOADERS`` with its task, ``Options`` (each field a
``data.<key>``) and ``load(path=None, options=None) -> (validated example table, LoadReport)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from cscore.data.schema import DataError
from cscore.registry import Registry, suggest


def option(default: Any = None, doc: str = ""):
    """One option of a loader's ``Options``: its default (None: the loader's own) and its meaning."""
    return field(default=default, metadata={"doc": doc})


def option_names(options: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(options))


@dataclass
class NoOptions:
    """The options of a loader that takes none."""


class Loader:
    """One dataset: ``task`` of every row it writes (None: ``data.task`` says), ``Options`` it takes."""

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
