"""Pairwise accuracy with tie calibration (acc_eq; Deutsch, Foster & Freitag 2023, WMT23).

Definition (mt-metrics-eval, ``mt_metrics_eval/tau_optimization.py``: ``tau_optimization``,
``TauSufficientStats.acc_23``; called from ``mt_metrics_eval/stats.py``
``KendallWithTiesOpt``; the WMT23 segment-level task in ``mt_metrics_eval/tasks.py``
``WMT23`` uses ``corr_fcn='KendallWithTiesOpt', avg_by='item', sample_rate=1.0`` with the
default ``variant='acc23'``):

* Scores form an item x system matrix; an item is a ``group`` (source segment / document).
  For every item, every pair of systems with finite metric and human scores is a pair.
* At threshold epsilon >= 0 a pair is a METRIC tie when ``|m_i - m_j| <= epsilon``; a HUMAN
  tie when ``h_i == h_j`` (exact). The pair is correct when metric and human order it the
  same way (both untied), or both tie it. acc23 of an item = correct pairs / pairs.
* The value at epsilon is the UNWEIGHTED MEAN OVER ITEMS of the per-item acc23 (items with
  no pair, i.e. < 2 finite cells, are left out). mt-metrics-eval does NOT pool pairs across
  items in the item-grouped setting: ``tau_optimization`` keeps one set of counts per row
  (= item with ``average_by='item'``) and averages ``tau_fn`` over rows. With no grouping
  (``groups=None``, mt-metrics-eval's ``average_by='none'``) there is one row, i.e. pooled.
* acc_eq = max over epsilon of that mean; candidates are 0 and every distinct |delta metric|
  of a pair; ties between candidates go to the SMALLEST epsilon (``np.nanargmax`` over the
  ascending threshold list). WMT23 used all pairs (``sample_rate=1.0``); the library's
  default elsewhere is a random 10 % sample -- not reproduced here (always all pairs).

The search is vectorised: each pair contributes ``w * u`` while untied and ``w * t`` once
epsilon reaches its |delta metric| (u = strict agreement, t = human tie, w = 1 / (pairs of
its item * items)); sorting pairs by |delta metric| and taking cumulative sums of
``w * (t - u)`` gives the mean at every candidate at once (O(P log P)). The returned
accuracy is recomputed exactly at the chosen epsilon from integer counts.

``variant="23"`` optimises the WMT23 tau ('23': +1 for a correct pair, -1 otherwise)
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

_TOL = 1e-12


@dataclass
class TieCalibration:
    value: float            # best mean (acc23 or tau23) over items
    epsilon: float          # smallest threshold reaching it
    thresholds: np.ndarray  # all candidate thresholds (ascending, starting at 0)
    values: np.ndarray      # mean at each candidate threshold
    n_items: int            # items with at least one pair
    n_pairs: int


@dataclass
class _Pairs:
    diff: np.ndarray       # |delta metric|
    agree: np.ndarray      # both untied (exact) and same strict order
    human_tie: np.ndarray  # delta human == 0
    item: np.ndarray       # item index 0..n_items-1
    per_item: np.ndarray   # number of pairs in each item


def _pairs(metric, human, groups=None) -> _Pairs:
    m = np.asarray(metric, dtype=np.float64).ravel()
    h = np.asarray(human, dtype=np.float64).ravel()
    if m.shape != h.shape:
        raise ValueError("metric and human differ in length")
    g = np.zeros(m.size, dtype=np.int64) if groups is None else pd.factorize(
        np.asarray(groups).ravel())[0]
    if g.shape != m.shape:
        raise ValueError("groups differ in length from the scores")
    ok = np.isfinite(m) & np.isfinite(h) & (g >= 0)  # factorize: missing label -> -1
    m, h, g = m[ok], h[ok], g[ok]
    order = np.argsort(g, kind="stable")
    m, h, g = m[order], h[order], g[order]
    bounds = np.flatnonzero(np.diff(g)) + 1
    starts = np.r_[0, bounds]
    ends = np.r_[bounds, m.size]
    diffs: list[np.ndarray] = []
    agrees: list[np.ndarray] = []
    ties: list[np.ndarray] = []
    items: list[np.ndarray] = []
    counts: list[int] = []
    tri_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for s, e in zip(starts, ends):
        k = int(e - s)
        if k < 2:
            continue
        if k not in tri_cache:
            tri_cache[k] = np.triu_indices(k, 1)
        i, j = tri_cache[k]
        dm = m[s:e][j] - m[s:e][i]
        dh = h[s:e][j] - h[s:e][i]
        diffs.append(np.abs(dm))
        agrees.append(((dm > 0) & (dh > 0)) | ((dm < 0) & (dh < 0)))
        ties.append(dh == 0)
        items.append(np.full(dm.size, len(counts), dtype=np.int64))
        counts.append(dm.size)
    if not counts:
        empty = np.zeros(0)
        return _Pairs(empty, empty.astype(bool), empty.astype(bool),
                      empty.astype(np.int64), empty.astype(np.int64))
    return _Pairs(np.concatenate(diffs), np.concatenate(agrees), np.concatenate(ties),
                  np.concatenate(items), np.asarray(counts, dtype=np.int64))


def _check_variant(variant: str) -> str:
    v = {"acc_23": "acc23", "tau_23": "23"}.get(variant, variant)
    if v not in ("acc23", "23"):
        raise ValueError("tie calibration is defined for variant 'acc23' or '23'")
    return v


def _mean_at(p: _Pairs, epsilon: float, variant: str) -> float:
    """Mean over items of acc23 / tau23 at a fixed epsilon, from integer counts."""
    if p.per_item.size == 0:
        return float("nan")
    tied = p.diff <= epsilon
    correct = np.where(tied, p.human_tie, p.agree)
    n_correct = np.bincount(p.item, weights=correct.astype(np.float64),
                            minlength=p.per_item.size)
    acc = n_correct / p.per_item
    if variant == "23":
        acc = 2 * acc - 1  # (correct - wrong) / pairs
    return float(acc.mean())


def pairwise_accuracy(metric, human, groups=None, epsilon: float = 0.0,
                      variant: str = "acc23") -> float:
    """acc23 (or tau23) at a fixed metric-tie threshold, averaged over items (groups).

    ``groups=None``: one item, i.e. all pairs pooled. NaN when no item has a pair.
    """
    if epsilon < 0:
        raise ValueError("epsilon must be >= 0")
    return _mean_at(_pairs(metric, human, groups), epsilon, _check_variant(variant))


def tie_calibration(metric, human, groups=None, variant: str = "acc23") -> TieCalibration:
    """Search the metric-tie threshold maximising the item-averaged acc23 (or tau23)."""
    variant = _check_variant(variant)
    p = _pairs(metric, human, groups)
    n_items = int(p.per_item.size)
    if n_items == 0:
        return TieCalibration(float("nan"), 0.0, np.zeros(1), np.full(1, np.nan), 0, 0)
    u = p.agree.astype(np.float64)          # value while untied
    t = p.human_tie.astype(np.float64)      # value once tied
    if variant == "23":
        u, t = 2 * u - 1, 2 * t - 1
    w = 1.0 / (p.per_item[p.item] * n_items)
    base = float(np.sum(w * u))
    order = np.argsort(p.diff, kind="stable")
    d_sorted = p.diff[order]
    gain = np.cumsum((w * (t - u))[order])
    thresholds = np.unique(np.r_[0.0, d_sorted])
    k = np.searchsorted(d_sorted, thresholds, side="right")  # pairs tied at each threshold
    values = base + np.where(k > 0, gain[np.maximum(k - 1, 0)], 0.0)
    best = int(np.flatnonzero(values >= values.max() - _TOL)[0])
    eps = float(thresholds[best])
    return TieCalibration(_mean_at(p, eps, variant), eps, thresholds, values, n_items,
                          int(p.diff.size))


def acc_eq(metric, human, groups=None) -> tuple[float, float]:
    """(acc_eq, epsilon): tie-calibrated pairwise accuracy, item-averaged as WMT23 does."""
    res = tie_calibration(metric, human, groups, "acc23")
    return res.value, res.epsilon


def acc_eq_at(df: pd.DataFrame, metric_col: str, human_col: str, level: str = "item",
              group_col: str = "group", system_col: str = "system") -> tuple[float, float]:
    """acc_eq on a long table: level 'item' (pairs of systems within each group, WMT23
    segment-level), 'system_grouped' (pairs of items within each system) or 'segment'
    (all pairs of cells pooled, mt-metrics-eval ``average_by='none'``)."""
    groups = {"item": group_col, "system_grouped": system_col, "segment": None}
    if level not in groups:
        raise ValueError(f"unknown level {level!r}; use one of {tuple(groups)}")
    col = groups[level]
    return acc_eq(df[metric_col].to_numpy(dtype=np.float64),
                  df[human_col].to_numpy(dtype=np.float64),
                  None if col is None else df[col].to_numpy())


class TieCalibratedStat:
    """acc23 (or tau23) with tie calibration as a report statistic ``stat(df, metric_col)``:
    mt-metrics-eval's ``KendallWithTiesOpt`` (``sample_rate=1``: all pairs) at a correlation level,
    on the rows where ``df[subset[0]] == subset[1]`` when ``subset`` is given. Levels as
    ``levels.correlate_at``: ``item`` (pairs of systems within each item, averaged over items: the
    WMT23 segment level), ``system_grouped`` (pairs within each system, averaged), ``segment``
    (all pairs pooled, ``average_by='none'``), ``system`` (per-system mean scores, all pairs of
    systems). Epsilon is searched anew on every table it is given, as mt-metrics-eval searches it
    anew in every permutation; there is no batched form (``uncertainty`` loops over resamples)."""

    batchable = False

    def __init__(self, human_col: str, level: str = "item", variant: str = "acc23", *, subset: tuple | None = None,
                 group_col: str = "group", system_col: str = "system"):
        if level not in ("segment", "item", "system_grouped", "system"):
            raise ValueError(f"unknown level {level!r}")
        self.variant = _check_variant(variant)
        self.human_col, self.level, self.subset = human_col, level, subset
        self.group_col, self.system_col = group_col, system_col
        where = "" if subset is None else f"[{subset[0]}={subset[1]}]"
        self.__name__ = f"{self.variant}-calibrated@{level}({human_col}){where}"

    def calibration(self, df: pd.DataFrame, metric_col: str) -> TieCalibration:
        if self.subset is not None:
            df = df[df[self.subset[0]] == self.subset[1]]
        m = df[metric_col].to_numpy(dtype=np.float64)
        h = df[self.human_col].to_numpy(dtype=np.float64)
        if self.level == "system":
            ok = np.isfinite(m) & np.isfinite(h)
            means = pd.DataFrame({"m": m[ok], "h": h[ok]}).groupby(df[self.system_col].to_numpy()[ok]).mean()
            return tie_calibration(means["m"].to_numpy(), means["h"].to_numpy(), None, self.variant)
        col = {"segment": None, "item": self.group_col, "system_grouped": self.system_col}[self.level]
        return tie_calibration(m, h, None if col is None else df[col].to_numpy(), self.variant)

    def __call__(self, df: pd.DataFrame, metric_col: str) -> float:
        return float(self.calibration(df, metric_col).value)
