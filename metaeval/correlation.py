"""Correlations between metric and human scores (Pearson, Spearman, Kendall tau-b); non-finite rows are
left out, a constant vector gives NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

CORRELATIONS = ("pearson", "spearman", "kendall")
_SCIPY = {"pearson": stats.pearsonr, "spearman": stats.spearmanr,
          "kendall": lambda x, y: stats.kendalltau(x, y, variant="b")}


def correlate(x, y, kind: str) -> float:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    if kind not in _SCIPY:
        raise ValueError(f"unknown correlation {kind!r}; use one of {CORRELATIONS}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(_SCIPY[kind](x, y)[0])


def correlation_table(df: pd.DataFrame, metrics: list[str], humans: list[str],
                      split_by: str | None = None) -> pd.DataFrame:
    """Long table: metric, target (aspect or aspect@split), correlation, value, n, n_nonfinite."""
    rows = []
    parts = [(None, df)] if split_by is None else list(df.groupby(split_by, sort=True))
    for metric in metrics:
        for human in humans:
            for key, part in parts:
                target = human if key is None else f"{human}@{key}"
                x = part[metric].to_numpy(dtype=np.float64)
                y = part[human].to_numpy(dtype=np.float64)
                finite = np.isfinite(x) & np.isfinite(y)
                for kind in CORRELATIONS:
                    rows.append({"metric": metric, "target": target, "correlation": kind,
                                 "value": correlate(x, y, kind), "n": int(finite.sum()),
                                 "n_nonfinite": int((~finite).sum())})
    return pd.DataFrame(rows)


def per_metric(table: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Rows = metrics, columns = targets + AVG (mean over targets), for one correlation."""
    out = grid(table[table["correlation"] == kind], "value", "metric")
    out["AVG"] = out.mean(axis=1, skipna=False)
    return out


def grid(long: pd.DataFrame, values: str, index: str = "label") -> pd.DataFrame:
    """``index`` x target of a long table, both in the order first found."""
    wide = long.pivot(index=index, columns="target", values=values)
    return wide.reindex(index=list(dict.fromkeys(long[index])), columns=list(dict.fromkeys(long["target"])))
