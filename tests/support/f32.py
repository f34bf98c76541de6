"""The float32 tolerances every comparison of float32 forward-pass values uses (the ``f32`` fixture)."""

from __future__ import annotations

import itertools

import numpy as np

# --- float32 tolerances ------------------------------------------------------------------------
#
# Every comparison of values that come from float32 forward passes uses these: f32_tol /
# assert_f32_close for scores, f32_logp_tol for single log-probabilities. float64 comparisons
# keep fixed tight tolerances (1e-9 and below); integer and bit-for-bit comparisons stay exact.
#
# Where the error comes from. The engine computes log p_T(y) = z_y/T - logsumexp(z/T) from
# float32 logits z. Every dot product of the forward pass is rounded, and how depends on the
# order of its summation, which the BLAS kernels choose from the batch shape (token budget,
# padding side, item order) and from the CPU (SIMD width, blocking, threads). So two float32
# passes over the same item differ in each logit by dz ~ kappa * eps32 * Lambda (Lambda: the
# scale of the logits, kappa: growth with depth and dot-product length), hence
#     |d log p_T(y)| <= |dz_y|/T + |d logsumexp(z/T)| <= 2 max|dz| / T.
# The statistics do not keep Lambda; they hold two stand-ins for it: |log p_T(y)| itself
# (>= (z_max - z_y)/T: an unlikely token certifies widely spread logits), and M/T with
# M = the mean |log p_1| over all tokens of the pass (the typical spread, so that a token the
# model is sure of, log p ~ 0, still gets a tolerance). Per token and per float32 evaluation:
#     delta_t(T) = KAPPA32 * eps32 * (|log p_T(y_t)| + M/T).
# KAPPA32 is measured, with margin, not fitted to one machine: the largest |float32 - float64|
# of log p_T in units of eps32 * (|log p_T| + M/T) (same weights: the float64 pass is the exact
# value to ~1e-16) was 5.4 over 990 tokens x 3 temperatures of the tiny llamas below, run with
# six different summation orders (hidden units permuted: an identical network whose every dot
# product is summed in another order) and two batchings; 7.6 over 18,817 tokens of the demo set;
# 32.5 on SmolLM2-135M and 42.6 on Gemma-3-270M (trained models: logits large next to their
# log-probabilities). KAPPA32 = 64 covers all of them, the tiny llamas of these tests 8x over.
# Two float32 evaluations (the usual comparison: other batching, process or CPU) are each within
# delta of the exact value, so within 2 delta of each other: ``runs=2``; against a float64
# reference, ``runs=1``.
#
# Sums. A score adds n token values; the rounding errors of one item's tokens come from the same
# kernels and need not cancel, so they are added in the worst case: tol = sum_t bound_t (linear
# in n, not sqrt(n)). The norms divide that by n or sqrt(n) as they divide the score. (Measured:
# item sums stayed within 1.02 x sum_t eps32 * (...) under all the summation orders above, so
# sums have ~100x margin; on the tiny llamas the tolerance is ~3e-5 of a summed log-prob.)
#
# Methods. A token value v = f(a, b) reads a = log p_exp and b = log p_ama (one of them for
# `single`). Within the box [a +- delta_a] x [b +- delta_b] it moves by at most the largest
# |f(corner) - f(a, b)|: single, ensemble and division are monotone in a and b, and ContrastScore
# log|e^a - gamma e^b| is monotone on each side of p_exp = gamma p_ama, so the extremes are at
# the four corners, where the helper evaluates the method itself. That is ContrastScore's
# amplification computed from the actual statistics, token by token and beyond first order
# (dv/da = p/(p - gamma q), dv/db = -gamma q/(p - gamma q): large where p_exp ~ gamma p_ama;
# README "Numerics"); a box that contains p_exp = gamma p_ama lets v fall to the floor, and the
# tolerance of that item says so. cd_score's head membership (p_exp >= alpha max p) is a step,
# not covered.

EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7
KAPPA32 = 64.0


def _token_stats(stats) -> dict:
    """{head: TokenStats} from a PairStatistics or such a dict."""
    return dict(getattr(stats, "stats", stats))


def typical_logp(ts) -> float:
    """M: mean |log p_1| over the tokens of one pass (T = 1 row; another row scaled by its T)."""
    t = min(ts.temperatures, key=lambda x: abs(np.log(x)))
    lp = np.abs(ts.lp(t))
    return float(lp.mean() * t) if lp.size else 0.0


def f32_logp_tol(lp, temperature: float = 1.0, *, typical: float | None = None, runs: int = 2) -> np.ndarray:
    """Per-token bound on the difference of float32 log p_T values (``runs`` float32
    evaluations; see the comment above). ``lp``: the values; ``typical``: M (default: from lp)."""
    lp = np.abs(np.asarray(lp, dtype=np.float64))
    if typical is None:
        typical = float(lp.mean() * temperature) if lp.size else 0.0
    return runs * KAPPA32 * EPS32 * (lp + typical / temperature)


