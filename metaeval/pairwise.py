"""Pairwise accuracy with tie calibration (acc_eq; Deutsch et al. 2023, WMT23; mt-metrics-eval
``KendallWithTiesOpt``): the smallest metric-tie epsilon maximising the item mean of acc23 (or tau23)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cscore.metaeval.statistic import subset_rows

_TOL = 1e-12
KEY_COLUMNS = {"segment": None, "item": "group", "system_grouped": "system", "system": "system"}  # a level's groups


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
    label: np.ndarray      # each item's value of ``groups`` (0 without groups)


def _pairs(metric, human, groups=None) -> _Pairs:
    m = np.asarray(metric, dtype=np.float64).ravel()
    h = np.asarray(human, dtype=np.float64).ravel()
    if m.shape != h.shape:
        raise ValueError("metric and human differ in length")
    g, uniques = (np.zeros(m.size, dtype=np.int64), np.zeros(1, dtype=np.int64)) if groups is None else \
        pd.factorize(np.asarray(groups).ravel())
    if g.shape != m.shape:
        raise ValueError("groups differ in length from the scores")
    ok = np.isfinite(m) & np.isfinite(h) & (g >= 0)  # factorize: missing label -> -1
    m, h, g = m[ok], h[ok], g[ok]
    order = np.argsort(g, kind="stable")
    m, h, g = m[order], h[order], g[order]
    bounds = np.flatnonzero(np.diff(g)) + 1
    dms, dhs, labels = [np.zeros(0)], [np.zeros(0)], []  # per item with a pair: metric and human differences
    tri: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for s, e in zip(np.r_[0, bounds], np.r_[bounds, m.size]):
        if e - s >= 2:
            if e - s not in tri:
                tri[e - s] = np.triu_indices(e - s, 1)
            i, j = tri[e - s]
            dms.append(m[s:e][j] - m[s:e][i])
            dhs.append(h[s:e][j] - h[s:e][i])
            labels.append(g[s])
    sizes = np.asarray([d.size for d in dms[1:]], dtype=np.int64)
    dm, dh = np.concatenate(dms), np.concatenate(dhs)
    return _Pairs(np.abs(dm), ((dm > 0) & (dh > 0)) | ((dm < 0) & (dh < 0)), dh == 0,
                  np.repeat(np.arange(sizes.size, dtype=np.int64), sizes), sizes, np.asarray(uniques)[labels])


def _check_variant(variant: str) -> str:
    v = {"acc_23": "acc23", "tau_23": "23"}.get(variant, variant)
    if v not in ("acc23", "23"):
        raise ValueError("tie calibration is defined for variant 'acc23' or '23'")
    return v


def _mean_at(p: _Pairs, epsilon: float, variant: str) -> float:
    """Mean over items of acc23 / tau23 at a fixed epsilon, from integer counts."""
    if p.per_item.size == 0:
        return float("nan")
    correct = np.where(p.diff <= epsilon, p.human_tie, p.agree)
    acc = np.bincount(p.item, weights=correct.astype(np.float64), minlength=p.per_item.size) / p.per_item
    if variant == "23":
        acc = 2 * acc - 1  # (correct - wrong) / pairs
    return float(acc.mean())


def pairwise_accuracy(metric, human, groups=None, epsilon: float = 0.0, variant: str = "acc23") -> float:
    """acc23 (or tau23) at a fixed metric-tie threshold, averaged over items (``groups``; None: all pairs pooled)."""
    if epsilon < 0:
        raise ValueError("epsilon must be >= 0")
    return _mean_at(_pairs(metric, human, groups), epsilon, _check_variant(variant))


def _terms(p: _Pairs, variant: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(u, t, thresholds, step): a pair's value while untied (strict agreement) and once tied (human tie), 23:
    ±1; the thresholds 0 and every distinct |delta metric|, ascending; per pair the first threshold that ties it."""
    u, t = p.agree.astype(np.float64), p.human_tie.astype(np.float64)
    thresholds, step = np.unique(np.r_[0.0, p.diff], return_inverse=True)
    return ((2 * u - 1, 2 * t - 1) if variant == "23" else (u, t)) + (thresholds, step.ravel()[1:])


