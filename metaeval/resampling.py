"""Percentile bootstrap intervals (``bootstrap_ci``) and mt-metrics-eval's PERM-BOTH test
(``permutation_test``), every resample drawn at once and handed to the statistic's ``batch`` as row weights."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from cscore.metaeval.kernels import chunks
from cscore.metaeval.statistic import Stat, Units, batchable

TIE_EPS = 1e-12  # relative slack of ">=" against a permuted delta (floating-point summation order)


class PerVersion:
    """A plain statistic ``fn(df, col)`` in batch form: ``fn`` on each version as its own table, every row
    repeated by its weight; with ``units`` each draw of a unit is relabelled a unit of its own."""

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
        else:  # unit u drawn k times: k copies of its rows, each copy labelled as one draw
            drawn = np.repeat(np.arange(units.counts.shape[1]), units.counts[b].astype(np.int64))
            by_unit = [np.flatnonzero(units.codes == u) for u in range(units.counts.shape[1])]
            rows = np.concatenate([by_unit[u] for u in drawn]) if len(drawn) else np.zeros(0, dtype=np.int64)
        frame = df.iloc[rows].copy()
        frame[self.col] = x[rows]
        if units is not None:
            if f"{units.col}_orig" not in df.columns:
                frame[f"{units.col}_orig"] = frame[units.col].to_numpy()
            frame[units.col] = np.repeat(np.arange(len(drawn)), [len(by_unit[u]) for u in drawn])
        return frame


def batch_form(stat: Stat, col: str):
    """``stat`` itself when it has a ``batch``, else ``PerVersion(stat, col)``."""
    return stat if batchable(stat) else PerVersion(stat, col)


class BootstrapCI(tuple):
    """``(point, low, high)`` with ``.n``, ``.n_nan`` (non-finite resamples, left out), ``.n_units``,
    ``.alpha``, ``.resample`` and ``.samples`` (the finite resampled values)."""

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
    """Percentile bootstrap interval of ``stat(df, metric_col)`` over the units of column ``resample``
    (rows when None): the alpha/2, 1 - alpha/2 quantiles (numpy linear) of the finite resampled values;
    NaN bounds with fewer than two units. ``relabel``: a unit drawn twice is two items."""
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
    low, high = [float(v) for v in np.quantile(ok, [alpha / 2, 1 - alpha / 2])] if ok.size else [math.nan, math.nan]
    return BootstrapCI(point, low, high, n=n, n_nan=int((~finite).sum()), n_units=n_units,
                       alpha=alpha, resample=resample, samples=ok)


def _bootstrap_batch(df, stat, metric_col, draws, codes, relabel_col) -> np.ndarray:
    """All resamples through ``stat.batch``: a row's weight is the draw count of its unit."""
    x = df[metric_col].to_numpy(dtype=np.float64)
    values = np.empty(len(draws))
    for part in chunks(len(draws), len(df)):
        offsets = draws[part] + draws.shape[1] * np.arange(part.stop - part.start)[:, None]  # resample x unit
        counts = np.bincount(offsets.ravel(), minlength=offsets.size).reshape(offsets.shape).astype(np.float64)
        weights = counts if codes is None else counts[:, codes]
        units = None if relabel_col is None else Units(relabel_col, codes, counts)
        values[part] = stat.batch(df, [x], [weights], units)
    return values


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
                     seed: int | Sequence[int] = 0, resample: str | None = None) -> dict:
    """One-sided PERM-BOTH test that metric A beats B under ``stat`` (mt-metrics-eval's
    ``PermutationSigDiff(corr1=B, corr2=A)``) on columns z-scored globally (population std), swapping per
    cell or per unit of ``resample`` (a block permutation, not in mt-metrics-eval); p = #{delta_perm >=
    delta} / n_valid, unsmoothed, ``>=`` with ``TIE_EPS`` slack. Returns dict(delta, p_value, value_a,
    value_b, n, n_nan), ``value_a`` / ``value_b`` on the raw table, ``delta`` on the z-scored one."""
    if metric_a == metric_b:
        raise ValueError("metric_a and metric_b must be different columns")
    value_a, value_b = float(stat(df, metric_a)), float(stat(df, metric_b))
    a, b = _zscore(df[metric_a].to_numpy(dtype=np.float64)), _zscore(df[metric_b].to_numpy(dtype=np.float64))
    work = df.assign(**{metric_a: a, metric_b: b})
    delta = float(stat(work, metric_a)) - float(stat(work, metric_b))
    result = dict(delta=delta, p_value=math.nan, value_a=value_a, value_b=value_b, n=n, n_nan=0)
    if not math.isfinite(delta):
        result["n_nan"] = n
        return result
    rng = np.random.default_rng(seed)
    codes, n_units = _unit_codes(df, resample)
    coins = _coins(rng, n, n_units)  # permutation k swaps the units where coins[k] is True
    deltas = _permutation_batch(work, batch_form(stat, metric_a), batch_form(stat, metric_b), a, b, coins, codes)
    finite = np.isfinite(deltas)
    result["n_nan"] = int((~finite).sum())
    hits = int((deltas[finite] >= delta - TIE_EPS * max(1.0, abs(delta))).sum())
    if finite.any():
        result["p_value"] = hits / int(finite.sum())
    return result


def _coins(rng: np.random.Generator, n: int, n_units: int) -> np.ndarray:
    """(n x n_units) fair coins, drawn in blocks: the same stream as one draw per permutation."""
    blocks = [rng.random((part.stop - part.start, n_units)) < 0.5 for part in chunks(n, n_units)]
    return np.concatenate(blocks) if blocks else np.zeros((0, n_units), dtype=bool)


def _permutation_batch(work, stat_a, stat_b, a, b, coins, codes) -> np.ndarray:
    """delta of every permutation through ``stat.batch``; a row swaps scores where its coin came up."""
    deltas = np.empty(len(coins))
    for part in chunks(len(coins), len(work)):
        swap = coins[part] if codes is None else coins[part][:, codes]
        stay, moved = (~swap).astype(np.float64), swap.astype(np.float64)
        deltas[part] = stat_a.batch(work, [a, b], [stay, moved]) - stat_b.batch(work, [b, a], [stay, moved])
    return deltas