def _perturbed(ts, sign: float, runs: int):
    """The TokenStats with every log p_T moved by sign * its float32 bound."""
    from cscore.scorers.engine.stats import TokenStats

    m = typical_logp(ts)
    logp = ts.logp.astype(np.float64).copy()
    for i, t in enumerate(ts.temperatures):
        logp[i] += sign * f32_logp_tol(logp[i], t, typical=m, runs=runs)
    return TokenStats(ts.temperatures, ts.offsets, ts.token_ids, logp, ts.logp_max)


def _method_inputs(method: str, params: dict) -> dict:
    """{head: temperature} that the method's token values read."""
    from cscore.scorers import methods

    full = methods.with_defaults(method, params) if hasattr(methods, "with_defaults") else dict(params)
    if method == "single":
        return {full.get("model", "expert"): full.get("t", 1.0)}
    if method == "cd_score":
        raise NotImplementedError("cd_score's head test is a step in log p_max: no float32 tolerance")
    return {"expert": full.get("t_exp", 1.0), "amateur": full.get("t_ama", 1.0)}


def f32_token_tol(stats, method: str, *, runs: int = 2, **params) -> tuple[np.ndarray, np.ndarray]:
    """(per-token bound on the method's token values, per-token amplification = that bound over
    the sum of the input log-prob bounds), from the reference statistics ``stats``."""
    from cscore.scorers import methods

    ts = _token_stats(stats)
    inputs = _method_inputs(method, params)
    token_params = {k: v for k, v in params.items() if k not in ("norm", "skip_first")}
    v0 = methods.token_scores(method, ts, **token_params)
    dev = np.zeros_like(v0)
    for signs in itertools.product((-1.0, 1.0), repeat=len(inputs)):  # the corners of the box
        moved = dict(ts)
        for head, sign in zip(inputs, signs):
            moved[head] = _perturbed(ts[head], sign, runs)
        with np.errstate(invalid="ignore"):
            dev = np.maximum(dev, np.abs(methods.token_scores(method, moved, **token_params) - v0))
    delta_in = sum(f32_logp_tol(ts[h].lp(t), t, typical=typical_logp(ts[h]), runs=runs) for h, t in inputs.items())
    if method == "contrast":  # the box may contain p_exp = gamma p_ama: v can drop to the floor
        from cscore.scorers.methods.common import logp

        full = methods.with_defaults(method, params) if hasattr(methods, "with_defaults") else params
        a = logp(ts["expert"], inputs["expert"], full.get("clamp"))
        with np.errstate(divide="ignore"):
            b = np.log(full.get("gamma", 0.1)) + logp(ts["amateur"], inputs["amateur"], full.get("clamp"))
        straddles = np.abs(a - b) <= delta_in
        floor = full.get("floor")
        lowest = np.log(floor) if floor else -np.inf
        dev = np.where(straddles, np.maximum(dev, v0 - lowest), dev)
    return dev, dev / np.where(delta_in > 0, delta_in, 1.0)


def f32_tol(stats, method: str, *, runs: int = 2, **params) -> np.ndarray:
    """Per-item absolute tolerance for ``score(method, **params)`` computed from float32
    statistics: the per-token bounds of f32_token_tol added up as the score adds the tokens
    (``norm``, ``skip_first``). ``stats``: the reference PairStatistics (or {head: TokenStats})."""
    from cscore.scorers.methods.common import aggregate

    dev, _ = f32_token_tol(stats, method, runs=runs, **params)
    offsets = next(iter(_token_stats(stats).values())).offsets
    agg = {k: params[k] for k in ("norm", "skip_first") if k in params}
    return aggregate(dev, offsets, **agg)


def assert_f32_close(got, want, stats, method: str, *, runs: int = 2, **params) -> None:
    """|got - want| <= f32_tol item by item, with a message that names the worst item, its
    tolerance and the largest amplification among its tokens."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    tol = f32_tol(stats, method, runs=runs, **params)
    assert got.shape == want.shape == tol.shape, (got.shape, want.shape, tol.shape)
    diff = np.abs(got - want)
    bad = ~(diff <= tol)  # NaN fails
    if bad.any():
        _, amp = f32_token_tol(stats, method, runs=runs, **params)
        offsets = next(iter(_token_stats(stats).values())).offsets
        i = int(np.argmax(np.where(bad, diff / np.maximum(tol, 1e-300), -1)))
        item_amp = amp[offsets[i]:offsets[i + 1]].max(initial=0.0)
        raise AssertionError(
            f"{method} {params}: {int(bad.sum())} of {len(got)} items differ by more than the float32 tolerance; "
            f"worst item {i}: got {got[i]!r}, want {want[i]!r}, |diff| {diff[i]:.3g} > tol {tol[i]:.3g} "
            f"({diff[i] / max(tol[i], 1e-300):.3g} x; {offsets[i + 1] - offsets[i]} tokens, "
            f"max amplification {item_amp:.3g})")