def _search(p: _Pairs, terms: tuple, w, base: float = 0.0) -> tuple[float, np.ndarray, float]:
    """(epsilon, the weighted sum at each threshold, the sum at epsilon): ``base`` plus w·u of a pair before its
    step, w·t from it; epsilon the first (smallest) threshold within floating-point noise of the maximum."""
    u, t, thresholds, step = terms
    values = np.sum(w * u) + base + np.cumsum(np.bincount(step, weights=w * (t - u), minlength=thresholds.size))
    eps = thresholds[np.flatnonzero(values >= values.max() - _TOL)[0]]
    return eps, values, np.sum(w * np.where(p.diff <= eps, t, u)) + base  # no BLAS: its threads stall on a busy CPU


def tie_calibration(metric, human, groups=None, variant: str = "acc23") -> TieCalibration:
    """Search the metric-tie threshold maximising the item-averaged acc23 (or tau23)."""
    variant = _check_variant(variant)
    p = _pairs(metric, human, groups)
    n_items = int(p.per_item.size)
    if n_items == 0:
        return TieCalibration(float("nan"), 0.0, np.zeros(1), np.full(1, np.nan), 0, 0)
    terms = _terms(p, variant)
    eps, values, _ = _search(p, terms, 1.0 / (p.per_item[p.item] * n_items))
    return TieCalibration(_mean_at(p, float(eps), variant), float(eps), terms[2], values, n_items, int(p.diff.size))


def acc_eq(metric, human, groups=None) -> tuple[float, float]:
    """(acc_eq, epsilon): tie-calibrated pairwise accuracy, item-averaged as WMT23 does."""
    res = tie_calibration(metric, human, groups, "acc23")
    return res.value, res.epsilon


def acc_eq_at(df: pd.DataFrame, metric_col: str, human_col: str, level: str = "item") -> tuple[float, float]:
    """acc_eq on a long table: pairs within each group (item, WMT23's segment level), within each system
    (system_grouped) or all pairs pooled (segment, mt-metrics-eval's ``average_by='none'``)."""
    groups = {"item": "group", "system_grouped": "system", "segment": None}
    if level not in groups:
        raise ValueError(f"unknown level {level!r}; use one of {tuple(groups)}")
    col = groups[level]
    return acc_eq(df[metric_col].to_numpy(dtype=np.float64), df[human_col].to_numpy(dtype=np.float64),
                  None if col is None else df[col].to_numpy())


