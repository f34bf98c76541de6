"""One plugin registry for every extension point (method kinds, methods, baseline families, data loaders).

A registry finds its plugins with ``discover(package)``, which imports every module of the package;
a plugin module registers its classes on import (``@REG``), so a new plugin is just its module."""
from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from cscore.errors import ConfigError, CscoreError

T = TypeVar("T")
C = TypeVar("C")


def suggest(word: object, options: Iterable[object], prefix: str = "", quoted: bool = False) -> str:
    """' (did you mean <prefix>X?)' when a close option X exists, else '' (``quoted``: X as 'X')."""
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {prefix}{close[0]!r}?)" if quoted else f" (did you mean {prefix}{close[0]}?)"


def unknown_keys(what: str, unknown: Iterable[object], allowed: Iterable[object], prefix: str = "") -> str:
    """One line naming unknown keys, each with its did-you-mean, and the allowed ones:
    '<what>: unknown option x (did you mean y?); allowed: a, b'."""
    keys = [str(a) for a in allowed]
    named = [f"{prefix}{key}{suggest(key, keys, prefix)}" for key in unknown]
    noun = "option" if len(named) == 1 else "options"
    valid = ", ".join(prefix + a for a in keys) or "none"
    return f"{what}: unknown {noun} {', '.join(named)}; allowed: {valid}"


class Registry(Generic[T]):
    """Entries of one kind by name, each a subclass of ``base``; ``get`` raises ``error`` for an unknown name."""

    def __init__(self, what: str, base: type, error: type[CscoreError] = ConfigError):
        self.what, self.base, self.error = what, base, error
        self.entries: dict[str, type[T]] = {}
        self.packages: list[str] = []  # the packages ``discover`` walked

    def discover(self, package: str) -> None:
        """Import every top-level module of ``package``, once (each plugin module registers itself)."""
        if package not in self.packages:
            self.packages.append(package)
            for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
                importlib.import_module(f"{package}.{module.name}")

    def register(self, name: str) -> Callable[[type[C]], type[C]]:
        """A class decorator that adds the class under ``name``."""
        def add(cls: type[C]) -> type[C]:
            self.add(name, cls)  # type: ignore[arg-type]
            return cls
        return add

    def __call__(self, cls: type[C]) -> type[C]:
        """A class decorator that adds the class under its own ``name`` (``@REG`` on the class)."""
        return self.register(getattr(cls, "name", ""))(cls)

    def add(self, name: str, cls: type[T]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise self.refusal(f"{self.what} {name!r}: {cls!r} is not a {self.base.__name__} subclass")
        if not name:
            raise self.refusal(f"{self.what}: {cls.__name__} has no {self.what} name (set its `name`)")
        self.check(name, cls)
        have = self.entries.get(name)
        if have is not None:
            raise self.refusal(f"{self.what} {name!r} is registered twice: {have.__module__}.{have.__qualname__} "
                               f"and {cls.__module__}.{cls.__qualname__}")
        self.entries[name] = cls

    def check(self, name: str, cls: type[T]) -> None:
        """What a registry of one kind asks of an entry besides its base (nothing by default)."""

    refusal: type[CscoreError] = CscoreError  # what a refused registration raises

    def unknown(self, name: str) -> str:
        """The one-line message for a name no entry has."""
        return f"unknown {self.what} {name!r}{suggest(name, self.entries)}; known: {', '.join(sorted(self.entries))}"

    def get(self, name: str) -> type[T]:
        try:
            return self.entries[name]
        except (KeyError, TypeError):
            raise self.error(self.unknown(name)) from None

    def names(self) -> list[str]:
        return sorted(self.entries)

    def items(self) -> list[tuple[str, type[T]]]:
        return sorted(self.entries.items())

    def values(self) -> list[type[T]]:
        return [cls for _, cls in self.items()]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.entries)
