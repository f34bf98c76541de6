"""Metric-human correlation at the levels used in meta-evaluation.

The input is a long table with one row per (item, system) cell: ``group`` (item: source
segment / document id), ``system``, one metric column and one human column.

Levels (mt-metrics-eval names in brackets: ``mt_metrics_eval/stats.py``
``AverageCorrelation`` / ``_Reshape`` with ``average_by``):

* ``segment``  -- one correlation over all finite cells [``average_by='none'``, "no
  grouping"];
* ``item``     -- one correlation per item (across its systems), averaged over items
  [``average_by='item'``, "item-grouped"; SummEval-style "summary-level"];
* ``system_grouped`` -- one correlation per system (across its items), averaged over systems
  [``average_by='sys'``];
* ``system``   -- per-system mean metric and mean human score (over that system's finite
  cells), then one correlation over systems [system level, ``level='sys'``].

Skipping: a group (item or system) with fewer than 2 finite cells, or whose correlation is
undefined (NaN), is left out of the average and counted in ``n_skipped``. For Pearson,
Spearman and Kendall b / c that is exactly "human or metric constant within the group"
(the BARTScore / G-Eval convention; mt-metrics-eval also drops NaN correlations from the
average unless ``replace_nans_with_zeros``). The WMT23 variants ``23`` / ``acc23`` are
defined on constant vectors (tied pairs are scored), so such groups are KEPT for them, as in
mt-metrics-eval. ``like`` with ``average="macro"``: a group whose cells hold no pair that
reaches the threshold counts as 0, as in mt-metrics-eval (``KendallLike`` returns 0 there and
``AverageCorrelation(macro=True)`` averages it in, "item-wise"); when no group has such a pair
the value is NaN (mt-metrics-eval: 0), so that "no pair reaches the threshold" (1-5 ratings with
the default 25) is not read as "no correlation". With ``average="micro"`` such a group weighs 0.

Averaging: ``average="macro"`` (default) is the plain mean over kept groups.
``average="micro"`` weights each group as mt-metrics-eval's ``AverageCorrelation(macro=
False)`` does: by its number of finite cells, or for ``like`` by its counted pairs C + D
(which makes it the pooled (sum C - sum D) / (sum C + sum D) -- the mt-metrics-eval default
for ``KendallLike`` and the WMT20 DARR definition).

Non-finite cells (metric or human) are left out before anything else and counted in
``n_nonfinite``. Pearson / Spearman / Kendall-b values come from scipy (via
``correlation.correlate``); the other Kendall variants from ``metaeval.kendall``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cscore.metaeval.correlation import CORRELATIONS, correlate
from cscore.metaeval.kendall import kendall, kendall_like_counts, normalize_variant

LEVELS = ("segment", "item", "system_grouped", "system")


@dataclass(frozen=True)
class Grouping:
    """Which columns group the rows into items (``group_col``) and systems (``system_col``), and how
    the per-group correlations are averaged (``average``: "macro" or "micro")."""

    average: str = "macro"
    group_col: str = "group"
    system_col: str = "system"


@dataclass(frozen=True)
class KendallOptions:
    """The Kendall variants' own settings: ``epsilon`` (metric ties, for b / 23 / acc23) and
    ``thresh`` (the gold-difference threshold of like, default 25); None: not given."""

    epsilon: float | None = None
    thresh: float | None = None

    def kw(self) -> dict[str, float]:
        """The settings given, as ``kendall`` takes them."""
        return {k: v for k, v in (("epsilon", self.epsilon), ("thresh", self.thresh)) if v is not None}


def check_options(level: str, average: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; use one of {LEVELS}")
    if average not in ("macro", "micro"):
        raise ValueError("average must be 'macro' or 'micro'")


def corr_fn(kind: str, variant: str | None, kw: dict):
    if kind not in CORRELATIONS:
        raise ValueError(f"unknown correlation {kind!r}; use one of {CORRELATIONS}")
    if kind != "kendall":
        if variant is not None or kw:
            raise ValueError(f"variant / options apply to kind='kendall' only, not {kind!r}")
        return lambda x, y: correlate(x, y, kind)
    v = normalize_variant("b" if variant is None else variant)
    if v == "b" and not kw.get("epsilon", 0.0):
        return lambda x, y: correlate(x, y, "kendall")  # scipy tau-b
    return lambda x, y: kendall(x, y, v, **kw)


def correlate_at(df: pd.DataFrame, metric_col: str, human_col: str, level: str,
                 kind: str = "pearson", variant: str | None = None,
                 grouping: Grouping = Grouping(), options: KendallOptions = KendallOptions()) -> dict:
    """Correlation of ``metric_col`` with ``human_col`` at ``level``; ``grouping``: ``average``,
    ``group_col``, ``system_col``; ``options``: the Kendall variant's own (``KendallOptions``).

    Returns ``dict(value, n, n_groups, n_skipped, n_nonfinite)``:
    ``n`` finite cells that entered the value; ``n_groups`` correlations averaged (item /
    system_grouped), systems correlated (system) or 1 (segment, 0 if NaN); ``n_skipped``
    groups / systems left out (segment: 1 if the value is NaN); ``n_nonfinite`` cells
    dropped for a non-finite metric or human score.
    """
    kendall_kw = options.kw()
    average, group_col, system_col = grouping.average, grouping.group_col, grouping.system_col
    check_options(level, average)
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
        return out(*_system_level(df[system_col].to_numpy(), m, h, finite, fn))
    key = df[group_col if level == "item" else system_col]
    return out(*_grouped(key.to_numpy(), m, h, finite, fn, average, is_like, kendall_kw))


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
    weights: list = []
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
        if is_like:
            weights.append(sum(kendall_like_counts(m[idx], h[idx], **kendall_kw)))
        else:
            weights.append(idx.size)
        n_used += idx.size
    if not values or n_pairless == len(values):  # no group has a counted pair: NaN (mt-metrics-eval: 0)
        return np.nan, 0, 0, n_skipped + n_pairless
    w = np.asarray(weights, dtype=np.float64) if average == "micro" else None
    return np.average(values, weights=w), n_used, len(values), n_skipped