class TieCalibratedStat:
    """Tie-calibrated acc23 (or tau23) as a report statistic at a ``levels.correlate_at`` level, on the rows
    of ``subset`` (column, value); epsilon is searched anew on every resample and permutation, as
    mt-metrics-eval does."""

    batchable = True

    def __init__(self, human_col: str, level: str = "item", variant: str = "acc23", *, subset: tuple | None = None):
        if level not in KEY_COLUMNS:
            raise ValueError(f"unknown level {level!r}")
        self.variant = _check_variant(variant)
        self.human_col, self.level, self.subset, self.key_col = human_col, level, subset, KEY_COLUMNS[level]
        where = "" if subset is None else f"[{subset[0]}={subset[1]}]"
        self.__name__ = f"{self.variant}-calibrated@{level}({human_col}){where}"

    def pairs_needed(self, df: pd.DataFrame, metric_col: str) -> int:
        """How many pairs the search holds at once (all pairs of finite cells within each group of the level)."""
        df = df[subset_rows(df, self.subset)]
        ok = np.isfinite(df[metric_col].to_numpy(dtype=np.float64)) & np.isfinite(
            df[self.human_col].to_numpy(dtype=np.float64))
        if self.level == "segment":
            sizes = np.array([ok.sum()])
        elif self.level == "system":
            sizes = np.array([df["system"][ok].nunique()])
        else:
            sizes = df[self.key_col][ok].value_counts().to_numpy()
        return int((sizes * (sizes - 1) // 2).sum())

    def _search(self, m, h, key) -> TieCalibration:
        if self.level == "system":  # per-system means over the finite cells, then all pairs of systems
            ok = np.isfinite(m) & np.isfinite(h)
            codes = pd.factorize(np.asarray(key)[ok], use_na_sentinel=False)[0]
            rows = [np.flatnonzero(codes == c) for c in range(codes.max() + 1 if codes.size else 0)]
            # exactly rounded sums: a mean does not depend on the order of its rows (ties stay ties)
            mm, hm = (np.array([math.fsum(v[ok][r]) / r.size for r in rows]) for v in (m, h))
            return tie_calibration(mm, hm, None, self.variant)
        return tie_calibration(m, h, None if self.level == "segment" else key, self.variant)

    def calibration(self, df: pd.DataFrame, metric_col: str) -> TieCalibration:
        df = df[subset_rows(df, self.subset)]
        key = None if self.key_col is None else df[self.key_col].to_numpy()
        return self._search(df[metric_col].to_numpy(dtype=np.float64), df[self.human_col].to_numpy(dtype=np.float64),
                            key)

    def __call__(self, df: pd.DataFrame, metric_col: str) -> float:
        return float(self.calibration(df, metric_col).value)

    def batch(self, df: pd.DataFrame, xs: list, ws: list, units=None) -> np.ndarray:
        h = df[self.human_col].to_numpy(dtype=np.float64)
        keep = subset_rows(df, self.subset)
        if len(xs) == 1 and self.level == "segment":
            return self._pooled_drawn(np.asarray(xs[0], dtype=np.float64), h, ws[0] * keep)
        if len(xs) == 1 and self.level == "item" and units is not None and units.col == self.key_col:
            return self._items_drawn(np.asarray(xs[0], dtype=np.float64), h, keep, units)
        return self._each(df, xs, ws, h, keep, units)

    def _pooled_drawn(self, x, h, W) -> np.ndarray:
        """Segment level: pair (i, j) enters version b ``W[b, i] * W[b, j]`` times; a row's own copies tie."""
        rows = np.flatnonzero(np.isfinite(x) & np.isfinite(h) & (W > 0).any(0))
        p, W = _pairs(x[rows], h[rows]), W[:, rows]  # one group: its pairs in np.triu_indices order
        i, j = np.triu_indices(rows.size, 1)
        terms = _terms(p, self.variant)
        out = np.full(len(W), np.nan)
        for b, w in enumerate(W):
            pw = w[i] * w[j]
            own = float((w * (w - 1) / 2).sum())  # pairs of a row with its own copies: correct
            total = pw.sum() + own
            if total == 0:
                continue
            out[b] = _search(p, terms, pw, own)[2] / total
        return out

    def _items_drawn(self, x, h, keep, units) -> np.ndarray:
        """Item level drawing items: version b is the mean over drawn items (with their counts)."""
        p = _pairs(np.where(keep, x, np.nan), h, units.codes)
        out = np.full(len(units.counts), np.nan)
        if p.per_item.size == 0:
            return out
        drawn = units.counts[:, p.label]  # (versions x items) draws of each item with pairs
        terms = _terms(p, self.variant)
        for b, c in enumerate(drawn):
            if c.sum() == 0:
                continue
            wt = c[p.item] / p.per_item[p.item] / c.sum()
            out[b] = _search(p, terms, wt)[2]
        return out

    def _each(self, df, xs, ws, h, keep, units) -> np.ndarray:
        """Any other version, expanded and searched on its own; a drawn unit's copies are distinct groups."""
        key = None if self.key_col is None else pd.factorize(df[self.key_col], use_na_sentinel=False)[0]
        copies = units is not None and units.col == self.key_col
        W = sum(ws) * keep
        X = sum(np.where(w > 0, np.asarray(x, dtype=np.float64), 0.0) for x, w in zip(xs, ws))  # NaN stays
        X = np.broadcast_to(X, W.shape)
        out = np.empty(len(W))
        for b in range(len(W)):
            reps = W[b].astype(np.int64)
            idx = np.repeat(np.arange(len(reps)), reps)
            k = None if key is None else key[idx]
            if copies and k is not None:  # copy c of a drawn unit: its own group
                k = k * (int(reps.max()) + 1) + (np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps))
            out[b] = self._search(X[b][idx], h[idx], k).value
        return out
