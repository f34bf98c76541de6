"""What every baseline family shares: a run's texts, a family's result, reference lists, list checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from cscore.errors import ConfigError
from cscore.registry import Registry, suggest
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.tokenize import InputError

REFERENCE_MODES = ("all", "first")


@dataclass
class Texts:
    """The run's rows as plain strings: hypothesis, source and every reference (none where the data has none)."""

    hypotheses: list[str]
    sources: list[str]
    references: list[list[str]]
    target_langs: list[str | None]  # the hypothesis language per row (from lang_pair), None if unknown

    def __len__(self) -> int:
        return len(self.hypotheses)


@dataclass
class Result:
    """A family's output: score columns (NaN where a row could not be scored), a record for metrics.json,
    pass reports and loaded models."""

    columns: dict[str, np.ndarray]
    info: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    truncated: np.ndarray | None = None  # rows whose encoder input was cut to fit max_length


@dataclass
class BaselineRun:
    """How the baselines of a job run: pass ``options``, the run's row ``ids``, the statistics ``cache``
    (None: off), the ``progress`` factory (name, rows) and ``started``, which a family calls once its checks
    have passed and scoring begins."""

    options: PassOptions = field(default_factory=PassOptions)
    ids: list[str] | None = None
    cache: Any = None  # a StatsCache
    progress: Callable | None = None
    started: Callable[[], None] = lambda: None


def pick_references(texts: Texts, mode: str) -> list[list[str]]:
    """Each row's references (all, or the first), empty strings left out."""
    refs = [[r for r in row if isinstance(r, str) and r.strip()] for row in texts.references]
    return [row[:1] for row in refs] if mode == "first" else refs


def require_references(name: str, refs: list[list[str]]) -> list[int]:
    """Indices of the rows without a reference (NaN, counted); no reference at all is an InputError."""
    missing = [i for i, r in enumerate(refs) if not r]
    if refs and len(missing) == len(refs):
        raise InputError(f"baseline {name} compares the hypothesis with a reference and no row of this data has "
                         "one (datasets with references: summeval, demo, mqm with data.reference_system=<system>, "
                         "data=table with data.columns.reference)")
    return missing


class Choices:
    """A list parameter whose items come from a fixed set (or match ``pattern``)."""

    def __init__(self, allowed: tuple, pattern=None):
        self.allowed, self.pattern = allowed, pattern

    def ok(self, item) -> bool:
        return isinstance(item, str) and (item in self.allowed or bool(self.pattern and self.pattern.match(item)))

    def check(self, key: str, value):
        if not isinstance(value, (list, tuple)) or not value or not all(map(self.ok, value)):
            raise ConfigError(f"{key} must be a list of {' | '.join(self.allowed)}, got {value!r}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{key} lists an item twice: {value!r}")
        return list(value)


class Baseline:
    """One baseline (``baseline=<name>``, registered with ``@BASELINES``): its settings (``Params``,
    values from conf/baseline/<name>.yaml), its check before anything loads, columns and score."""

    name: ClassVar[str] = ""
    Params: ClassVar[type]
    rank: ClassVar[int] = 9  # where lists place it, cheapest family first (lexical 1 ... external 4)
    builds_on: ClassVar[tuple[str, ...]] = ()  # the baselines whose module its own may import (none)

    @classmethod
    def check(cls, params: Any) -> None:
        """Before anything loads: what the settings need (a model named, a file there)."""

    @classmethod
    def columns(cls, params: Any) -> list[str]:
        return [cls.name]

    @classmethod
    def score(cls, params: Any, texts: Texts, run: BaselineRun) -> Result:
        """The baseline's columns for ``texts`` (every registered baseline gives its own)."""
        raise NotImplementedError(f"baseline {cls.name!r} does not define score()")


class Baselines(Registry[Baseline]):
    """The baselines by family ``rank``, each family's in the order its module registers them."""

    def names(self) -> list[str]:
        return [name for name, _ in self.items()]

    def items(self) -> list[tuple[str, type[Baseline]]]:
        return sorted(self.entries.items(), key=lambda item: item[1].rank)

    def unknown(self, name: str) -> str:
        return f"unknown baseline {name!r}{suggest(name, self.entries)}; known: {', '.join(self.names())}"


BASELINES = Baselines("baseline", Baseline)
