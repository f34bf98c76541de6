"""Kendall-tau variants (b, c, 23, acc23, like) from the pair counts C, D, Tx, Ty, Txy, as mt-metrics-eval's
``KendallVariants`` / ``KendallLike`` (docs/reports.md "Definitions"). ``x`` is the metric, ``y`` the human
vector; ``epsilon`` ties the metric (|x_i - x_j| <= epsilon), ``thresh`` counts only pairs with |y_i - y_j| >=
thresh (Kendall-like, default 25: DA points on 0-100). Non-finite cells are dropped in tandem; undefined
values are NaN."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cscore.metaeval.bias import finite_pairs

VARIANTS = ("b", "c", "23", "acc23", "like")
_ALIASES = {"tau_b": "b", "tau_c": "c", "tau_23": "23", "acc_23": "acc23", "acc": "acc23",
            "kendall_like": "like", "darr": "like"}

_CHUNK_ELEMS = 1 << 21  # pair-matrix elements handled per chunk (bounded memory)


class PairCounts(NamedTuple):
    concordant: int
    discordant: int
    ties_x: int  # tied only in x (metric)
    ties_y: int  # tied only in y (human)
    ties_both: int

    @property
    def total(self) -> int:
        return sum(self)

    @property
    def untied(self) -> tuple[int, int]:
        """(pairs untied in x, pairs untied in y); both 0 without pairs."""
        return self.total - self.ties_x - self.ties_both, self.total - self.ties_y - self.ties_both


def _pair_diffs(x: np.ndarray, y: np.ndarray):
    """Yield (dx, dy) = (x_j - x_i, y_j - y_i) for all pairs i < j, in row chunks."""
    n = x.size
    rows = max(1, _CHUNK_ELEMS // max(n, 1))
    cols = np.arange(n)
    for start in range(0, n - 1, rows):
        i = np.arange(start, min(start + rows, n - 1))
        upper = cols[None, :] > i[:, None]
        yield (x[None, :] - x[i, None])[upper], (y[None, :] - y[i, None])[upper]


def pair_counts(x, y, epsilon: float = 0.0) -> PairCounts:
    """Counts (C, D, Tx, Ty, Txy) over all pairs of finite cells; metric tie = |dx| <= epsilon."""
    if epsilon < 0:
        raise ValueError("epsilon must be >= 0")
    x, y = finite_pairs(x, y)
    counts = [0] * 5
    for dx, dy in _pair_diffs(x, y):
        tie_x, tie_y = np.abs(dx) <= epsilon, dy == 0
        untied, same = ~tie_x & ~tie_y, (dx > 0) == (dy > 0)
        kinds = (untied & same, untied & ~same, tie_x & ~tie_y, ~tie_x & tie_y, tie_x & tie_y)  # C, D, Tx, Ty, Txy
        counts = [c + int(np.count_nonzero(k)) for c, k in zip(counts, kinds)]
    return PairCounts(*counts)


def tau_b(x, y, epsilon: float = 0.0) -> float:
    """Kendall tau-b (scipy ``kendalltau(variant="b")``); optional metric-tie epsilon."""
    c = pair_counts(x, y, epsilon)
    tot_x, tot_y = c.untied
    if 0 in (tot_x, tot_y):
        return float("nan")
    return float((c.concordant - c.discordant) / np.sqrt(tot_x) / np.sqrt(tot_y))


def tau_c(x, y) -> float:
    """Kendall tau-c / Stuart's tau-c (scipy ``kendalltau(variant="c")``)."""
    xf, yf = finite_pairs(x, y)
    c = pair_counts(xf, yf)
    if 0 in c.untied:
        return float("nan")
    m = min(np.unique(xf).size, np.unique(yf).size)
    return float(2 * (c.concordant - c.discordant) / (xf.size ** 2 * (m - 1) / m))


def tau_23(x, y, epsilon: float = 0.0) -> float:
    """WMT23 tau ('23'): (C + Txy - D - Tx - Ty) / N, ties in both count as agreement."""
    c = pair_counts(x, y, epsilon)
    return (c.concordant + c.ties_both - c.discordant - c.ties_x - c.ties_y) / c.total if c.total else float("nan")


def acc_23(x, y, epsilon: float = 0.0) -> float:
    """WMT23 pairwise accuracy ('acc23'): (C + Txy) / N."""
    c = pair_counts(x, y, epsilon)
    return (c.concordant + c.ties_both) / c.total if c.total else float("nan")


def kendall_like_counts(x, y, thresh: float = 25.0) -> tuple[int, int]:
    """(concordant, discordant) over the pairs whose human scores differ by >= ``thresh``."""
    x, y = finite_pairs(x, y)
    con = dis = 0
    for dx, dy in _pair_diffs(x, y):
        counted = np.abs(dy) >= thresh
        agree = ((dy > 0) & (dx > 0)) | ((dy < 0) & (dx < 0))
        k = int(np.count_nonzero(counted & agree))
        con += k
        dis += int(np.count_nonzero(counted)) - k
    return con, dis


def kendall_like(x, y, thresh: float = 25.0) -> float:
    """WMT20 DARR Kendall-like: (C - D) / (C + D) over pairs with |gold diff| >= thresh."""
    con, dis = kendall_like_counts(x, y, thresh)
    return (con - dis) / (con + dis) if con + dis else float("nan")


def normalize_variant(variant: str) -> str:
    v = str(variant).strip().lower()
    v = _ALIASES.get(v, v)
    if v not in VARIANTS:
        raise ValueError(f"unknown Kendall variant {variant!r}; use one of {VARIANTS}")
    return v


def kendall(x, y, variant: str = "b", **kw) -> float:
    """Kendall ``variant`` of x (metric) and y (human); ``epsilon`` for b / 23 / acc23, ``thresh`` for like."""
    v = normalize_variant(variant)
    if v == "c":
        if kw.get("epsilon", 0.0):
            raise ValueError("tau-c is not defined with a non-zero epsilon")
        return tau_c(x, y)
    return {"b": tau_b, "23": tau_23, "acc23": acc_23, "like": kendall_like}[v](x, y, **kw)
