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
from typing import Callable

import numpy as np
import pandas as pd

Stat = Callable[[pd.DataFrame, str], float]

# relative tolerance when comparing a permuted delta with the observed one, so that deltas
# that are equal up to floating-point summation order count as ">=" (mt-metrics-eval uses
# an exact ">=")
_TIE_EPS = 1e-12


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


def correlation_stat(human_col: str, kind: str = "pearson") -> Stat:
    """Plain correlation over all rows (``correlation.correlate``) as a statistic."""
    from cscore.metaeval.correlation import correlate

    def stat(df: pd.DataFrame, metric_col: str) -> float:
        return correlate(df[metric_col].to_numpy(), df[human_col].to_numpy(), kind)

    stat.__name__ = f"{kind}({human_col})"
    return stat


# --------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------

class BootstrapCI(tuple):
    """``(point, low, high)``; also ``.n`` (resamples drawn), ``.n_nan`` (resamples whose
    statistic was not finite, left out of the interval), ``.n_units`` (items or rows
    resampled), ``.alpha``, ``.resample`` and ``.samples`` (the finite resampled values)."""

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


def _unit_codes(df: pd.DataFrame, col: str) -> tuple[np.ndarray, int]:
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
    values = np.empty(n, dtype=np.float64)

    if resample is None:
        n_units = len(df)
        draws = rng.integers(0, n_units, size=(n, n_units))
        for b in range(n):
            values[b] = stat(df.iloc[draws[b]], metric_col)
    else:
        codes, n_units = _unit_codes(df, resample)
        sampler = _GroupSampler(codes, n_units)
        draws = rng.integers(0, n_units, size=(n, n_units))
        orig_col = f"{resample}_orig"
        keep_orig = relabel and orig_col not in df.columns
        for b in range(n):
            rows, draw_id = sampler.rows(draws[b])
            sample = df.iloc[rows]
            if relabel:
                sample = sample.copy()
                if keep_orig:
                    sample[orig_col] = sample[resample].to_numpy()
                sample[resample] = draw_id
            values[b] = stat(sample, metric_col)

    finite = np.isfinite(values)
    ok = values[finite]
    if ok.size:
        low, high = (float(v) for v in np.quantile(ok, [alpha / 2, 1 - alpha / 2]))
    else:
        low = high = math.nan
    return BootstrapCI(point, low, high, n=n, n_nan=int((~finite).sum()), n_units=n_units,
                       alpha=alpha, resample=resample, samples=ok)


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
                     seed: int = 0, resample: str | None = None, standardize: bool = True,
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
    if resample is None:
        codes, n_units = None, len(df)
    else:
        codes, n_units = _unit_codes(df, resample)
    obs = abs(delta) if alternative == "two-sided" else delta
    tol = _TIE_EPS * max(1.0, abs(obs))
    hits = n_nan = 0
    for _ in range(n):
        coin = rng.random(n_units) < 0.5
        swap = coin if codes is None else coin[codes]
        work[metric_a] = np.where(swap, b, a)
        work[metric_b] = np.where(swap, a, b)
        d = delta_of(work)
        if not math.isfinite(d):
            n_nan += 1
            continue
        if alternative == "two-sided":
            d = abs(d)
        hits += d >= obs - tol
    valid = n - n_nan
    if valid:
        result["p_value"] = (hits + 1) / (valid + 1) if plus_one else hits / valid
    result["n_nan"] = n_nan
    return result


# --------------------------------------------------------------------------------------
# significance clusters
# --------------------------------------------------------------------------------------

def significance_clusters(df: pd.DataFrame, stat: Stat, metrics: list[str], *, n: int = 1000, seed: int = 0,
                          alpha: float = 0.05, **perm_kwargs) -> list[dict]:
    """Rank metrics into significance clusters as mt-metrics-eval does (``AssignRanks``).

    1. value_m = stat(df, m); metrics sorted by decreasing value, ties by name (NaN last).
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

    def sort_key(m: str):
        v = values[m]
        return (1, 0.0, m) if math.isnan(v) else (0, -v, m)

    order = sorted(metrics, key=sort_key)
    pvalues: dict[int, dict[str, float]] = {i: {} for i in range(len(order))}

    def pvalue(k: int, i: int) -> float:
        p = permutation_test(df, stat, order[k], order[i], n=n, seed=[seed, k, i], **perm_kwargs)["p_value"]
        pvalues[i][order[k]] = p
        return p

    ranks = _assign_ranks(pvalue, len(order), alpha)
    return [dict(metric=m, value=values[m], rank=r, pvalues=pvalues[i])
            for i, (m, r) in enumerate(zip(order, ranks))]


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
