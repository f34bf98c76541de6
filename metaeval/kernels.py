"""Pearson, Spearman and the Kendall variants of many weighted versions of one set of cells at once (a
bootstrap's integer weights, a permutation's candidate values), equal to ``levels.corr_fn`` up to rounding."""

from __future__ import annotations

import numpy as np

from cscore.metaeval.kendall import kendall_like_counts, normalize_variant
from cscore.metaeval.levels import corr_fn

PAIRWISE_MAX = 512     # cells up to which Kendall / Spearman use n x n pair matrices
ROW_PAIRS_MAX = 64     # cells up to which Kendall of per-version values uses pair arrays, else a loop
CHUNK_CELLS = 1 << 21  # (resample x row) cells evaluated at once (bounded memory)
NEAR_CONSTANT = 1e-10  # relative variance below which Pearson is recomputed cell by cell


class Correlation:
    """One correlation on B weighted versions of the cells at once; returns (values, micro weights)."""

    def __init__(self, kind: str, variant: str | None, kendall_kw: dict):
        self.scalar = corr_fn(kind, variant, kendall_kw)  # validates kind, variant and options
        self.kind = kind
        self.variant = normalize_variant(variant or "b") if kind == "kendall" else None
        self.epsilon = float(kendall_kw.get("epsilon", 0.0))
        self.thresh = float(kendall_kw.get("thresh", 25.0))

    def candidates(self, xs: list, ws: list, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Versions given by candidate metric vectors ``xs`` (n,), weights ``ws`` (B, n), human ``y``."""
        xs, ws, y = clean(xs, ws, y)
        if self.kind == "pearson":
            return _pearson_candidates(xs, ws, y), sum(ws).sum(1)
        if len(y) > PAIRWISE_MAX:
            X, W = materialise(xs, ws)
            return self._rows(X, y, W)
        if self.kind == "spearman":
            W = sum(ws)
            same = (W == W[:1]).all()  # every version has the same cells (a permutation): y ranked once
            return _spearman(_candidate_ranks(xs, ws), _candidate_ranks([y], [W[:1] if same else W]), W), W.sum(1)
        return self._kendall(_CandidatePairs(xs, ws, y))

    def rows(self, X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Versions given by their values: X and Y (B, n) or (n,), integer weights W (B, n)."""
        ok = np.isfinite(X) & np.isfinite(Y) & (W > 0)
        return self._rows(np.where(ok, X, 0.0), np.where(ok, Y, 0.0), np.where(ok, W, 0.0))

    def _rows(self, X, Y, W) -> tuple[np.ndarray, np.ndarray]:
        if self.kind == "pearson":
            return _pearson(X, Y, W), W.sum(1)
        if self.kind == "spearman":
            return _spearman(_ranks(X, W), _ranks(Y, W), W), W.sum(1)
        if W.shape[1] <= ROW_PAIRS_MAX:
            return self._kendall(_RowPairs(X, Y, W))
        return self._loop(X, Y, W)

    def _loop(self, X, Y, W) -> tuple[np.ndarray, np.ndarray]:
        """One scalar call per version on the expanded cells (Kendall on many rows)."""
        X, Y = np.broadcast_to(X, W.shape), np.broadcast_to(Y, W.shape)
        values, weights = np.empty(len(W)), W.sum(1)
        for b, repeat in enumerate(W.astype(np.int64)):
            x, y = np.repeat(X[b], repeat), np.repeat(Y[b], repeat)
            values[b] = self.scalar(x, y)
            if self.variant == "like":
                weights[b] = sum(kendall_like_counts(x, y, self.thresh))
        return values, weights

    def _kendall(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """Kendall variants from weighted pair counts; dx, dy: a pair's metric and human differences."""
        if self.variant == "like":
            agree = pairs.sum(lambda dx, dy: (np.abs(dy) >= self.thresh) & (np.sign(dx) == np.sign(dy)) & (dy != 0))
            counted = pairs.sum(lambda dx, dy: np.abs(dy) >= self.thresh, uses_x=False)
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(counted > 0, (2 * agree - counted) / counted, np.nan), counted
        n_cells = pairs.W.sum(1)
        n_pairs = n_cells * (n_cells - 1) / 2

        def sx(dx):  # metric order of a pair; 0 = metric tie
            return np.where(np.abs(dx) <= self.epsilon, 0.0, np.sign(dx))

        c_minus_d = pairs.sum(lambda dx, dy: sx(dx) * np.sign(dy))
        untied_x = pairs.sum(lambda dx, dy: np.abs(sx(dx)))
        untied_y = pairs.sum(lambda dx, dy: dy != 0, uses_x=False)
        undefined = (n_pairs == 0) | (untied_x == 0) | (untied_y == 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.variant == "b":
                tau = c_minus_d / np.sqrt(untied_x) / np.sqrt(untied_y)
                tau = np.clip(tau, -1.0, 1.0) if not self.epsilon else tau  # as scipy's tau-b
            elif self.variant == "c":
                m = np.minimum(*pairs.distinct())
                tau = 2 * c_minus_d / (n_cells ** 2 * (m - 1) / m)
            else:
                c_plus_d = pairs.sum(lambda dx, dy: np.abs(sx(dx)) * (dy != 0))
                con, dis = (c_plus_d + c_minus_d) / 2, (c_plus_d - c_minus_d) / 2
                ties_y, ties_x = untied_x - c_plus_d, untied_y - c_plus_d  # untied in x: C + D + Ty
                ties_both = n_pairs - c_plus_d - ties_x - ties_y
                agree = con + ties_both - dis - ties_x - ties_y if self.variant == "23" else con + ties_both
                tau, undefined = agree / n_pairs, n_pairs == 0
        return np.where(undefined, np.nan, tau), n_cells


class _CandidatePairs:
    """Pair sums over versions given by candidates (``_pair_sum``)."""

    def __init__(self, xs, ws, y):
        self.xs, self.ws, self.y, self.W = xs, ws, y, sum(ws)
        self.dy = y[None, :] - y[:, None]  # dy[i, j] = y[j] - y[i]

    def sum(self, pair_fn, uses_x: bool = True) -> np.ndarray:
        if not uses_x:
            return _pair_sum([self.y], [self.W], lambda _: pair_fn(None, self.dy))
        return _pair_sum(self.xs, self.ws, lambda dx: pair_fn(dx, self.dy))

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        return _n_distinct(*materialise(self.xs, self.ws)), _n_distinct(self.y, self.W)


class _RowPairs:
    """Pair sums over versions given by their values (few cells): B x n x n pair arrays."""

    def __init__(self, X, Y, W):
        self.X, self.Y, self.W = np.broadcast_to(X, W.shape), np.broadcast_to(Y, W.shape), W

    def sum(self, pair_fn, uses_x: bool = True) -> np.ndarray:
        out = np.empty(len(self.W))
        n = self.W.shape[1]
        for part in chunks(len(self.W), n * n):
            X, Y, W = self.X[part], self.Y[part], self.W[part]
            m = np.asarray(pair_fn(X[:, None, :] - X[:, :, None], Y[:, None, :] - Y[:, :, None]), dtype=np.float64)
            # all ordered pairs of cells, less each cell with itself, halved (as _pair_sum)
            out[part] = (np.einsum("bi,bij,bj->b", W, m, W) - np.einsum("bii,bi->b", m, W)) / 2
        return out

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        return _n_distinct(self.X, self.W), _n_distinct(self.Y, self.W)


def clean(xs, ws, y):
    """Cells with a non-finite metric or human value get weight 0 (and value 0)."""
    y = np.asarray(y, dtype=np.float64)
    y_ok = np.isfinite(y)
    out_x, out_w = [], []
    for x, w in zip(xs, ws):
        x = np.asarray(x, dtype=np.float64)
        ok = np.isfinite(x) & y_ok
        out_x.append(x if ok.all() else np.where(ok, x, 0.0))
        out_w.append(w if ok.all() else w * ok)
    return out_x, out_w, np.where(y_ok, y, 0.0)


def materialise(xs, ws) -> tuple[np.ndarray, np.ndarray]:
    """(values, weights), both (B, n), of versions given by candidates."""
    W = sum(ws)
    X = sum((w > 0) * x for x, w in zip(xs, ws))
    return np.broadcast_to(X, W.shape), W


def _constant(X, W) -> np.ndarray:
    on = W > 0
    return np.where(on, X, -np.inf).max(1) == np.where(on, X, np.inf).min(1)


def _pearson(X, Y, W) -> np.ndarray:
    """Weighted Pearson per version; NaN with fewer than 2 cells or a constant side."""
    n = W.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = X - ((W * X).sum(1) / n)[:, None]
        dy = Y - ((W * Y).sum(1) / n)[:, None]
        r = (W * dx * dy).sum(1) / np.sqrt((W * dx * dx).sum(1)) / np.sqrt((W * dy * dy).sum(1))
    undefined = (n < 2) | _constant(X, W) | _constant(Y, W)
    return np.where(undefined, np.nan, np.clip(r, -1.0, 1.0))


def _pearson_candidates(xs, ws, y) -> np.ndarray:
    """``_pearson`` of versions given by candidates, from weighted sums; a near-zero variance is recomputed."""
    W = sum(ws)
    n = W.sum(1)
    shift = np.mean([x.mean() for x in xs])  # any common shift; a central one keeps sums small
    xs = [x - shift for x in xs]
    y = y - y.mean()
    sx, sy = sum(w @ x for x, w in zip(xs, ws)), W @ y
    with np.errstate(divide="ignore", invalid="ignore"):
        sxx, syy = sum(w @ (x * x) for x, w in zip(xs, ws)), W @ (y * y)
        vx, vy = sxx - sx * sx / n, syy - sy * sy / n
        cov = sum(w @ (x * y) for x, w in zip(xs, ws)) - sx * sy / n
        r = np.clip(cov / np.sqrt(vx) / np.sqrt(vy), -1.0, 1.0)
    r[n < 2] = np.nan
    near = (n >= 2) & ((vx <= NEAR_CONSTANT * sxx) | (vy <= NEAR_CONSTANT * syy))
    if near.any():
        X, W_near = materialise(xs, [w[near] for w in ws])
        r[near] = _pearson(X, y, W_near)
    return r


def _spearman(RX, RY, W) -> np.ndarray:
    """Pearson of the average ranks of the expanded cells (exact sums: a constant side has variance 0)."""
    S = W.sum(1)
    mean_sq = S * ((S + 1) / 2) ** 2
    vx, vy = (W * RX * RX).sum(1) - mean_sq, (W * RY * RY).sum(1) - mean_sq
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.clip(((W * RX * RY).sum(1) - mean_sq) / np.sqrt(vx) / np.sqrt(vy), -1.0, 1.0)
    return np.where((S < 2) | (vx <= 0) | (vy <= 0), np.nan, r)


def _candidate_ranks(xs, ws) -> np.ndarray:
    """``_ranks`` of versions given by candidates: the weight below a cell, half its ties', plus 1/2."""
    # sums of halves of integer weights: exact in float32 (twice as fast) while the weights sum below 2**22
    exact32 = max(float(w.sum(1).max()) for w in ws) < 2**22 if ws else True
    dtype = np.float32 if exact32 else np.float64
    ranks = 0.0
    for xp, wp in zip(xs, ws):
        rank_p = 0.5
        for xq, wq in zip(xs, ws):
            d = xq[None, :] - xp[:, None]  # d[i, j] = xq[j] - xp[i]
            below = ((d < 0) + 0.5 * (d == 0)).astype(dtype)
            rank_p = rank_p + (wq.astype(dtype) @ below.T).astype(np.float64)
        ranks = ranks + (wp > 0) * rank_p
    return np.asarray(ranks)  # an array already (the same object) once a candidate was added


def _ranks(X, W) -> np.ndarray:
    """Average 1-based ranks of each version's expanded cells (weight k: k tied positions)."""
    X = np.broadcast_to(np.where(W > 0, X, np.inf), W.shape)
    order = np.argsort(X, axis=1, kind="stable")
    xs, ws = np.take_along_axis(X, order, 1), np.take_along_axis(W, order, 1)
    n = X.shape[1]
    pos = np.arange(n)
    first = np.ones(xs.shape, dtype=bool)
    first[:, 1:] = xs[:, 1:] != xs[:, :-1]
    last = np.ones(xs.shape, dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    cum = np.cumsum(ws, axis=1)
    before = np.take_along_axis(cum, start, 1) - np.take_along_axis(ws, start, 1)
    tied = np.take_along_axis(cum, end, 1) - before
    ranks = np.empty_like(cum)
    np.put_along_axis(ranks, order, before + (tied + 1) / 2, 1)
    return ranks


def _n_distinct(X, W) -> np.ndarray:
    """Distinct values among the cells of weight > 0 of each version."""
    xs = np.sort(np.broadcast_to(np.where(W > 0, X, np.inf), W.shape), axis=1)
    first = np.ones(xs.shape, dtype=bool)
    first[:, 1:] = xs[:, 1:] != xs[:, :-1]
    return (first & np.isfinite(xs)).sum(1)


def _pair_sum(xs, ws, pair_fn) -> np.ndarray:
    """Per version, the sum of an order-free ``pair_fn(dx)`` over all unordered pairs of expanded cells."""
    total = 0.0
    for p, (xp, wp) in enumerate(zip(xs, ws)):
        for q in range(p, len(xs)):
            m = np.asarray(pair_fn(xs[q][None, :] - xp[:, None]), dtype=np.float64)
            both = ((wp @ m) * ws[q]).sum(1)
            # (p, q) and (q, p) give the same sum; a cell is not paired with itself
            total = total + (both - wp @ np.diag(m) if p == q else 2 * both)
    return np.asarray(total / 2)  # an array already (the same object) once a candidate was added


def chunks(n: int, width: int):
    """Slices of at most CHUNK_CELLS / width resamples."""
    step = max(1, CHUNK_CELLS // max(width, 1))
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))

