"""Which score columns a run produces: the configured method plus the comparison rows
(expert alone, amateur alone, ensemble), all computed from the same statistics.

The comparison rows share the method's length conventions (``norm``, ``skip_first``,
``clamp``, ``floor``; ``norm`` also under a method's own name for it: cdm's ``pooling``) so that a preset
such as ``contrast_released`` is compared with
baselines computed the same way; they use temperature ``baseline_t`` (default 1.0)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from cscore.errors import ConfigError
from cscore.scorers import methods

SHARED = ("norm", "skip_first", "clamp")
BASELINE_ROWS = ("expert", "amateur", "ensemble")


@dataclass(frozen=True)
class Variant:
    name: str  # score column: score.<name>
    method: str
    params: dict

    @cached_property
    def typed(self) -> methods.MethodParams:
        """The row's settings as its method's typed ``Params``, checked once (a judge row's ``who``
        names the row, not a setting)."""
        return methods.params(self.method, {k: v for k, v in self.params.items() if k != "who"})

    def needs(self) -> tuple[str, ...]:
        return methods.get(self.method).needs(self.typed)

    def temperatures(self) -> set[float]:
        return {float(v) for k, v in self.params.items() if k in ("t", "t_exp", "t_ama")}


def plan(method_cfg: dict, baseline_t: float = 1.0, rows=BASELINE_ROWS) -> list[Variant]:
    cfg = dict(method_cfg)
    name = cfg.pop("name")
    label = cfg.pop("variant", None) or name
    _, agg = methods.split_params(name, cfg)  # unknown keys fail here, before any model is loaded
    own = methods.get(name).plan_variants(label, cfg, rows)
    if own is not None:  # a method of another kind (a judge) names its own rows
        return [Variant(*row) for row in own]
    main = Variant(label, name, cfg)
    loaded = set(main.needs())
    # agg: norm under a method's own name too (cdm: pooling)
    shared = {**{k: cfg[k] for k in SHARED if k in cfg}, **agg}
    out = []
    for row in rows:
        if row not in BASELINE_ROWS:
            raise ConfigError(f"unknown baseline row {row!r}; known: {BASELINE_ROWS}")
        if row == label:
            continue
        if row in ("expert", "amateur") and row in loaded:
            out.append(Variant(row, "single", {"model": row, "t": baseline_t, **shared}))
        elif row == "ensemble" and {"expert", "amateur"} <= loaded:
            extra = {"floor": cfg["floor"]} if "floor" in cfg else {}
            gamma = methods.get("ensemble").Params().gamma  # Eq. 6: the YAML's default, 0.5
            out.append(Variant("ensemble", "ensemble",
                               {"gamma": gamma, "t_exp": baseline_t, "t_ama": baseline_t, **shared, **extra}))
    return out + [main]


def models_needed(variants: list[Variant]) -> list[str]:
    found = {m for v in variants for m in v.needs()}
    return [m for m in ("expert", "amateur") if m in found]
