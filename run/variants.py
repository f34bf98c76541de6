"""Which score columns a run produces: the configured method plus the comparison rows (expert alone, amateur
alone, ensemble), which share the method's length conventions (``norm``, ``skip_first``, ``clamp``, ``floor``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cscore.config.run import BASELINE_ROWS
from cscore.errors import ConfigError
from cscore.scorers import methods

SHARED = ("norm", "skip_first", "clamp")


@dataclass(frozen=True)
class Variant:
    name: str  # score column: score.<name>
    method: str
    params: Any  # the row's typed Params (checked, every default filled in): what its scores read
    record: dict  # its parameters as metrics.json records them (values as written)
    who: str | None = None  # a judge row: whose judgement (main / asst / contrast)

    def settings(self) -> dict:
        """The row's parameters (typed) without the method's name and variant."""
        return without_label(vars(self.params))

    def needs(self) -> tuple[str, ...]:
        return methods.get(self.method).needs(self.params)

    def temperatures(self) -> set[float]:
        return {float(getattr(self.params, k)) for k in ("t", "t_exp", "t_ama", "t_weight") if hasattr(self.params, k)}


def without_label(params: Mapping) -> dict:
    return {k: v for k, v in params.items() if k not in methods.NOT_PARAMS}


def row_params(method: str, label: str, **settings):
    """The typed ``Params`` of a comparison row: its method's defaults with ``settings``."""
    return methods.get(method).Params(name=method, variant=label, **settings)


@dataclass(frozen=True)
class MethodPlan:
    """A run's method, planned once where its config is typed: its rows and its parameters as written."""
    rows: tuple[Variant, ...]
    written: dict


def method_plan(p, written: Mapping, baseline_t: float, rows) -> MethodPlan:
    """The plan of the method section ``written`` (as composed), typed as ``p``."""
    return MethodPlan(tuple(plan(p, baseline_t, rows, written)), without_label(written))


def plan(p, baseline_t: float = 1.0, rows=BASELINE_ROWS, written: Mapping | None = None) -> list[Variant]:
    """The rows of method params ``p`` (typed); ``written``: the method section as composed (None: the typed)."""
    name, label = p.name, p.variant or p.name
    module = methods.get(name)
    typed = without_label(vars(p))
    given = typed if written is None else without_label(written)
    own = module.plan_variants(label, given, rows)
    if own is not None:  # a method of another kind (a judge) names its own rows
        return [Variant(row, method, p, record, record.get("who")) for row, method, record in own]
    main = Variant(label, name, p, given)
    loaded = set(main.needs())
    aliases = module.aggregation_keys()  # {own name: its key}: cdm calls norm pooling
    keys = {k: k for k in SHARED if k in typed}
    keys.update({aliases[own]: own for own in given if own in aliases})
    share = {key: typed[own] for key, own in keys.items()}
    share_rec = {key: given.get(own, typed[own]) for key, own in keys.items()}
    out = []
    for row in rows:
        if row not in BASELINE_ROWS:
            raise ConfigError(f"unknown baseline row {row!r}; known: {BASELINE_ROWS}")
        if row == label:
            continue
        if row in ("expert", "amateur") and row in loaded:
            one = {"model": row, "t": baseline_t}
            out.append(Variant(row, "single", row_params("single", row, **one, **share), {**one, **share_rec}))
        elif row == "ensemble" and {"expert", "amateur"} <= loaded:
            gamma = methods.defaults("ensemble")["gamma"]  # Eq. 6: ensemble's own default (its Params), 0.5
            mix = {"gamma": gamma, "t_exp": baseline_t, "t_ama": baseline_t}
            floor = {"floor": typed["floor"]} if "floor" in typed else {}
            rec = {**mix, **share_rec, **({"floor": given.get("floor", typed["floor"])} if floor else {})}
            typed_row = row_params("ensemble", "ensemble", **mix, **share, **floor)
            out.append(Variant("ensemble", "ensemble", typed_row, rec))
    return out + [main]


def models_needed(variants: list[Variant]) -> list[str]:
    found = {m for v in variants for m in v.needs()}
    return [m for m in ("expert", "amateur") if m in found]
