"""The statistics the report resamples, ``stat(df, metric_col) -> float``; one with ``batchable = True``
has a ``batch`` method that evaluates many resampled versions of the table at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from cscore.metaeval.kernels import Correlation, clean, materialise
from cscore.metaeval.levels import Grouping, KendallOptions, check_options

Stat = Callable[[pd.DataFrame, str], float]


def subset_rows(df: pd.DataFrame, subset: tuple | None) -> np.ndarray:
    """The rows of ``subset`` (column, value); all rows when None."""
    return np.ones(len(df), dtype=bool) if subset is None else (df[subset[0]] == subset[1]).to_numpy()


def batchable(stat) -> bool:
    """Whether ``stat`` can evaluate all resamples at once (``stat.batch``)."""
    return bool(getattr(stat, "batchable", False))


@dataclass
class Units:
    """A bootstrap over the units of column ``col``: ``codes`` (each row's unit), ``counts`` (resamples x units)."""

    col: str
    codes: np.ndarray
    counts: np.ndarray


class LevelStat:
    """``correlate_at(...)["value"]`` as a statistic, on the rows of ``subset`` (column, value). ``batch``: row i
    enters version b ``ws[p][b, i]`` times with metric value ``xs[p][i]``."""

    batchable = True

    def __init__(self, human_col: str, level: str = "segment", kind: str = "pearson", variant: str | None = None,
                 *, subset: tuple | None = None, grouping: Grouping = Grouping(),
                 options: KendallOptions = KendallOptions()):
        check_options(level, grouping.average)
        self.corr = Correlation(kind, variant, options.kw())
        self.human_col, self.level, self.subset, self.average = human_col, level, subset, grouping.average
        self.pairless_zero = self.corr.variant == "like" and self.average == "macro"  # levels.py: as mt-metrics-eval
        self.group_col, self.system_col = grouping.group_col, grouping.system_col
        where = "" if subset is None else f"[{subset[0]}={subset[1]}]"
        self.__name__ = f"{kind}@{level}({human_col}){where}"

    def __call__(self, df: pd.DataFrame, metric_col: str) -> float:
        x = df[metric_col].to_numpy(dtype=np.float64)
        return float(self.batch(df, [x], [np.ones((1, len(df)))])[0])

    def batch(self, df: pd.DataFrame, xs: list, ws: list, units: Units | None = None) -> np.ndarray:
        h = df[self.human_col].to_numpy(dtype=np.float64)
        keep = subset_rows(df, self.subset)
        if self.subset is not None:
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

    def _group(self, xs, ws, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One group's (correlation, weight in the average, whether defined) in each version; a pairless
        Kendall-like group of 2+ cells counts 0 (``pairless_zero``)."""
        v, wt = self.corr.candidates(xs, ws, y)
        counted = np.isfinite(v)
        if self.pairless_zero:  # cells: per version, the weight of those with a finite metric and human value
            v = np.where(~counted & (sum(clean(xs, ws, y)[1]).sum(1) >= 2), 0.0, v)
        return v, wt if self.average == "micro" else np.ones_like(wt), counted

    def _grouped(self, key: pd.Series, xs, ws, h) -> np.ndarray:
        """One correlation per group (item or system) of each version, averaged over groups."""
        groups = [self._group([x[rows] for x in xs], [w[:, rows] for w in ws], h[rows])
                  for rows in _rows_by_code(*_factorize(key))]
        values, weights, counted = (np.array([g[k] for g in groups]) for k in range(3))
        mean = _weighted_mean(values, weights)
        return np.where(counted.any(0), mean, np.nan) if self.pairless_zero else mean

    def _grouped_drawn(self, x, h, keep, units: Units) -> np.ndarray:
        """Every draw is a group: per-unit values are fixed, the draws only weight them."""
        per_unit = [self._group([x[rows]], [keep[rows][None, :].astype(np.float64)], h[rows])
                    for rows in _rows_by_code(units.codes, units.counts.shape[1])]
        values, weights = (np.array([g[k][0] for g in per_unit], dtype=np.float64) for k in range(2))
        counted = np.array([g[2][0] for g in per_unit], dtype=bool)
        draws = units.counts.T * weights[:, None]
        mean = _weighted_mean(values[:, None], draws)
        return np.where(((draws > 0) & counted[:, None]).any(0), mean, np.nan) if self.pairless_zero else mean

    def _system(self, df: pd.DataFrame, xs, ws, h) -> np.ndarray:
        """Per-system mean metric and human score of each version, correlated over systems."""
        xs, ws, h = clean(xs, ws, h)
        X, W = materialise(xs, ws)
        codes, n_systems = _factorize(df[self.system_col])
        count = _sum_by_code(W, codes, n_systems)
        with np.errstate(divide="ignore", invalid="ignore"):
            mx = _sum_by_code(W * X, codes, n_systems) / count
            my = _sum_by_code(W * h, codes, n_systems) / count
        return self.corr.rows(mx, my, (count > 0).astype(np.float64))[0]

    def _system_drawn(self, x, h, keep, units: Units) -> np.ndarray:
        """Every draw is a system: per-system means are fixed, the draws only weight them."""
        on = keep & np.isfinite(x) & np.isfinite(h)
        onehot = ((units.codes[:, None] == np.arange(units.counts.shape[1])[None, :]) & on[:, None]).astype(np.float64)
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


def _factorize(key) -> tuple[np.ndarray, int]:
    """Integer codes of ``key``; missing values form a group of their own, as in levels.py."""
    codes, uniques = pd.factorize(np.asarray(key), use_na_sentinel=False)
    return codes, len(uniques)


def _rows_by_code(codes: np.ndarray, n_codes: int) -> list[np.ndarray]:
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.cumsum(np.bincount(codes, minlength=n_codes))[:-1])


def _sum_by_code(A: np.ndarray, codes: np.ndarray, n_codes: int) -> np.ndarray:
    """(B, n_codes): the sum of A's columns of each code."""
    order = np.argsort(codes, kind="stable")
    starts = np.cumsum(np.bincount(codes, minlength=n_codes))[:-1]
    return np.add.reduceat(A[:, order], np.r_[0, starts], axis=1)


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per version (column), the weighted mean of the finite values (rows); NaN if none."""
    ok = np.isfinite(values) & (weights > 0)
    w = np.where(ok, weights, 0.0)
    total = w.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, (np.where(ok, values, 0.0) * w).sum(0) / total, np.nan)

