"""Metric-human correlation at the meta-evaluation levels (``LEVELS``) on a long table of one row per (item,
system) cell, as mt-metrics-eval's ``AverageCorrelation`` (average_by none / item / sys, level='sys');
docs/reports.md spells them out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cscore.metaeval.correlation import CORRELATIONS, correlate
from cscore.metaeval.kendall import kendall, kendall_like_counts, normalize_variant

LEVELS = ("segment", "item", "system_grouped", "system")


@dataclass(frozen=True)
class Grouping:
    """The item and system columns, and how per-group correlations are averaged (macro / micro)."""

    average: str = "macro"
    group_col: str = "group"
    system_col: str = "system"


@dataclass(frozen=True)
class KendallOptions:
    """The Kendall variants' own settings (None: not given): ``epsilon`` (metric ties) and ``thresh``."""

    epsilon: float | None = None
    thresh: float | None = None

    def kw(self) -> dict[str, float]:
        return {k: v for k, v in (("epsilon", self.epsilon), ("thresh", self.thresh)) if v is not None}


def check_options(level: str, average: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; use one of {LEVELS}")
    if average not in ("macro", "micro"):
        raise ValueError("average must be 'macro' or 'micro'")


def corr_fn(kind: str, variant: str | None, kw: dict):
    if kind not in CORRELATIONS:
        raise ValueError(f"unknown correlation {kind!r}; use one of {CORRELATIONS}")
    if kind == "kendall":
        v = normalize_variant("b" if variant is None else variant)
        if v != "b" or kw.get("epsilon", 0.0):
            return lambda x, y: kendall(x, y, v, **kw)
    elif variant is not None or kw:
        raise ValueError(f"variant / options apply to kind='kendall' only, not {kind!r}")
    return lambda x, y: correlate(x, y, kind)  # Pearson, Spearman or scipy's tau-b


def correlate_at(df: pd.DataFrame, metric_col: str, human_col: str, level: str,
                 kind: str = "pearson", variant: str | None = None,
                 grouping: Grouping = Grouping(), options: KendallOptions = KendallOptions()) -> dict:
    """Correlation of ``metric_col`` with ``human_col`` at ``level``: ``dict(value, n, n_groups, n_skipped,
    n_nonfinite)``, ``n_groups`` the correlations averaged or systems correlated, ``n_skipped`` groups left out."""
    kendall_kw = options.kw()
    check_options(level, grouping.average)
    fn = corr_fn(kind, variant, kendall_kw)
    is_like = kind == "kendall" and normalize_variant(variant or "b") == "like"

    m = df[metric_col].to_numpy(dtype=np.float64)
    h = df[human_col].to_numpy(dtype=np.float64)
    finite = np.isfinite(m) & np.isfinite(h)
    n_nonfinite = int((~finite).sum())

    def out(value, n, n_groups, n_skipped):
        return {"value": float(value), "n": int(n), "n_groups": int(n_groups),
                "n_skipped": int(n_skipped), "n_nonfinite": n_nonfinite}

    if level == "segment":
        value = fn(m[finite], h[finite])
        ok = np.isfinite(value)
        return out(value, finite.sum() if ok else 0, int(ok), int(not ok))

    if level == "system":
        return out(*_system_level(df[grouping.system_col].to_numpy(), m, h, finite, fn))
    key = df[grouping.group_col if level == "item" else grouping.system_col]
    return out(*_grouped(key.to_numpy(), m, h, finite, fn, grouping.average, is_like, kendall_kw))


def _system_level(key, m, h, finite, fn) -> tuple:
    """(value, n, n_groups, n_skipped) of the correlation of per-system means."""
    codes, _ = pd.factorize(key, use_na_sentinel=False)
    n_sys = int(codes.max()) + 1 if codes.size else 0
    cnt = np.bincount(codes[finite], minlength=n_sys)
    sm = np.bincount(codes[finite], weights=m[finite], minlength=n_sys)
    sh = np.bincount(codes[finite], weights=h[finite], minlength=n_sys)
    has = cnt > 0
    value = fn(sm[has] / cnt[has], sh[has] / cnt[has])
    return value, cnt.sum(), has.sum(), (~has).sum()


def _grouped(key, m, h, finite, fn, average: str, is_like: bool, kendall_kw: dict) -> tuple:
    """(value, n, n_groups, n_skipped) of the per-group correlations averaged (macro or micro)."""
    indices = pd.Series(np.arange(len(key))).groupby(key, sort=True, dropna=False).indices
    values: list = []
    weights: list = []  # micro: a group's pairs (Kendall-like) or cells
    n_used, n_skipped, n_pairless = 0, 0, 0
    for idx in indices.values():
        idx = idx[finite[idx]]
        if idx.size < 2:
            n_skipped += 1
            continue
        v = fn(m[idx], h[idx])
        if not np.isfinite(v) and is_like and average == "macro":
            v, n_pairless = 0.0, n_pairless + 1  # no pair reaches the threshold: 0, as mt-metrics-eval counts it
        if not np.isfinite(v):
            n_skipped += 1
            continue
        values.append(v)
        weights.append(sum(kendall_like_counts(m[idx], h[idx], **kendall_kw)) if is_like else idx.size)
        n_used += idx.size
    if not values or n_pairless == len(values):  # no group has a counted pair: NaN (mt-metrics-eval: 0)
        return np.nan, 0, 0, n_skipped + n_pairless
    w = np.asarray(weights, dtype=np.float64) if average == "micro" else None
    return np.average(values, weights=w), n_used, len(values), n_skipped
