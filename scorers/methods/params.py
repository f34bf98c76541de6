"""The config schema's building blocks: what a setting may be (``Param``), its default and meaning
(``setting``: a dataclass field), and the check of a section against its dataclass (``check_section``)."""

from __future__ import annotations

import copy
import math
from dataclasses import MISSING, dataclass, field, fields, is_dataclass

from cscore.errors import ConfigError
from cscore.registry import suggest


@dataclass(frozen=True)
class Param:
    kind: type  # float, int, bool or str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself is not allowed
    choices: tuple = ()
    nullable: bool = False
    allow_neg_inf: bool = False

    def describe(self) -> str:
        if self.choices:
            text = " | ".join(map(str, self.choices))
        elif self.kind is bool:
            text = "true | false"
        elif self.kind is str:
            text = "a string"
        else:
            text = "an integer" if self.kind is int else "a number"
            if self.lo is not None and self.hi is not None:
                text += f" in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
            elif self.lo is not None:
                text += f" {'>' if self.lo_open else '>='} {self.lo:g}"
            elif self.hi is not None:
                text += f" <= {self.hi:g}"
            if self.allow_neg_inf:
                text += " (or -.inf)"
        return text + (" or null" if self.nullable else "")

    def check(self, key: str, value):
        """The value converted to ``kind``, or a ConfigError naming ``key`` and what is allowed."""
        def bad():
            return ConfigError(f"{key} must be {self.describe()}, got {value!r}")

        if value is None:
            if self.nullable:
                return None
            raise bad()
        if (self.kind is bool and not isinstance(value, bool)
                or self.kind is str and self.choices and value not in self.choices):
            raise bad()
        if self.kind in (bool, str):
            return self.kind(value)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or self.kind is int and isinstance(value, float) and not value.is_integer()):
            raise bad()
        value = self.kind(value)  # int or float
        if value == -math.inf and self.allow_neg_inf:
            return value
        below = self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo))
        if not math.isfinite(value) or below or (self.hi is not None and value > self.hi):
            raise bad()
        return value


POSITIVE = Param(float, lo=0.0, lo_open=True)
COMMON = {  # a setting shared by several methods: what it may be and its meaning
    "t": (POSITIVE, "temperature of the model(s)"),
    "t_exp": (POSITIVE, "expert temperature"),
    "t_ama": (POSITIVE, "amateur temperature"),
    "gamma": (Param(float, lo=0.0, hi=1.0), "amateur scaling"),
    "clamp": (Param(float, hi=0.0, nullable=True), "clip log-probs to [clamp, 0] before combining; null: no clipping"),
    "floor": (Param(float, lo=0.0, lo_open=True, nullable=True),
              "a value below this counts as this (guards log 0); null: none"),
    "model": (Param(str, choices=("expert", "amateur")), "which model's statistics"),
    "norm": (Param(str, choices=("sum", "mean", "sqrt")), "how token scores make an item score: sum | mean | sqrt"),
    "skip_first": (Param(bool), "leave out the first hypothesis token"),
}


def setting(default, spec=None, doc: str = ""):
    """A schema field: its default (written once, here), what it may be (``spec``: a Param or any
    object with ``check(key, value)`` and ``describe()``) and its meaning."""
    meta = {"spec": spec, "doc": doc}
    if isinstance(default, (list, dict)) or is_dataclass(default):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


def required(spec, doc: str = ""):
    """A schema field without a default (a baseline's settings: its conf/baseline/<name>.yaml gives them)."""
    return field(metadata={"spec": spec, "doc": doc})


def common(key: str, default, doc: str = ""):
    """A setting shared by several methods (``COMMON``), with its own default and meaning."""
    spec, meaning = COMMON[key]
    return setting(default, spec, doc or meaning)


def default_of(f):
    return f.default_factory() if f.default is MISSING else copy.deepcopy(f.default)


def defaults_of(cls) -> dict:
    """The dataclass's defaults as a plain dict in field order (nested dataclasses too)."""
    out = {}
    for f in fields(cls):
        value = default_of(f)
        out[f.name] = defaults_of(type(value)) if is_dataclass(value) else value
    return out


def specs_of(cls) -> dict:
    """{key: spec} of the settings that say what they may be."""
    return {f.name: f.metadata["spec"] for f in fields(cls) if f.metadata.get("spec") is not None}


def check_keys(section: str, given, known, owner: str | None = None) -> None:
    """A ConfigError naming the first key of ``given`` that ``section`` does not have."""
    for key in given:
        if key not in known:
            raise ConfigError(f"unknown setting {section}.{key}{suggest(key, known)}; "
                              f"{owner or section} has {', '.join(sorted(known))}")


def check_section(cls, given: dict, section: str):
    """``given`` (a section of a composed config) as a ``cls`` instance: unknown keys and bad values
    are one-line ConfigErrors; keys not given keep their defaults; nested dataclasses are checked alike."""
    known = {f.name: f for f in fields(cls)}
    check_keys(section, given, known)
    values = {}
    for key, value in given.items():
        f = known[key]
        spec = f.metadata.get("spec")
        if is_dataclass(f.type if isinstance(f.type, type) else None) or is_dataclass(default_of(f)):
            value = check_section(type(default_of(f)), value or {}, f"{section}.{key}")
        elif spec is not None:
            value = spec.check(f"{section}.{key}", value)
        values[key] = value
    return cls(**values)
