"""The batch correlation kernels (metaeval/kernels.py) against the scalar definitions they stand
for (correlation.correlate, kendall.kendall, through levels.corr_fn): every version of random
tied data, weighted by random draw counts (zeros included) or built from two candidate metric
vectors, equals the scalar value on its expanded cells."""

import numpy as np
import pytest

from cscore.metaeval import kernels
from cscore.metaeval.levels import corr_fn

CASES = [("pearson", None, {}), ("spearman", None, {}), ("kendall", "b", {}), ("kendall", "b", {"epsilon": 0.15}),
         ("kendall", "c", {}), ("kendall", "23", {}), ("kendall", "acc23", {"epsilon": 0.1}),
         ("kendall", "like", {"thresh": 1.0})]


def tied(rng, n):
    """Metric and human vectors with many ties (few distinct values), one non-finite cell each."""
    x = np.round(rng.normal(size=n), 1)
    y = rng.integers(1, 6, size=n).astype(np.float64)
    x[3], y[5] = np.nan, np.inf
    return x, y


def expanded(fn, x, y, w):
    reps = w.astype(np.int64)
    return fn(np.repeat(x, reps), np.repeat(y, reps))


@pytest.mark.parametrize("kind,variant,kw", CASES)
@pytest.mark.parametrize("n", [9, 40, 90])  # 90: Kendall past ROW_PAIRS_MAX (the per-version path)
def test_weighted_versions_equal_the_scalar_on_expanded_cells(kind, variant, kw, n):
    rng = np.random.default_rng(n)
    x, y = tied(rng, n)
    W = rng.multinomial(n, np.ones(n) / n, size=12).astype(np.float64)  # bootstrap draw counts
    corr = kernels.Correlation(kind, variant, kw)
    got, _ = corr.rows(x, y, W)
    want = np.array([expanded(corr.scalar, x, y, w) for w in W])
    assert np.isfinite(want).sum() >= 10
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind,variant,kw", CASES)
@pytest.mark.parametrize("pairwise_max", [512, 4])  # 4: above it the candidates are materialised
def test_candidate_versions_equal_the_scalar(kind, variant, kw, pairwise_max, monkeypatch):
    """A permutation's versions: each cell takes metric a or b (weight 1 on one of them)."""
    monkeypatch.setattr(kernels, "PAIRWISE_MAX", pairwise_max)
    rng = np.random.default_rng(7)
    a, y = tied(rng, 30)
    b = np.round(a + rng.normal(size=30), 1)
    swap = rng.random((15, 30)) < 0.5
    stay, moved = (~swap).astype(np.float64), swap.astype(np.float64)
    corr = kernels.Correlation(kind, variant, kw)
    got, _ = corr.candidates([a, b], [stay, moved], y)
    want = np.array([corr.scalar(np.where(s, b, a), y) for s in swap])
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_a_constant_version_is_nan_as_in_the_scalar():
    x = np.array([0.3, 0.3, 0.3, 1.0, 2.0])
    y = np.array([1.0, 2.0, 3.0, 2.0, 1.0])
    W = np.array([[2.0, 1, 2, 0, 0], [1, 1, 1, 1, 1]])
    for kind in ("pearson", "spearman", "kendall"):
        got, _ = kernels.Correlation(kind, None, {}).rows(x, y, W)
        assert np.isnan(got[0]) and got[1] == pytest.approx(corr_fn(kind, None, {})(x, y), abs=1e-12)
