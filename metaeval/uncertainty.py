"""Uncertainty of meta-evaluation statistics: bootstrap CIs, paired permutation tests, clusters.

Everything here is built around a generic *statistic*::

    stat(df: pd.DataFrame, metric_col: str) -> float

e.g. the segment-level Kendall tau of ``metric_col`` against ``human.overall``, or
``levels.correlate_at(df, metric_col, human_col, level, kind)["value"]`` (see ``as_stat``).
The table holds one row per (item, system) cell with at least the metric columns; the item
column (``group`` by default) names the document / source segment that a row belongs to.

* ``bootstrap_ci`` -- percentile bootstrap interval, resampling items (all rows of a drawn
  item come along, duplicates kept) or single rows.
* ``permutation_test`` -- the PERM-BOTH paired permutation test of mt-metrics-eval
  (``mt_metrics_eval/stats.py::PermutationSigDiff``, after Deutsch et al. 2021,
  https://arxiv.org/abs/2104.00054), used for the WMT22-24 metrics-task significance clusters.
* ``significance_clusters`` -- mt-metrics-eval's rank assignment
  (``mt_metrics_eval/data.py::CompareMetrics`` + ``AssignRanks``).

Speed: a statistic with ``batchable = True`` and a ``batch`` method (``LevelStat`` -- the
``correlate_at`` value, optionally on a subset of rows -- and ``MeanStat``) is evaluated for
all resamples at once: the resamples are drawn as one index matrix, turned into per-row
weights (how often each row enters each resample) and the correlations of every resample are
computed with array operations (Kendall from item-level pair matrices). The values are those
of the per-resample loop up to floating-point rounding. Any other callable is evaluated once
per resample on the resampled table, as before.

Definitions read from google-research/mt-metrics-eval (stats.py, data.py):

PERM-BOTH (``PermutationSigDiff(corr1, corr2, ...)``): both metrics' score vectors are
z-scored *globally* (``scipy.stats.zscore`` over the whole flattened vector of cells that have a
gold score, population std, ddof=0 -- not per item); the observed delta is
``corr(metric2) - corr(metric1)`` on the z-scored vectors; each of the ``k`` permutations
draws an independent Bernoulli(0.5) coin *per cell* and swaps the two metrics' scores in the
cells where it came up; the p-value is the *one-sided* share ``#{delta_perm >= delta} / k``
(no +1 smoothing) for the hypothesis that metric2 is better. (Early stopping every
``block_size=1000`` runs when p < 0.02 or p > 0.5 never fires for k <= 1000; not implemented.)

AssignRanks: metrics sorted by decreasing statistic (ties broken by name);
``sig[i, j]`` (i < j) is the p-value that metric i beats metric j. Walking down the list,
metric i opens a new rank iff ``sig[k, i] <= alpha`` for ANY k in the current cluster, i.e.
from the current cluster's first (best) member up to i - 1. It is never compared with
metrics of earlier clusters, and rank numbers are consecutive (1, 2, 3, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from cscore.metaeval.kendall import kendall_like_counts, normalize_variant
from cscore.metaeval.levels import check_options, corr_fn

Stat = Callable[[pd.DataFrame, str], float]

# relative tolerance when comparing a permuted delta with the observed one, so that deltas
# that are equal up to floating-point summation order count as ">=" (mt-metrics-eval uses
# an exact ">=")
_TIE_EPS = 1e-12
_PAIRWISE_MAX = 512     # cells up to which Kendall / Spearman use n x n pair matrices
_ROW_PAIRS_MAX = 64     # cells up to which Kendall of per-version values uses pair arrays, else a loop
_CHUNK_CELLS = 1 << 21  # (resample x row) cells evaluated at once (bounded memory)
_NEAR_CONSTANT = 1e-10  # relative variance below which Pearson is recomputed cell by cell


# --------------------------------------------------------------------------------------
# statistics helpers
# --------------------------------------------------------------------------------------

def as_stat(fn: Callable, *args, key: str = "value", **kwargs) -> Stat:
    """Wrap ``fn(df, metric_col, *args, **kwargs)`` into a ``stat(df, metric_col) -> float``.

    ``fn`` may return a float or a mapping (e.g. ``levels.correlate_at``'s dict); in the
    latter case ``result[key]`` is used::

        stat = as_stat(correlate_at, "human.overall", "item", "kendall")
    """

    def stat(df: pd.DataFrame, metric_col: str) -> float:
        out = fn(df, metric_col, *args, **kwargs)
        if isinstance(out, dict):
            out = out[key]
        return float(out)

    stat.__name__ = getattr(fn, "__name__", "stat")
    return stat


def correlation_stat(human_col: str, kind: str = "pearson") -> LevelStat:
    """Plain correlation over all rows (``correlation.correlate``, i.e. the segment level)."""
    stat = LevelStat(human_col, "segment", kind)
    stat.__name__ = f"{kind}({human_col})"
    return stat


def batchable(stat) -> bool:
    """Whether ``stat`` can evaluate all resamples at once (``stat.batch``)."""
    return bool(getattr(stat, "batchable", False))


@dataclass
class Units:
    """A bootstrap over whole units of column ``col`` where every draw counts as its own unit:
    ``codes`` the unit of each row, ``counts`` (resamples x units) the draws of each unit."""

    col: str
    codes: np.ndarray
    counts: np.ndarray


class LevelStat:
    """``correlate_at(df, metric_col, human_col, level, kind, variant, ...)["value"]`` as a
    statistic, on the rows where ``df[subset[0]] == subset[1]`` when ``subset`` is given
    (computed by ``batch``; equal to ``correlate_at`` up to floating-point rounding).

    ``batch(df, xs, ws, units)`` evaluates B resampled versions of the table at once: row i
    enters version b ``ws[p][b, i]`` times (an integer) with metric value ``xs[p][i]`` -- one
    candidate for a bootstrap (the metric column, weights = draws), two for a permutation (the
    own and the other metric's score, weights 0 / 1; a row takes one candidate per version).
    The result is the statistic of each version's expanded table, in which every row is
    repeated by its weight. ``units``: see ``Units`` (each draw of that column is one item /
    system, as ``bootstrap_ci(relabel=True)`` does).
    """

    batchable = True

    def __init__(self, human_col: str, level: str = "segment", kind: str = "pearson", variant: str | None = None,
                 *, subset: tuple | None = None, group_col: str = "group", system_col: str = "system",
                 average: str = "macro", **kendall_kw):
        check_options(level, average)
        self.corr = _Correlation(kind, variant, kendall_kw)
        self.human_col, self.level, self.subset, self.average = human_col, level, subset, average
        self.group_col, self.system_col = group_col, system_col
        where = "" if subset is None else f"[{subset[0]}={subset[1]}]"
        self.__name__ = f"{kind}@{level}({human_col}){where}"

    def __call__(self, df: pd.DataFrame, metric_col: str) -> float:
        """The value on ``df``: one version in which every row enters once."""
        x = df[metric_col].to_numpy(dtype=np.float64)
        return float(self.batch(df, [x], [np.ones((1, len(df)))])[0])

    def batch(self, df: pd.DataFrame, xs: list, ws: list, units: Units | None = None) -> np.ndarray:
        h = df[self.human_col].to_numpy(dtype=np.float64)
        keep = np.ones(len(df), dtype=bool)
        if self.subset is not None:
            keep = (df[self.subset[0]] == self.subset[1]).to_numpy()
            ws = [w * keep for w in ws]
        key = self.group_col if self.level == "item" else self.system_col
        if self.level != "segment" and units is not None and units.col == key:
            drawn = self._system_drawn if self.level == "system" else self._grouped_drawn
            return drawn(xs[0], h, keep, units)
        if self.level == "segment":
            return self.corr.candidates(xs, ws, h)[0]
        if self.level == "system":
            return self._system(df, xs, ws, h)
        return self._grouped(df[key], xs, ws, h)

    def _micro(self, weights: np.ndarray) -> np.ndarray:
        return weights if self.average == "micro" else np.ones_like(weights)

    def _grouped(self, key: pd.Series, xs, ws, h) -> np.ndarray:
        """One correlation per group (item or system) of each version, averaged over groups."""
        values, weights = [], []
        for rows in _rows_by_code(*_factorize(key)):
            v, wt = self.corr.candidates([x[rows] for x in xs], [w[:, rows] for w in ws], h[rows])
            values.append(v)
            weights.append(self._micro(wt))
        return _weighted_mean(np.array(values), np.array(weights))

    def _grouped_drawn(self, x, h, keep, units: Units) -> np.ndarray:
        """Every draw is a group: per-unit values are fixed, the draws only weight them."""
        n_units = units.counts.shape[1]
        values, weights = np.full(n_units, np.nan), np.zeros(n_units)
        for u, rows in enumerate(_rows_by_code(units.codes, n_units)):
            v, wt = self.corr.candidates([x[rows]], [keep[rows][None, :].astype(np.float64)], h[rows])
            values[u], weights[u] = v[0], self._micro(wt)[0]
        return _weighted_mean(values[:, None], units.counts.T * weights[:, None])

    def _system(self, df: pd.DataFrame, xs, ws, h) -> np.ndarray:
        """Per-system mean metric and human score of each version, correlated over systems."""
        xs, ws, h = _clean(xs, ws, h)
        X, W = _materialise(xs, ws)
        codes, n_systems = _factorize(df[self.system_col])
        count = _sum_by_code(W, codes, n_systems)
        with np.errstate(divide="ignore", invalid="ignore"):
            mx = _sum_by_code(W * X, codes, n_systems) / count
            my = _sum_by_code(W * h, codes, n_systems) / count
        return self.corr.rows(mx, my, (count > 0).astype(np.float64))[0]

    def _system_drawn(self, x, h, keep, units: Units) -> np.ndarray:
        """Every draw is a system: per-system means are fixed, the draws only weight them."""
        on = keep & np.isfinite(x) & np.isfinite(h)
        onehot = _onehot(units.codes, units.counts.shape[1]) * on[:, None]
        count = onehot.sum(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            mx, my = (np.where(on, x, 0.0) @ onehot) / count, (np.where(on, h, 0.0) @ onehot) / count
        return self.corr.candidates([mx], [units.counts * (count > 0)], my)[0]


class MeanStat:
    """The mean of several statistics (e.g. the AVG column over aspects); NaN if any is NaN."""

    def __init__(self, stats: list, name: str = "mean"):
        self.stats = list(stats)
        self.__name__ = name

    @property
    def batchable(self) -> bool:
        return all(batchable(s) for s in self.stats)

    def __call__(self, df: pd.DataFrame, metric_col: str) -> float:
        return float(np.mean([s(df, metric_col) for s in self.stats]))

    def batch(self, df: pd.DataFrame, xs: list, ws: list, units: Units | None = None) -> np.ndarray:
        return np.mean([s.batch(df, xs, ws, units) for s in self.stats], axis=0)


# --------------------------------------------------------------------------------------
# correlations of many weighted resamples at once
# --------------------------------------------------------------------------------------

class _Correlation:
    """One correlation definition as ``correlate_at`` applies it to a set of cells (``scalar``:
    the per-sample function it uses), evaluated on B weighted versions of the cells at once.
    Both methods return (values, micro weights): the cells of each version, or for Kendall-like
    its counted pairs C + D, as ``correlate_at(average="micro")`` weights a group."""

    def __init__(self, kind: str, variant: str | None, kendall_kw: dict):
        self.scalar = corr_fn(kind, variant, kendall_kw)  # validates kind, variant and options
        self.kind = kind
        self.variant = normalize_variant(variant or "b") if kind == "kendall" else None
        self.epsilon = float(kendall_kw.get("epsilon", 0.0))
        self.thresh = float(kendall_kw.get("thresh", 25.0))

    def candidates(self, xs: list, ws: list, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Versions given by candidate metric vectors ``xs`` (n,), their weights ``ws`` (B, n)
        and the human vector ``y`` (n,) (see ``LevelStat``)."""
        xs, ws, y = _clean(xs, ws, y)
        if self.kind == "pearson":
            return _pearson_candidates(xs, ws, y), sum(ws).sum(1)
        if len(y) > _PAIRWISE_MAX:
            X, W = _materialise(xs, ws)
            return self._rows(X, y, W)
        if self.kind == "spearman":
            W = sum(ws)
            same = (W == W[:1]).all()  # every version has the same cells (a permutation): y ranked once
            return _spearman(_candidate_ranks(xs, ws), _candidate_ranks([y], [W[:1] if same else W]), W), W.sum(1)
        return self._kendall(_CandidatePairs(xs, ws, y))

    def rows(self, X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Versions given by their values: X and Y (B, n) or (n,), integer weights W (B, n)."""
        return self._rows(*_clean_rows(X, Y, W))

    def _rows(self, X, Y, W) -> tuple[np.ndarray, np.ndarray]:
        if self.kind == "pearson":
            return _pearson(X, Y, W), W.sum(1)
        if self.kind == "spearman":
            return _spearman(_ranks(X, W), _ranks(Y, W), W), W.sum(1)
        if W.shape[1] <= _ROW_PAIRS_MAX:
            return self._kendall(_RowPairs(X, Y, W))
        return self._loop(X, Y, W)

    def _loop(self, X, Y, W) -> tuple[np.ndarray, np.ndarray]:
        """One scalar call per version on the expanded cells (Kendall on many rows)."""
        X, Y = np.broadcast_to(X, W.shape), np.broadcast_to(Y, W.shape)
        values, weights = np.empty(len(W)), W.sum(1)
        for b, repeat in enumerate(W.astype(np.int64)):
            x, y = np.repeat(X[b], repeat), np.repeat(Y[b], repeat)
            values[b] = self.scalar(x, y)
            if self.variant == "like":
                weights[b] = sum(kendall_like_counts(x, y, self.thresh))
        return values, weights

    def _kendall(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """Kendall variants from weighted pair counts, with kendall.py's definitions; ``pairs``:
        ``_CandidatePairs`` or ``_RowPairs``. A pair is dx = metric difference, dy = human's."""
        if self.variant == "like":
            agree = pairs.sum(lambda dx, dy: (np.abs(dy) >= self.thresh) & (np.sign(dx) == np.sign(dy)) & (dy != 0))
            counted = pairs.sum(lambda dx, dy: np.abs(dy) >= self.thresh, uses_x=False)
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(counted > 0, (2 * agree - counted) / counted, np.nan), counted
        n_cells = pairs.W.sum(1)
        n_pairs = n_cells * (n_cells - 1) / 2

        def sx(dx):  # metric order of a pair; 0 = metric tie
            return np.where(np.abs(dx) <= self.epsilon, 0.0, np.sign(dx))

        c_minus_d = pairs.sum(lambda dx, dy: sx(dx) * np.sign(dy))
        untied_x = pairs.sum(lambda dx, dy: np.abs(sx(dx)))
        untied_y = pairs.sum(lambda dx, dy: dy != 0, uses_x=False)
        undefined = (n_pairs == 0) | (untied_x == 0) | (untied_y == 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.variant == "b":
                tau = c_minus_d / np.sqrt(untied_x) / np.sqrt(untied_y)
                tau = np.clip(tau, -1.0, 1.0) if not self.epsilon else tau  # as scipy's tau-b
            elif self.variant == "c":
                m = np.minimum(*pairs.distinct())
                tau = 2 * c_minus_d / (n_cells ** 2 * (m - 1) / m)
            else:
                c_plus_d = pairs.sum(lambda dx, dy: np.abs(sx(dx)) * (dy != 0))
                tau = self._tau23(c_minus_d, c_plus_d, untied_x, untied_y, n_pairs)
                undefined = n_pairs == 0
        return np.where(undefined, np.nan, tau), n_cells

    def _tau23(self, c_minus_d, c_plus_d, untied_x, untied_y, n_pairs) -> np.ndarray:
        con, dis = (c_plus_d + c_minus_d) / 2, (c_plus_d - c_minus_d) / 2
        ties_y, ties_x = untied_x - c_plus_d, untied_y - c_plus_d  # untied in x: C + D + Ty
        ties_both = n_pairs - c_plus_d - ties_x - ties_y
        if self.variant == "23":
            return (con + ties_both - dis - ties_x - ties_y) / n_pairs
        return (con + ties_both) / n_pairs


class _CandidatePairs:
    """Pair sums over versions given by candidates: fixed n x n pair matrices, one matrix
    product per pair of candidates (see ``_pair_sum``)."""

    def __init__(self, xs, ws, y):
        self.xs, self.ws, self.y, self.W = xs, ws, y, sum(ws)
        self.dy = y[None, :] - y[:, None]  # dy[i, j] = y[j] - y[i]

    def sum(self, pair_fn, uses_x: bool = True) -> np.ndarray:
        if not uses_x:
            return _pair_sum([self.y], [self.W], lambda _: pair_fn(None, self.dy))
        return _pair_sum(self.xs, self.ws, lambda dx: pair_fn(dx, self.dy))

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        return _n_distinct(*_materialise(self.xs, self.ws)), _n_distinct(self.y, self.W)


class _RowPairs:
    """Pair sums over versions given by their values (few cells): B x n x n pair arrays."""

    def __init__(self, X, Y, W):
        self.X, self.Y, self.W = np.broadcast_to(X, W.shape), np.broadcast_to(Y, W.shape), W

    def sum(self, pair_fn, uses_x: bool = True) -> np.ndarray:
        out = np.empty(len(self.W))
        n = self.W.shape[1]
        for part in _chunks(len(self.W), n * n):
            X, Y, W = self.X[part], self.Y[part], self.W[part]
            m = np.asarray(pair_fn(X[:, None, :] - X[:, :, None], Y[:, None, :] - Y[:, :, None]), dtype=np.float64)
            # all ordered pairs of cells, less each cell with itself, halved (as _pair_sum)
            out[part] = (np.einsum("bi,bij,bj->b", W, m, W) - np.einsum("bii,bi->b", m, W)) / 2
        return out

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        return _n_distinct(self.X, self.W), _n_distinct(self.Y, self.W)


def _clean(xs, ws, y):
    """Cells with a non-finite metric or human value get weight 0 (and value 0)."""
    y = np.asarray(y, dtype=np.float64)
    y_ok = np.isfinite(y)
    out_x, out_w = [], []
    for x, w in zip(xs, ws):
        x = np.asarray(x, dtype=np.float64)
        ok = np.isfinite(x) & y_ok
        out_x.append(x if ok.all() else np.where(ok, x, 0.0))
        out_w.append(w if ok.all() else w * ok)
    return out_x, out_w, np.where(y_ok, y, 0.0)


def _clean_rows(X, Y, W):
    ok = np.isfinite(X) & np.isfinite(Y) & (W > 0)
    return np.where(ok, X, 0.0), np.where(ok, Y, 0.0), np.where(ok, W, 0.0)


def _materialise(xs, ws) -> tuple[np.ndarray, np.ndarray]:
    """(values, weights), both (B, n), of versions given by candidates."""
    W = sum(ws)
    X = sum((w > 0) * x for x, w in zip(xs, ws))
    return np.broadcast_to(X, W.shape), W


def _constant(X, W) -> np.ndarray:
    on = W > 0
    return np.where(on, X, -np.inf).max(1) == np.where(on, X, np.inf).min(1)


def _pearson(X, Y, W) -> np.ndarray:
    """Weighted Pearson per version = Pearson of the expanded cells; NaN with fewer than 2
    cells or a constant side (as ``correlation.correlate``)."""
    n = W.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = X - ((W * X).sum(1) / n)[:, None]
        dy = Y - ((W * Y).sum(1) / n)[:, None]
        r = (W * dx * dy).sum(1) / np.sqrt((W * dx * dx).sum(1)) / np.sqrt((W * dy * dy).sum(1))
    undefined = (n < 2) | _constant(X, W) | _constant(Y, W)
    return np.where(undefined, np.nan, np.clip(r, -1.0, 1.0))


def _pearson_candidates(xs, ws, y) -> np.ndarray:
    """``_pearson`` of versions given by candidates, from weighted sums (matrix-vector products).
    Versions whose variance is (nearly) zero on either side are recomputed by ``_pearson``,
    which tests for an exactly constant side."""
    W = sum(ws)
    n = W.sum(1)
    shift = np.mean([x.mean() for x in xs])  # any common shift; a central one keeps sums small
    xs = [x - shift for x in xs]
    y = y - y.mean()
    sx, sy = sum(w @ x for x, w in zip(xs, ws)), W @ y
    with np.errstate(divide="ignore", invalid="ignore"):
        sxx, syy = sum(w @ (x * x) for x, w in zip(xs, ws)), W @ (y * y)
        vx, vy = sxx - sx * sx / n, syy - sy * sy / n
        cov = sum(w @ (x * y) for x, w in zip(xs, ws)) - sx * sy / n
        r = np.clip(cov / np.sqrt(vx) / np.sqrt(vy), -1.0, 1.0)
    r[n < 2] = np.nan
    near = (n >= 2) & ((vx <= _NEAR_CONSTANT * sxx) | (vy <= _NEAR_CONSTANT * syy))
    if near.any():
        X, W_near = _materialise(xs, [w[near] for w in ws])
        r[near] = _pearson(X, y, W_near)
    return r


def _spearman(RX, RY, W) -> np.ndarray:
    """Pearson of the average ranks of the expanded cells. Ranks of S cells average (S + 1) / 2
    on both sides, and their sums are exact, so a constant side gives a variance of exactly 0."""
    S = W.sum(1)
    mean_sq = S * ((S + 1) / 2) ** 2
    vx, vy = (W * RX * RX).sum(1) - mean_sq, (W * RY * RY).sum(1) - mean_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.clip(((W * RX * RY).sum(1) - mean_sq) / np.sqrt(vx) / np.sqrt(vy), -1.0, 1.0)
    return np.where((S < 2) | (vx <= 0) | (vy <= 0), np.nan, r)


def _candidate_ranks(xs, ws) -> np.ndarray:
    """``_ranks`` of versions given by candidates, from pair matrices: the rank of a cell is the
    weight of the cells below it plus half the weight of its ties (itself included) plus 1/2."""
    # every product is a sum of halves of integer weights: exact in float32 (twice BLAS's float64
    # speed) while the weights sum below 2**22
    exact32 = max(float(w.sum(1).max()) for w in ws) < 2**22 if ws else True
    dtype = np.float32 if exact32 else np.float64
    ranks = 0.0
    for xp, wp in zip(xs, ws):
        rank_p = 0.5
        for xq, wq in zip(xs, ws):
            d = xq[None, :] - xp[:, None]  # d[i, j] = xq[j] - xp[i]
            below = ((d < 0) + 0.5 * (d == 0)).astype(dtype)
            rank_p = rank_p + (wq.astype(dtype) @ below.T).astype(np.float64)
        ranks = ranks + (wp > 0) * rank_p
    return np.asarray(ranks)  # an array already (the same object) once a candidate was added


def _ranks(X, W) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank) of every cell of each version's
    expanded cells; a row of weight k occupies k tied positions. Weight-0 cells: unused."""
    X = np.broadcast_to(np.where(W > 0, X, np.inf), W.shape)
    order = np.argsort(X, axis=1, kind="stable")
    xs, ws = np.take_along_axis(X, order, 1), np.take_along_axis(W, order, 1)
    n = X.shape[1]
    pos = np.arange(n)
    first = np.ones(xs.shape, dtype=bool)
    first[:, 1:] = xs[:, 1:] != xs[:, :-1]
    last = np.ones(xs.shape, dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    cum = np.cumsum(ws, axis=1)
    before = np.take_along_axis(cum, start, 1) - np.take_along_axis(ws, start, 1)
    tied = np.take_along_axis(cum, end, 1) - before
    ranks = np.empty_like(cum)
    np.put_along_axis(ranks, order, before + (tied + 1) / 2, 1)
    return ranks


def _n_distinct(X, W) -> np.ndarray:
    """Distinct values among the cells of weight > 0 of each version."""
    xs = np.sort(np.broadcast_to(np.where(W > 0, X, np.inf), W.shape), axis=1)
    first = np.ones(xs.shape, dtype=bool)
    first[:, 1:] = xs[:, 1:] != xs[:, :-1]
    return (first & np.isfinite(xs)).sum(1)


def _pair_sum(xs, ws, pair_fn) -> np.ndarray:
    """Per version, the sum of ``pair_fn`` over all unordered pairs of expanded cells (two
    copies of one row included). ``pair_fn(dx)`` gives the (n, n) pair matrix for cell i taking
    candidate p and cell j candidate q, ``dx[i, j] = xs[q][j] - xs[p][i]``; it must not depend
    on the pair's order (the matrix for (q, p) is the transpose of (p, q))."""
    total = 0.0
    for p, (xp, wp) in enumerate(zip(xs, ws)):
        for q in range(p, len(xs)):
            m = np.asarray(pair_fn(xs[q][None, :] - xp[:, None]), dtype=np.float64)
            both = ((wp @ m) * ws[q]).sum(1)
            # (p, q) and (q, p) give the same sum; a cell is not paired with itself
            total = total + (both - wp @ np.diag(m) if p == q else 2 * both)
    return np.asarray(total / 2)  # an array already (the same object) once a candidate was added


def _factorize(key) -> tuple[np.ndarray, int]:
    """Integer codes of ``key``; missing values form a group of their own, as in levels.py."""
    codes, uniques = pd.factorize(np.asarray(key), use_na_sentinel=False)
    return codes, len(uniques)


def _rows_by_code(codes: np.ndarray, n_codes: int) -> list[np.ndarray]:
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.cumsum(np.bincount(codes, minlength=n_codes))[:-1])


def _sum_by_code(A: np.ndarray, codes: np.ndarray, n_codes: int) -> np.ndarray:
    """(B, n_codes): the sum of A's columns of each code (every code has a row, as factorize gives)."""
    order = np.argsort(codes, kind="stable")
    starts = np.cumsum(np.bincount(codes, minlength=n_codes))[:-1]
    return np.add.reduceat(A[:, order], np.r_[0, starts], axis=1)


def _onehot(codes: np.ndarray, n_codes: int) -> np.ndarray:
    return (codes[:, None] == np.arange(n_codes)[None, :]).astype(np.float64)


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per version (column), the weighted mean of the finite values (rows); NaN if none."""
    ok = np.isfinite(values) & (weights > 0)
    w = np.where(ok, weights, 0.0)
    total = w.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, (np.where(ok, values, 0.0) * w).sum(0) / total, np.nan)


def _chunks(n: int, width: int):
    """Slices of at most _CHUNK_CELLS / width resamples."""
    step = max(1, _CHUNK_CELLS // max(width, 1))
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


# --------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------

class BootstrapCI(tuple):
    """``(point, low, high)``; also ``.n`` (resamples drawn), ``.n_nan`` (resamples whose
    statistic was not finite, left out of the interval), ``.n_units`` (items or rows
    resampled), ``.alpha``, ``.resample`` and ``.samples`` (the finite resampled values)."""

    n: int
    n_nan: int

    def __new__(cls, point, low, high, **extra):
        self = super().__new__(cls, (point, low, high))
        self.__dict__.update(extra)
        return self

    point = property(lambda self: self[0])
    low = property(lambda self: self[1])
    high = property(lambda self: self[2])

    def __repr__(self) -> str:
        return (f"BootstrapCI(point={self[0]!r}, low={self[1]!r}, high={self[2]!r}, "
                f"n={self.n}, n_nan={self.n_nan})")


MIN_UNITS = 10  # a bootstrap over fewer units (documents, segments) than this gets a warning


def few_units_warning(n_units: int, unit: str = "items", what: str = "the bootstrap intervals") -> str:
    """One line when a bootstrap resamples fewer than ``MIN_UNITS`` units, else ''."""
    if n_units >= MIN_UNITS:
        return ""
    return (f"only {n_units} {unit} to resample (fewer than {MIN_UNITS}): {what} rest on too few to be "
            "reliable")


def _unit_codes(df: pd.DataFrame, col: str | None) -> tuple[np.ndarray | None, int]:
    """(unit of each row, number of units); every row its own unit when ``col`` is None."""
    if col is None:
        return None, len(df)
    if col not in df.columns:
        raise KeyError(f"resample column {col!r} not in the table")
    codes, uniques = pd.factorize(df[col], sort=False)
    if (codes < 0).any():
        raise ValueError(f"resample column {col!r} has missing values")
    return codes, len(uniques)


class _GroupSampler:
    """Row indices of a resample of whole units, built without a Python loop over units."""

    def __init__(self, codes: np.ndarray, n_units: int):
        self.order = np.argsort(codes, kind="stable")  # rows sorted by unit
        self.sizes = np.bincount(codes, minlength=n_units)
        self.starts = np.cumsum(self.sizes) - self.sizes

    def rows(self, drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows for the drawn units (in draw order) and, per row, the draw number."""
        lens = self.sizes[drawn]
        total = int(lens.sum())
        out_starts = np.cumsum(lens) - lens
        pos = np.arange(total) - np.repeat(out_starts, lens) + np.repeat(self.starts[drawn], lens)
        return self.order[pos], np.repeat(np.arange(len(drawn)), lens)


def bootstrap_ci(df: pd.DataFrame, stat: Stat, metric_col: str, *, resample: str | None = "group",
                 n: int = 1000, seed: int = 0, alpha: float = 0.05, relabel: bool = True) -> BootstrapCI:
    """Percentile bootstrap confidence interval of ``stat(df, metric_col)``.

    ``resample="group"`` (or any column): draw as many units (unique values of that column)
    as there are, uniformly with replacement; every row of a drawn unit comes along and a
    unit drawn twice appears twice. With ``relabel=True`` (default) each draw gets its own
    integer label in that column (0, 1, ... in draw order) so that statistics that group by
    it (e.g. item-level correlations averaged over items) treat the two copies as two items;
    the original value is kept in the column ``f"{resample}_orig"``.
    ``resample=None``: draw ``len(df)`` rows with replacement.

    Returns ``BootstrapCI(point, low, high)``: point = stat on the full table; low/high =
    the ``alpha/2`` and ``1 - alpha/2`` quantiles (numpy linear interpolation) of the
    resampled statistics. Resamples whose statistic is NaN/inf are counted in ``.n_nan`` and
    excluded; if none is finite, low and high are NaN.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    point = float(stat(df, metric_col))
    rng = np.random.default_rng(seed)
    codes, n_units = _unit_codes(df, resample)
    draws = rng.integers(0, n_units, size=(n, n_units))  # resample b draws units draws[b]
    if batchable(stat):
        values = _bootstrap_batch(df, stat, metric_col, draws, codes, resample if relabel else None)
    else:
        values = _bootstrap_loop(df, stat, metric_col, draws, codes, resample, relabel)
    finite = np.isfinite(values)
    ok = values[finite]
    if ok.size:
        low, high = (float(v) for v in np.quantile(ok, [alpha / 2, 1 - alpha / 2]))
    else:
        low = high = math.nan
    return BootstrapCI(point, low, high, n=n, n_nan=int((~finite).sum()), n_units=n_units,
                       alpha=alpha, resample=resample, samples=ok)


def _draw_counts(draws: np.ndarray, n_units: int) -> np.ndarray:
    """(resamples x units) how often each unit was drawn."""
    offsets = draws + n_units * np.arange(len(draws))[:, None]
    return np.bincount(offsets.ravel(), minlength=draws.size).reshape(draws.shape).astype(np.float64)


def _bootstrap_batch(df, stat, metric_col, draws, codes, relabel_col) -> np.ndarray:
    """All resamples through ``stat.batch``: a row's weight is the draw count of its unit."""
    x = df[metric_col].to_numpy(dtype=np.float64)
    values = np.empty(len(draws))
    for part in _chunks(len(draws), len(df)):
        counts = _draw_counts(draws[part], draws.shape[1])
        weights = counts if codes is None else counts[:, codes]
        units = None if relabel_col is None else Units(relabel_col, codes, counts)
        values[part] = stat.batch(df, [x], [weights], units)
    return values


def _bootstrap_loop(df, stat, metric_col, draws, codes, resample, relabel) -> np.ndarray:
    """One call of ``stat`` per resample, on the resampled (and relabelled) table."""
    values = np.empty(len(draws), dtype=np.float64)
    if codes is None:
        for b, rows in enumerate(draws):
            values[b] = stat(df.iloc[rows], metric_col)
        return values
    sampler = _GroupSampler(codes, draws.shape[1])
    orig_col = f"{resample}_orig"
    keep_orig = relabel and orig_col not in df.columns
    for b, drawn in enumerate(draws):
        rows, draw_id = sampler.rows(drawn)
        sample = df.iloc[rows]
        if relabel:
            sample = sample.copy()
            if keep_orig:
                sample[orig_col] = sample[resample].to_numpy()
            sample[resample] = draw_id
        values[b] = stat(sample, metric_col)
    return values


# --------------------------------------------------------------------------------------
# paired permutation test (PERM-BOTH)
# --------------------------------------------------------------------------------------

def _zscore(x: np.ndarray) -> np.ndarray:
    """scipy.stats.zscore (ddof=0) over the finite entries; NaN stays NaN; constant -> 0."""
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x)
    out = np.full_like(x, np.nan)
    if ok.any():
        v = x[ok]
        sd = v.std()
        out[ok] = (v - v.mean()) / sd if sd > 0 else 0.0
    return out


def permutation_test(df: pd.DataFrame, stat: Stat, metric_a: str, metric_b: str, *, n: int = 1000,
                     seed: int | Sequence[int] = 0, resample: str | None = None, standardize: bool = True,
                     alternative: str = "greater", plus_one: bool = False) -> dict:
    """Paired permutation test that metric A beats metric B under ``stat`` (PERM-BOTH).

    As mt-metrics-eval's ``PermutationSigDiff(corr1=B, corr2=A)``:

    1. ``standardize=True``: both metrics' columns are z-scored globally (mean and population
       std over all rows where the metric is finite; not per item). To match mt-metrics-eval
       exactly, drop the rows without a human score from ``df`` first (it z-scores after
       removing them).
    2. observed ``delta = stat(A) - stat(B)`` on the (standardised) table;
    3. each of ``n`` permutations flips a fair coin per cell (``resample=None``, as
       mt-metrics-eval) or per unit of the column ``resample`` (all rows of an item swap
       together, a block permutation; not in mt-metrics-eval) and swaps A's and B's scores
       where it came up, then recomputes ``delta_perm``;
    4. ``alternative="greater"`` (mt-metrics-eval): p = #{delta_perm >= delta} / n_valid;
       ``"two-sided"``: p = #{|delta_perm| >= |delta|} / n_valid. ``plus_one=True`` gives
       (count + 1) / (n_valid + 1) instead (mt-metrics-eval does not smooth). ``>=`` allows a
       relative slack of 1e-12 for floating-point noise. Permutations whose delta is not
       finite are counted in ``n_nan`` and left out (n_valid = n - n_nan).

    Returns dict(delta, p_value, value_a, value_b, n, n_nan, alternative): ``value_a`` /
    ``value_b`` are the statistics on the raw (unstandardised) table; ``delta`` is the
    observed test statistic (on the standardised table when ``standardize``; identical to
    ``value_a - value_b`` for scale-invariant statistics such as correlations).
    """
    if alternative not in ("greater", "two-sided"):
        raise ValueError("alternative must be 'greater' or 'two-sided'")
    if metric_a == metric_b:
        raise ValueError("metric_a and metric_b must be different columns")
    value_a, value_b = float(stat(df, metric_a)), float(stat(df, metric_b))
    a = df[metric_a].to_numpy(dtype=np.float64)
    b = df[metric_b].to_numpy(dtype=np.float64)
    if standardize:
        a, b = _zscore(a), _zscore(b)
    work = df.copy()
    work[metric_a] = a
    work[metric_b] = b

    def delta_of(frame: pd.DataFrame) -> float:
        return float(stat(frame, metric_a)) - float(stat(frame, metric_b))

    delta = delta_of(work)
    result = dict(delta=delta, p_value=math.nan, value_a=value_a, value_b=value_b, n=n, n_nan=0,
                  alternative=alternative)
    if not math.isfinite(delta):
        result["n_nan"] = n
        return result

    rng = np.random.default_rng(seed)
    codes, n_units = _unit_codes(df, resample)
    coins = _coins(rng, n, n_units)  # permutation k swaps the units where coins[k] is True
    if batchable(stat):
        deltas = _permutation_batch(work, stat, a, b, coins, codes)
    else:
        deltas = _permutation_loop(work, delta_of, metric_a, metric_b, a, b, coins, codes)
    result["p_value"], result["n_nan"] = _p_value(deltas, delta, n, alternative, plus_one)
    return result


def _p_value(deltas: np.ndarray, delta: float, n: int, alternative: str, plus_one: bool) -> tuple[float, int]:
    """(p, n_nan) of the observed ``delta`` among the permutations' ``deltas`` (NaN p if none is finite)."""
    finite = np.isfinite(deltas)
    n_nan = int((~finite).sum())
    obs = abs(delta) if alternative == "two-sided" else delta
    d = np.abs(deltas[finite]) if alternative == "two-sided" else deltas[finite]
    hits = int((d >= obs - _TIE_EPS * max(1.0, abs(obs))).sum())
    valid = n - n_nan
    p_value = math.nan
    if valid:
        p_value = (hits + 1) / (valid + 1) if plus_one else hits / valid
    return p_value, n_nan


def _coins(rng: np.random.Generator, n: int, n_units: int) -> np.ndarray:
    """(n x n_units) fair coins, drawn in blocks: the same stream as one draw per permutation."""
    blocks = [rng.random((part.stop - part.start, n_units)) < 0.5 for part in _chunks(n, n_units)]
    return np.concatenate(blocks) if blocks else np.zeros((0, n_units), dtype=bool)


def _permutation_batch(work, stat, a, b, coins, codes) -> np.ndarray:
    """delta of every permutation through ``stat.batch``: in permutation k a row holds the
    other metric's score where the coin came up."""
    deltas = np.empty(len(coins))
    for part in _chunks(len(coins), len(work)):
        swap = coins[part] if codes is None else coins[part][:, codes]
        stay, moved = (~swap).astype(np.float64), swap.astype(np.float64)
        deltas[part] = stat.batch(work, [a, b], [stay, moved]) - stat.batch(work, [b, a], [stay, moved])
    return deltas


def _permutation_loop(work, delta_of, metric_a, metric_b, a, b, coins, codes) -> np.ndarray:
    """delta of every permutation, one swapped table at a time."""
    deltas = np.empty(len(coins))
    for k, coin in enumerate(coins):
        swap = coin if codes is None else coin[codes]
        work[metric_a] = np.where(swap, b, a)
        work[metric_b] = np.where(swap, a, b)
        deltas[k] = delta_of(work)
    return deltas


# --------------------------------------------------------------------------------------
# significance clusters
# --------------------------------------------------------------------------------------

def significance_clusters(df: pd.DataFrame, stat: Stat, metrics: list[str], *, n: int = 1000, seed: int = 0,
                          alpha: float = 0.05, **perm_kwargs) -> list[dict]:
    """Rank metrics into significance clusters as mt-metrics-eval does (``AssignRanks``).

    1. value_m = stat(df, m); metrics sorted by decreasing value, ties by name. A metric whose
       value is not finite (NaN: e.g. a constant score) is not ranked: it comes last with
       ``rank=None``, is never tested and leaves the ranks (and seeds) of the others as they are.
    2. p(k, i) = ``permutation_test(df, stat, metrics[k], metrics[i])["p_value"]`` for k
       ranked above i: one-sided PERM-BOTH p-value that k beats i.
    3. The first metric gets rank 1. Walking down the sorted list, metric i starts a new
       cluster (rank + 1) iff ``p(k, i) <= alpha`` for ANY metric k of the current cluster
       (its first member up to i - 1); otherwise it joins the current cluster. It is not
       compared with metrics of earlier clusters: rank r holds the metrics not
       significantly outperformed by any other metric of rank r.

    Only the p-values the rule needs are computed (those against members of the current
    cluster, stopping at the first significant one); each pair uses its own generator
    seeded with ``(seed, position_k, position_i)``, so results do not depend on which
    pairs were evaluated. ``perm_kwargs`` go to ``permutation_test`` (e.g. ``resample``).

    Returns, best first, dicts ``metric, value, rank, pvalues`` where ``pvalues`` maps each
    metric it was compared with to p(k, i).
    """
    if len(set(metrics)) != len(metrics):
        raise ValueError("metrics must be distinct")
    values = {m: float(stat(df, m)) for m in metrics}
    order = sorted((m for m in metrics if math.isfinite(values[m])), key=lambda m: (-values[m], m))
    undefined = sorted(m for m in metrics if not math.isfinite(values[m]))
    pvalues: dict[int, dict[str, float]] = {i: {} for i in range(len(order))}

    def pvalue(k: int, i: int) -> float:
        p = permutation_test(df, stat, order[k], order[i], n=n, seed=[seed, k, i], **perm_kwargs)["p_value"]
        pvalues[i][order[k]] = p
        return p

    ranks = _assign_ranks(pvalue, len(order), alpha)
    return ([dict(metric=m, value=values[m], rank=r, pvalues=pvalues[i]) for i, (m, r) in enumerate(zip(order, ranks))]
            + [dict(metric=m, value=values[m], rank=None, pvalues={}) for m in undefined])


def _assign_ranks(pvalue: Callable[[int, int], float], n_metrics: int, alpha: float) -> list[int]:
    ranks, rank, start = [], 1, 0
    for i in range(n_metrics):
        # any(): stops at the first member of the current cluster that beats metric i
        if any(pvalue(k, i) <= alpha for k in range(start, i)):
            rank += 1
            start = i
        ranks.append(rank)
    return ranks


def assign_ranks(sig_matrix, alpha: float = 0.05) -> list[int]:
    """mt-metrics-eval ``AssignRanks`` on a precomputed matrix (rows/columns sorted best
    first; ``sig_matrix[k, i]``, k < i, = p-value that metric k beats metric i)."""
    sig = np.asarray(sig_matrix, dtype=np.float64)
    if sig.ndim != 2 or sig.shape[0] != sig.shape[1]:
        raise ValueError("sig_matrix must be square")
    return _assign_ranks(lambda k, i: sig[k, i], sig.shape[0], alpha)
