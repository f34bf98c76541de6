"""What every method is: its settings (``MethodParams``, the base of each method's ``Params``) and its
computation (``Method``, registered by name with ``@METHODS``); per-method facts are class attributes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from cscore.registry import Registry
from cscore.scorers.methods.common import aggregate
from cscore.scorers.methods.params import setting

AGGREGATION_KEYS = ("norm", "skip_first")  # the shared length handling (``common.aggregate``)


@dataclass
class MethodParams:
    """The base of every method's settings: its name and its score column."""
    name: str = setting("", doc="the method")
    variant: str = setting("", doc="the score column and label: score.<variant>")


class Method:
    """One method. ``kind``: token or the kind that scores it; ``aliases``: {its setting: aggregation key};
    ``aligned``: whether a cross-family pair computes it on aligned units (``scorers/engine/align.py``)."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "token"
    Params: ClassVar[type[MethodParams]] = MethodParams
    aliases: ClassVar[Mapping[str, str]] = {}
    aligned: ClassVar[bool] = False
    builds_on: ClassVar[tuple[str, ...]] = ()  # the methods whose module its own may import (a released variant)
    reads_distributions: ClassVar[bool] = False  # the distributional statistics whatever its settings

    @classmethod
    def needs(cls, p: Any) -> tuple[str, ...]:
        """The models whose statistics it reads."""
        return ("expert", "amateur")

    @classmethod
    def distributional(cls, settings: Mapping) -> bool:
        """Whether it reads the distributional statistics with these settings (then a joint pass)."""
        return cls.reads_distributions

    @classmethod
    def exits(cls, settings: Mapping) -> tuple[int, ...]:
        """The expert's early exits whose statistics it reads with these settings (dola's layers)."""
        return ()

    @classmethod
    def token_scores(cls, stats: dict, p: Any) -> np.ndarray:
        """One value per scored hypothesis token (a token method's own computation)."""
        raise NotImplementedError(f"method {cls.name!r} ({cls.kind}) has no token scores")

    @classmethod
    def aggregation_keys(cls) -> dict[str, str]:
        """{setting: aggregation key}: the ``norm`` and ``skip_first`` its ``Params`` declares, or aliases."""
        declared = {f.name for f in fields(cls.Params)}
        shared = {k: k for k in AGGREGATION_KEYS if k in declared and k not in cls.aliases.values()}
        return {**shared, **cls.aliases}

    @classmethod
    def score(cls, stats: dict, p: Any) -> np.ndarray:
        """Per-item scores: the token scores with the shared length handling (the aggregation keys' values)."""
        offsets = next(iter(stats.values())).offsets
        keys = {key: getattr(p, own) for own, key in cls.aggregation_keys().items()}
        return aggregate(cls.token_scores(stats, p), offsets, **keys)

    @classmethod
    def plan_variants(cls, label: str, params: dict, rows) -> list | None:
        """A method of another kind names its own rows as (name, method, params); None: a token method's."""
        return None

    @classmethod
    def nonfinite_hint(cls, p: Any) -> str:
        """Why this method's own scores may be non-finite by design, and what to set instead."""
        return ""


METHODS: Registry[Method] = Registry("method", Method)
