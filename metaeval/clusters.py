"""Significance clusters: mt-metrics-eval's ``AssignRanks`` over ``resampling.permutation_test`` p-values."""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd

from cscore.metaeval.resampling import permutation_test
from cscore.metaeval.statistic import Stat


def significance_clusters(df: pd.DataFrame, stat: Stat, metrics: list[str], *, n: int = 1000, seed: int = 0,
                          alpha: float = 0.05) -> list[dict]:
    """Metrics by decreasing ``stat`` (ties by name); metric i opens a new cluster when some member k of the
    current one beats it (p(k, i) <= alpha; earlier clusters never compared), each pair's test seeded
    ``(seed, position_k, position_i)``. Returns, best first, dicts ``metric, value, rank, pvalues``; a
    non-finite value comes last with ``rank=None``."""
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
