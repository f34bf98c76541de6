"""Kendall-tau variants used in metric meta-evaluation, on two score vectors.

Convention: ``x`` is the METRIC vector and ``y`` the HUMAN (gold) vector, as in
``correlation.correlate(metric, human, kind)``. (mt-metrics-eval's public functions take
gold first; only the asymmetric options care: ``epsilon`` introduces ties in the metric
``x``, ``thresh`` filters pairs on the gold ``y``.) Cells where either value is not finite
are dropped (in tandem) before counting, as mt-metrics-eval drops ``None`` gold scores.

Every variant is a function of the pair counts over the n(n-1)/2 pairs (i < j):

* C  concordant: x and y both untied and ordered the same way;
* D  discordant: both untied and ordered oppositely;
* Tx ties only in x (metric tie, gold untied); a metric tie is ``|x_i - x_j| <= epsilon``
  (epsilon = 0: exact equality);
* Ty ties only in y (gold tie, metric untied);
* Txy ties in both.

Definitions (source: google-research/mt-metrics-eval, ``mt_metrics_eval/stats.py``
``KendallVariants`` / ``KendallLike`` and ``mt_metrics_eval/tau_optimization.py``
``TauSufficientStats.tau_23`` / ``acc_23``; Deutsch, Foster & Freitag 2023, "Ties Matter",
arXiv:2305.14324; WMT20 metrics task, Mathur et al. 2020):

* ``tau_b`` = (C - D) / sqrt((N - Tx - Txy) (N - Ty - Txy)), N = all pairs; NaN when x or y
  is constant (== ``scipy.stats.kendalltau(variant="b")``).
* ``tau_c`` = 2 (C - D) / (n^2 (m - 1) / m), m = min(#distinct x, #distinct y); NaN when x or
  y is constant (== ``scipy.stats.kendalltau(variant="c")``).
* ``tau_23`` = (C + Txy - D - Tx - Ty) / N  (WMT23 "23" variant).
* ``acc_23`` = (C + Txy) / N  (WMT23 pairwise accuracy "acc23": a pair is correct when both
  order it the same way or both tie it).
* ``kendall_like`` (WMT20 DARR "Kendall-like"): only pairs with |y_i - y_j| >= thresh count;
  a counted pair is concordant when the metric orders it strictly the same way as gold,
  otherwise discordant -- metric ties count as DISCORDANT (mt-metrics-eval comment:
  "deliberate inconsistency ... to emulate WMT behaviour"). Value (C - D) / (C + D).
  Note the ``>=``: with ``thresh <= 0`` gold-tied pairs are counted too, and, since they
  cannot be strictly ordered, as discordant (mt-metrics-eval does the same).
  Default ``thresh=25`` (raw DA points, 0-100 scale) as in ``stats.KendallLike``: the threshold
  is a difference of gold scores on their own scale, so on 1-5 ratings no pair reaches 25 and
  the value is NaN; ``cscore report --kendall-threshold`` sets it.

Undefined values are NaN, never 0: fewer than 2 finite cells -> NaN for every variant; no
counted pair for ``kendall_like`` -> NaN (mt-metrics-eval returns 0 there, with weight 0; the
macro item-wise average of ``levels.correlate_at`` counts such a group as 0, as mt-metrics-eval's).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

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


def _finite_pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} != {y.size}")
    ok = np.isfinite(x) & np.isfinite(y)
    return x[ok], y[ok]


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
    x, y = _finite_pair(x, y)
    con = dis = tx = ty = txy = 0
    for dx, dy in _pair_diffs(x, y):
        tie_x = np.abs(dx) <= epsilon
        tie_y = dy == 0
        untied = ~tie_x & ~tie_y
        same = (dx > 0) == (dy > 0)
        con += int(np.count_nonzero(untied & same))
        dis += int(np.count_nonzero(untied & ~same))
        tx += int(np.count_nonzero(tie_x & ~tie_y))
        ty += int(np.count_nonzero(~tie_x & tie_y))
        txy += int(np.count_nonzero(tie_x & tie_y))
    return PairCounts(con, dis, tx, ty, txy)


def tau_b(x, y, epsilon: float = 0.0) -> float:
    """Kendall tau-b (scipy ``kendalltau(variant="b")``); optional metric-tie epsilon."""
    c = pair_counts(x, y, epsilon)
    n_pairs = c.total
    tot_x = n_pairs - c.ties_x - c.ties_both  # pairs untied in x
    tot_y = n_pairs - c.ties_y - c.ties_both
    if n_pairs == 0 or tot_x == 0 or tot_y == 0:
        return float("nan")
    return float((c.concordant - c.discordant) / np.sqrt(tot_x) / np.sqrt(tot_y))


def tau_c(x, y) -> float:
    """Kendall tau-c / Stuart's tau-c (scipy ``kendalltau(variant="c")``)."""
    xf, yf = _finite_pair(x, y)
    c = pair_counts(xf, yf)
    n_pairs = c.total
    if n_pairs == 0 or c.ties_x + c.ties_both == n_pairs or c.ties_y + c.ties_both == n_pairs:
        return float("nan")
    m = min(np.unique(xf).size, np.unique(yf).size)
    return float(2 * (c.concordant - c.discordant) / (xf.size ** 2 * (m - 1) / m))


def tau_23(x, y, epsilon: float = 0.0) -> float:
    """WMT23 tau ('23'): (C + Txy - D - Tx - Ty) / N, ties in both count as agreement."""
    c = pair_counts(x, y, epsilon)
    if c.total == 0:
        return float("nan")
    return (c.concordant + c.ties_both - c.discordant - c.ties_x - c.ties_y) / c.total


def acc_23(x, y, epsilon: float = 0.0) -> float:
    """WMT23 pairwise accuracy ('acc23'): (C + Txy) / N."""
    c = pair_counts(x, y, epsilon)
    if c.total == 0:
        return float("nan")
    return (c.concordant + c.ties_both) / c.total


def kendall_like_counts(x, y, thresh: float = 25.0) -> tuple[int, int]:
    """(concordant, discordant) of the WMT20 Kendall-like formulation (see module doc)."""
    x, y = _finite_pair(x, y)
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
    if con + dis == 0:
        return float("nan")
    return (con - dis) / (con + dis)


def normalize_variant(variant: str) -> str:
    v = str(variant).strip().lower()
    v = _ALIASES.get(v, v)
    if v not in VARIANTS:
        raise ValueError(f"unknown Kendall variant {variant!r}; use one of {VARIANTS}")
    return v


def kendall(x, y, variant: str = "b", **kw) -> float:
    """Dispatch: variant in b, c, 23, acc23, like (x = metric, y = human).

    Keyword arguments: ``epsilon`` (metric-tie threshold) for b / 23 / acc23; ``thresh``
    (gold-difference threshold, default 25) for like.
    """
    v = normalize_variant(variant)
    if v == "b":
        return tau_b(x, y, **kw)
    if v == "c":
        if kw.get("epsilon", 0.0):
            raise ValueError("tau-c is not defined with a non-zero epsilon")
        return tau_c(x, y)
    if v == "23":
        return tau_23(x, y, **kw)
    if v == "acc23":
        return acc_23(x, y, **kw)
    return kendall_like(x, y, **kw)
