"""Resampling: percentile bootstrap intervals and the paired permutation test, one
implementation each, in batch form.

* ``bootstrap_ci`` -- percentile bootstrap interval, resampling items (all rows of a drawn
  item come along, duplicates kept) or single rows.
* ``permutation_test`` -- the PERM-BOTH paired permutation test of mt-metrics-eval
  (``mt_metrics_eval/stats.py::PermutationSigDiff``, after Deutsch et al. 2021,
  https://arxiv.org/abs/2104.00054), used for the WMT22-24 metrics-task significance clusters.

Both draw every resample at once (an index matrix of draws, a matrix of coins), turn it into
per-row weights (how often each row enters each resample; which metric a row holds) and hand
them to the statistic's ``batch`` (``statistic``). A statistic without one is wrapped in
``PerVersion``, which builds each resampled table and calls it once per resample.

PERM-BOTH (``PermutationSigDiff(corr1, corr2, ...)``): both metrics' score vectors are
z-scored *globally* (``scipy.stats.zscore`` over the whole flattened vector of cells that have a
gold score, population std, ddof=0 -- not per item); the observed delta is
``corr(metric2) - corr(metric1)`` on the z-scored vectors; each of the ``k`` permutations
draws an independent Bernoulli(0.5) coin *per cell* and swaps the two metrics' scores in the
cells where it came up; the p-value is the *one-sided* share ``#{delta_perm >= delta} / k``
(no +1 smoothing) for the hypothesis that metric2 is better. (Early stopping every
``block_size=1000`` runs when p < 0.02 or p > 0.5 never fires for k <= 1000; not implemented.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cscore.metaeval.kernels import chunks
from cscore.metaeval.statistic import Stat, Units, batchable

# relative tolerance when comparing a permuted delta with the observed one, so that deltas
# that are equal up to floating-point summation order count as ">=" (mt-metrics-eval uses
# an exact ">=")
TIE_EPS = 1e-12


class PerVersion:
    """A plain statistic ``fn(df, col)`` in batch form: each version becomes its own table (every
    row repeated by its weight, column ``col`` holding the version's metric values) and ``fn`` is
    called on it. With ``units`` every draw of a unit is a unit of its own: its rows get the draw's
    integer label in ``units.col`` (the original value kept in ``<col>_orig``)."""

    batchable = True

    def __init__(self, fn: Stat, col: str):
        self.fn, self.col = fn, col
        self.__name__ = getattr(fn, "__name__", "stat")

    def batch(self, df: pd.DataFrame, xs: list, ws: list, units: Units | None = None) -> np.ndarray:
        W = sum(ws)
        X = np.zeros(np.shape(W))
        for x, w in zip(xs, ws):  # a row takes the candidate it has weight on (a NaN of another stays out)
            X = np.where(w > 0, np.asarray(x, dtype=np.float64), X)
        values = np.empty(len(W))
        for b in range(len(W)):
            values[b] = self.fn(self._version(df, X[b], W[b], units, b), self.col)
        return values

    def _version(self, df: pd.DataFrame, x: np.ndarray, w: np.ndarray, units: Units | None, b: int) -> pd.DataFrame:
        if units is None:
            rows = np.repeat(np.arange(len(df)), w.astype(np.int64))
            label = None
        else:  # unit u drawn k times: k copies of its rows, each copy labelled as one draw
            drawn = np.repeat(np.arange(units.counts.shape[1]), units.counts[b].astype(np.int64))
            by_unit = [np.flatnonzero(units.codes == u) for u in range(units.counts.shape[1])]
            rows = np.concatenate([by_unit[u] for u in drawn]) if len(drawn) else np.zeros(0, dtype=np.int64)
            label = np.repeat(np.arange(len(drawn)), [len(by_unit[u]) for u in drawn])
        frame = df.iloc[rows].copy()
        frame[self.col] = x[rows]
        if label is not None and units is not None:
            if f"{units.col}_orig" not in df.columns:
                frame[f"{units.col}_orig"] = frame[units.col].to_numpy()
            frame[units.col] = label
        return frame


def batch_form(stat: Stat, col: str):
    """``stat`` itself when it has a ``batch``, else ``PerVersion(stat, col)``."""
    return stat if batchable(stat) else PerVersion(stat, col)


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
    excluded; if none is finite, low and high are NaN, as they are when there are fewer than two
    units to draw (no resample is drawn: each would be the table itself).
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    point = float(stat(df, metric_col))
    rng = np.random.default_rng(seed)
    codes, n_units = _unit_codes(df, resample)
    if n_units < 2:  # one unit redrawn is the same table every time: a zero-width interval says nothing
        return BootstrapCI(point, math.nan, math.nan, n=0, n_nan=0, n_units=n_units, alpha=alpha, resample=resample,
                           samples=np.empty(0))
    draws = rng.integers(0, n_units, size=(n, n_units))  # resample b draws units draws[b]
    values = _bootstrap_batch(df, batch_form(stat, metric_col), metric_col, draws, codes,
                              resample if relabel else None)
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
    for part in chunks(len(draws), len(df)):
        counts = _draw_counts(draws[part], draws.shape[1])
        weights = counts if codes is None else counts[:, codes]
        units = None if relabel_col is None else Units(relabel_col, codes, counts)
        values[part] = stat.batch(df, [x], [weights], units)
    return values


# paired permutation test (PERM-BOTH)

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


@dataclass(frozen=True)
class Permutations:
    """How ``permutation_test`` permutes and counts (its steps 1, 3 and 4): ``resample`` (None: a
    coin per cell; a column: its units swap together), ``standardize`` (z-score both metrics
    first), ``alternative`` ("greater" or "two-sided"), ``plus_one`` (smoothed p)."""

    resample: str | None = None
    standardize: bool = True
    alternative: str = "greater"
    plus_one: bool = False


def permutation_test(df: pd.DataFrame, stat: Stat, metric_a: str, metric_b: str, *, n: int = 1000,
                     seed: int | Sequence[int] = 0, how: Permutations = Permutations()) -> dict:
    """Paired permutation test that metric A beats metric B under ``stat`` (PERM-BOTH). ``how``
    (a ``Permutations``: ``resample``, ``standardize``, ``alternative``, ``plus_one``) sets steps
    1, 3 and 4.

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
    resample, standardize, alternative, plus_one = how.resample, how.standardize, how.alternative, how.plus_one
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
    deltas = _permutation_batch(work, batch_form(stat, metric_a), batch_form(stat, metric_b), a, b, coins, codes)
    result["p_value"], result["n_nan"] = _p_value(deltas, delta, n, alternative, plus_one)
    return result


def _p_value(deltas: np.ndarray, delta: float, n: int, alternative: str, plus_one: bool) -> tuple[float, int]:
    """(p, n_nan) of the observed ``delta`` among the permutations' ``deltas`` (NaN p if none is finite)."""
    finite = np.isfinite(deltas)
    n_nan = int((~finite).sum())
    obs = abs(delta) if alternative == "two-sided" else delta
    d = np.abs(deltas[finite]) if alternative == "two-sided" else deltas[finite]
    hits = int((d >= obs - TIE_EPS * max(1.0, abs(obs))).sum())
    valid = n - n_nan
    p_value = math.nan
    if valid:
        p_value = (hits + 1) / (valid + 1) if plus_one else hits / valid
    return p_value, n_nan


def _coins(rng: np.random.Generator, n: int, n_units: int) -> np.ndarray:
    """(n x n_units) fair coins, drawn in blocks: the same stream as one draw per permutation."""
    blocks = [rng.random((part.stop - part.start, n_units)) < 0.5 for part in chunks(n, n_units)]
    return np.concatenate(blocks) if blocks else np.zeros((0, n_units), dtype=bool)


def _permutation_batch(work, stat_a, stat_b, a, b, coins, codes) -> np.ndarray:
    """delta of every permutation through ``stat.batch``: in permutation k a row holds the
    other metric's score where the coin came up."""
    deltas = np.empty(len(coins))
    for part in chunks(len(coins), len(work)):
        swap = coins[part] if codes is None else coins[part][:, codes]
        stay, moved = (~swap).astype(np.float64), swap.astype(np.float64)
        deltas[part] = stat_a.batch(work, [a, b], [stay, moved]) - stat_b.batch(work, [b, a], [stay, moved])
    return deltas
