"""Soft pairwise accuracy (metaeval.spa): exact p-values from all sign flips, mt-metrics-eval's own
test value, an independent loop with the same random draws, and the properties SPA must have."""

import itertools

import numpy as np
import pandas as pd
import pytest

from cscore.metaeval import spa


def all_flips(n: int) -> np.ndarray:
    return np.array(list(itertools.product((1.0, -1.0), repeat=n)), dtype=np.float32)


def test_p_values_over_all_sign_flips_are_hand_computed():
    # A - B per segment: d = (2, -1, 2), observed 3; the 8 flipped sums are 3, -1, 5, 1, -1, -5, 1, -3:
    # two are >= 3 (p = 2/8) and seven are <= 3 (B better than A: 7/8, the tie at 3 counts both ways).
    # Metric: d = (1, 1, 1), observed 3, reached by the all-plus flip only: 1/8 and 8/8.
    human = [[3, 1, 2], [1, 2, 0]]
    metric = [[1, 1, 1], [0, 0, 0]]
    res = spa.spa(human, metric, flips=all_flips(3))
    assert res.p_human[0, 1] == 2 / 8 and res.p_human[1, 0] == 7 / 8
    assert res.p_metric[0, 1] == 1 / 8 and res.p_metric[1, 0] == 1.0
    assert np.isnan(res.p_human[0, 0])
    assert res.pce == 1 / 8 and res.value == 7 / 8  # the upper triangle only: |2/8 - 1/8|


def test_mt_metrics_evals_own_test_value():
    # mt_metrics_eval/stats_test.py testPairwiseConfidenceError: Correlation(2, [1, 2, 3, 2, 3, 4],
    # [2, 2, 4, 1, 3, 5]).PairwiseConfidenceError() == 0.872 (3 places). Human: d = (-1, -1, -1), every
    # flipped sum >= -3, p = 1; metric: d = (1, -1, -1), only the flip (-, +, +) gives -3 < -1, about 1/8
    # of the draws: 128 of the 1000 drawn with seed 4.
    res = spa.spa([[1, 2, 3], [2, 3, 4]], [[2, 2, 4], [1, 3, 5]])
    assert res.p_human[0, 1] == 1.0
    assert res.p_metric[0, 1] == 0.872
    assert res.value == 0.872
    flips = spa.sign_flips(3)
    assert np.count_nonzero((flips == [-1, 1, 1]).all(axis=1)) == 128


def loop_p_values(scores: np.ndarray, permutations: int, seed: int) -> np.ndarray:
    """p(i better than j) by plain loops: one uniform per permutation and segment from the same
    generator; above one half (numpy's rint sends 0.5 to 0) keeps the segment, else swaps it."""
    u = np.random.default_rng(seed).random(size=(permutations, scores.shape[1]), dtype=np.float32)
    n = scores.shape[0]
    out = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            observed = sum(float(a) - float(b) for a, b in zip(scores[i], scores[j]))
            hits = 0
            for k in range(permutations):
                flipped = sum((a - b) if u[k, s] > 0.5 else (b - a)
                              for s, (a, b) in enumerate(zip(scores[i], scores[j])))
                hits += flipped >= observed
            out[i, j] = hits / permutations
    return out


@pytest.mark.parametrize("n_sys, n_seg, seed", [(3, 7, 4), (5, 12, 0), (4, 30, 11)])
def test_equals_an_independent_loop_with_the_same_draws(n_sys, n_seg, seed):
    # quarter points: float32 and float64 sums are exact, so ties are ties in both implementations
    rng = np.random.default_rng(n_sys * 100 + n_seg)
    human = rng.integers(-8, 9, size=(n_sys, n_seg)) / 4
    metric = rng.integers(-8, 9, size=(n_sys, n_seg)) / 4
    res = spa.spa(human, metric, permutations=200, seed=seed)
    want_h, want_m = loop_p_values(human, 200, seed), loop_p_values(metric, 200, seed)
    np.testing.assert_array_equal(res.p_human, want_h)
    np.testing.assert_array_equal(res.p_metric, want_m)
    upper = np.triu_indices(n_sys, 1)
    want_pce = np.mean([abs(a - b) for a, b in zip(want_h[upper], want_m[upper])])
    assert res.pce == pytest.approx(want_pce, abs=1e-15) and res.value == pytest.approx(1 - want_pce, abs=1e-15)


def test_spa_is_one_when_the_metric_orders_as_the_humans_and_lower_otherwise():
    rng = np.random.default_rng(3)
    human = rng.normal(size=(6, 40)) + np.arange(6)[:, None] * 0.3
    assert spa.spa(human, human).value == 1.0
    assert spa.spa(human, 2 * human).value == 1.0  # doubling is exact in float32: the same tests
    noisy = spa.spa(human, human + rng.normal(size=human.shape))
    reversed_ = spa.spa(human, -human)
    assert reversed_.value < noisy.value < 1.0
    assert noisy.pce == pytest.approx(1 - noisy.value)


def test_spa_does_not_depend_on_the_order_of_the_systems():
    rng = np.random.default_rng(5)
    human = rng.normal(size=(5, 50)) + np.arange(5)[:, None] * 0.2
    metric = human + rng.normal(size=human.shape)
    order = [3, 0, 4, 1, 2]
    a, b = spa.spa(human, metric), spa.spa(human[order], metric[order])
    assert a.value == pytest.approx(b.value, abs=1e-12)
    np.testing.assert_array_equal(a.p_human[np.ix_(order, order)], b.p_human)


def test_the_sign_flips_are_mt_metrics_evals_draws():
    u = np.random.default_rng(4).random(size=(1000, 9), dtype=np.float32)
    flips = spa.sign_flips(9)
    assert flips.dtype == np.float32 and set(np.unique(flips)) == {-1.0, 1.0}
    np.testing.assert_array_equal(flips == 1, u > 0.5)
    np.testing.assert_array_equal(spa.sign_flips(9, 10, seed=7), spa.sign_flips(9, 10, seed=7))
    assert not np.array_equal(spa.sign_flips(9, 10, seed=7), spa.sign_flips(9, 10, seed=8))


def test_matrices_keep_complete_segments_in_data_order_and_systems_sorted():
    df = pd.DataFrame({"group": ["s2", "s2", "s1", "s1", "s3", "s3", "s4"],
                       "system": ["B", "A", "A", "B", "A", "B", "A"],
                       "human": [1.0, 2.0, 3.0, 4.0, np.nan, 6.0, 7.0],
                       "metric": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]})
    mat = spa.matrices(df, "metric", "human")
    assert mat.systems == ["A", "B"] and mat.segments == ["s2", "s1"]  # s3: NaN human; s4: no B
    np.testing.assert_array_equal(mat.human, [[2.0, 3.0], [1.0, 4.0]])
    np.testing.assert_array_equal(mat.metric, [[20.0, 30.0], [10.0, 40.0]])
    assert mat.n_dropped == 2
    with pytest.raises(ValueError, match="one score per system"):
        spa.matrices(pd.concat([df, df.iloc[:1]]), "metric", "human")


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="same"):
        spa.spa([[1, 2], [3, 4]], [[1, 2, 3], [3, 4, 5]])
