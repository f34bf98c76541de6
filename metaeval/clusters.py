"""Significance clusters: mt-metrics-eval's rank assignment (``mt_metrics_eval/data.py::
CompareMetrics`` + ``AssignRanks``) over ``resampling.permutation_test`` p-values.

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

from cscore.metaeval.resampling import Permutations, permutation_test
from cscore.metaeval.statistic import Stat


def significance_clusters(df: pd.DataFrame, stat: Stat, metrics: list[str], *, n: int = 1000, seed: int = 0,
                          alpha: float = 0.05, how: Permutations = Permutations()) -> list[dict]:
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
    pairs were evaluated. ``how`` goes to ``permutation_test`` (e.g. its ``resample``).

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
        p = permutation_test(df, stat, order[k], order[i], n=n, seed=[seed, k, i], how=how)["p_value"]
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
