"""Significance clusters: mt-metrics-eval's rank assignment (``mt_metrics_eval/data.py::
CompareMetrics`` + ``AssignRanks``) over ``resampling.permutation_test`` p-values."""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd

from cscore.metaeval.resampling import permutation_test
from cscore.metaeval.statistic import Stat


def significance_clusters(df: pd.DataFrame, stat: Stat, metrics: list[str], *, n: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> list[dict]:
    """Rank metrics into significance clusters as mt-metrics-eval's ``AssignRanks``: metrics sorted
    by decreasing ``stat`` (ties by name); walking down, metric i opens a new cluster iff
    p(k, i) <= alpha (one-sided PERM-BOTH p-value that k beats i) for ANY member k of the current
    cluster; earlier clusters are never compared. A metric whose value is not finite comes last
    with ``rank=None``, untested. Only the p-values the rule needs are computed, each pair with its
    own generator seeded ``(seed, position_k, position_i)``. Returns, best first, dicts ``metric,
    value, rank, pvalues`` (``pvalues``: each metric it was compared with -> p(k, i))."""
    if len(set(metrics)) != len(metrics):
        raise ValueError("metrics must be distinct")
    values = {m: float(stat(df, m)) for m in metrics}
    order = sorted((m for m in metrics if math.isfinite(values[m])), key=lambda m: (-values[m], m))
    undefined = sorted(m for m in metrics if not math.isfinite(values[m]))
    pvalues: dict[int, dict[str, float]] = {i: {} for i in range(len(order))}

    def pvalue(k: int, i: int) -> float:
        p = permutation_test(df, stat, order[k], order[i], n=n, seed=[seed, k, i])["p_value"]
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
