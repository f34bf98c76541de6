"""Bootstrap CIs, PERM-BOTH permutation test, significance clusters, BiasScore, quantized
accuracy and invalid rate (metaeval/statistic.py, resampling.py, clusters.py, kernels.py, bias.py).
Few resamples: fast."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cscore.metaeval import kernels
from cscore.metaeval.bias import bias_score, invalid_rate, quantized_accuracy
from cscore.metaeval.clusters import _assign_ranks, significance_clusters
from cscore.metaeval.levels import Grouping, KendallOptions, correlate_at
from cscore.metaeval.resampling import bootstrap_ci, permutation_test
from cscore.metaeval.statistic import LevelStat, MeanStat

PEARSON = LevelStat("human.overall", "segment", "pearson")


def PEARSON_PLAIN(d, m):  # the same statistic without a batch method: evaluated resample by resample
    return PEARSON(d, m)


def table(n_groups, n_sys=4, seed=0, noise=1.0):
    """One row per (group, system); score.good = human + noise, score.bad = pure noise."""
    rng = np.random.default_rng(seed)
    n = n_groups * n_sys
    human = rng.normal(size=n)
    return pd.DataFrame({
        "group": np.repeat([f"doc{g}" for g in range(n_groups)], n_sys),
        "system": np.tile([f"sys{s}" for s in range(n_sys)], n_groups),
        "human.overall": human,
        "score.good": human + noise * rng.normal(size=n),
        "score.good2": human + noise * rng.normal(size=n),
        "score.bad": rng.normal(size=n),
        "row_id": np.arange(n),
    })


# ---------------------------------------------------------------- bootstrap

def test_bootstrap_ci_contains_point_and_shrinks_with_more_data():
    small = bootstrap_ci(table(10), PEARSON, "score.good", n=200, seed=1)
    large = bootstrap_ci(table(160), PEARSON, "score.good", n=200, seed=1)
    for ci in (small, large):
        point, low, high = ci
        assert low <= point <= high
        assert ci.n_nan == 0 and ci.n == 200 and len(ci.samples) == 200
    assert small.n_units == 10 and large.n_units == 160
    assert (large.high - large.low) < 0.5 * (small.high - small.low)


def test_bootstrap_by_group_keeps_groups_whole():
    df = table(6, n_sys=3)
    members = df.groupby("group")["row_id"].apply(frozenset).to_dict()

    def whole(d, _m):
        if "group_orig" not in d:  # the point estimate on the full table
            return 1.0
        # every draw (relabelled 0..G-1) holds exactly the rows of one original group
        if d["group"].nunique() != 6 or len(d) != 18:
            return 0.0
        ok = all(frozenset(part["row_id"]) == members[part["group_orig"].iloc[0]]
                 and part["group_orig"].nunique() == 1 for _, part in d.groupby("group"))
        return float(ok)

    ci = bootstrap_ci(df, whole, "score.good", n=50, seed=3)
    assert ci.low == ci.high == 1.0
    distinct = bootstrap_ci(df, lambda d, m: float(d.get("group_orig", d["group"]).nunique()), "score.good",
                            n=50, seed=3)
    assert distinct.samples.max() <= 6 and distinct.samples.min() < 6  # duplicates are kept


def test_bootstrap_hand_case_fixed_seed():
    # 3 groups of sizes 1, 2, 3; stat = sum of score over the resample
    df = pd.DataFrame({"group": ["a", "b", "b", "c", "c", "c"],
                       "score.x": [1.0, 10.0, 10.0, 100.0, 100.0, 100.0]})
    ci = bootstrap_ci(df, lambda d, m: float(d[m].sum()), "score.x", n=5, seed=7, alpha=0.5)
    draws = np.random.default_rng(7).integers(0, 3, size=(5, 3))  # same generator, same draws
    per_group = np.array([1.0, 20.0, 300.0])
    expected = per_group[draws].sum(axis=1)
    assert ci.point == 321.0
    np.testing.assert_allclose(ci.samples, expected)
    assert ci.low == pytest.approx(np.quantile(expected, 0.25))
    assert ci.high == pytest.approx(np.quantile(expected, 0.75))


def test_bootstrap_rows_and_nan_count():
    df = table(5, n_sys=2)
    rows = bootstrap_ci(df, PEARSON, "score.good", resample=None, n=30, seed=0)
    assert rows.n_units == len(df) and rows.low <= rows.point <= rows.high

    def flaky(d, m):  # NaN whenever doc0 is in the table
        return math.nan if (d.get("group_orig", d["group"]) == "doc0").any() else 1.0

    ci = bootstrap_ci(df, flaky, "score.good", n=40, seed=2)
    assert 0 < ci.n_nan < 40 and ci.n_nan + len(ci.samples) == 40
    assert ci.low == ci.high == 1.0
    assert math.isnan(ci.point)


def test_bootstrap_is_deterministic():
    df = table(8)
    assert tuple(bootstrap_ci(df, PEARSON, "score.good", n=40, seed=5)) == \
        tuple(bootstrap_ci(df, PEARSON, "score.good", n=40, seed=5))


# ---------------------------------------------------------------- permutation test

def test_permutation_identical_metrics_p_is_one():
    df = table(10)
    df["score.copy"] = df["score.good"]
    res = permutation_test(df, PEARSON, "score.good", "score.copy", n=100, seed=0)
    assert res["delta"] == pytest.approx(0.0, abs=1e-12)
    assert res["p_value"] == 1.0


def test_permutation_human_vs_noise():
    df = table(10)
    df["score.human"] = df["human.overall"]
    better = permutation_test(df, PEARSON, "score.human", "score.bad", n=200, seed=0)
    assert better["delta"] > 0.5 and better["p_value"] <= 0.01
    assert better["value_a"] == pytest.approx(1.0)
    worse = permutation_test(df, PEARSON, "score.bad", "score.human", n=200, seed=0)
    assert worse["p_value"] >= 0.99


def test_permutation_deterministic_and_block_swaps():
    df = table(12)
    a = permutation_test(df, PEARSON, "score.good", "score.good2", n=100, seed=4)
    b = permutation_test(df, PEARSON, "score.good", "score.good2", n=100, seed=4)
    assert a == b
    blocks = permutation_test(df, PEARSON, "score.good", "score.good2", n=100, seed=4,
                              resample="group")
    assert 0 <= blocks["p_value"] <= 1 and blocks["delta"] == pytest.approx(a["delta"])


# ---------------------------------------------------------------- clusters

def test_assign_ranks_rule_compares_with_current_cluster_only():
    sig = np.full((4, 4), np.nan)
    sig[0, 1], sig[0, 2], sig[1, 2] = 0.30, 0.01, 0.40  # 2 is beaten by 0 -> new cluster
    sig[0, 3], sig[1, 3], sig[2, 3] = 0.00, 0.00, 0.50  # 3 only vs cluster {2}: stays
    assert _assign_ranks(lambda k, i: sig[k, i], 4, 0.05) == [1, 1, 2, 2]
    sig[2, 3] = 0.05  # p <= alpha counts as significant
    assert _assign_ranks(lambda k, i: sig[k, i], 4, 0.05) == [1, 1, 2, 3]


def test_significance_clusters_constructed_case():
    df = table(10, seed=2, noise=0.5)
    out = significance_clusters(df, PEARSON, ["score.bad", "score.good", "score.good2"], n=100, seed=0)
    ranks = {d["metric"]: d["rank"] for d in out}
    assert ranks == {"score.good": 1, "score.good2": 1, "score.bad": 2}
    assert [d["value"] for d in out] == sorted((d["value"] for d in out), reverse=True)
    assert out[-1]["metric"] == "score.bad" and min(out[-1]["pvalues"].values()) <= 0.05


# ---------------------------------------------------------------- bias and accuracy

def test_bias_score_hand_case():
    ls = np.array([-1.0, -2.0, -0.5, -3.0, -1.5, -2.5])
    metric = np.array([3.0, 2.0, 5.0, 1.0, 4.0, 2.0])   # evaluator, 1..5 scale
    human = np.array([60.0, 70.0, 80.0, 20.0, 40.0, 90.0])  # human, 0..100 scale

    def mm(x):
        return (x - x.min()) / (x.max() - x.min())

    us = mm(metric) - mm(human)  # documented default: min-max each, signed difference
    assert bias_score(ls, metric, human) == pytest.approx(stats.spearmanr(ls, us)[0])
    # NaN rows are dropped; an evaluator that adds the likelihood to the human score is biased
    assert bias_score(np.r_[ls, np.nan], np.r_[metric, 1.0], np.r_[human, 5.0]) == \
        pytest.approx(stats.spearmanr(ls, us)[0])
    rng = np.random.default_rng(0)
    h, lik = rng.normal(size=200), rng.normal(size=200)
    assert bias_score(lik, h + lik, h) > 0.5
    assert abs(bias_score(lik, h, h)) < 1e-12 or math.isnan(bias_score(lik, h, h))


def test_quantized_accuracy_hand_case():
    human = [1, 0, 1, 1, 0, 0]
    metric = [0.9, 0.2, 0.4, 0.8, 0.5, 0.1]
    # prevalence: 3 positives -> threshold = 3rd largest score 0.5 -> pred 1,0,0,1,1,0
    assert quantized_accuracy(metric, human) == pytest.approx(4 / 6)
    # SummEval-style 1..5 averages: positive only with a perfect score (default cut = max)
    assert quantized_accuracy([0.9, 0.7, 0.8, 0.1], [5.0, 4.67, 5.0, 3.0]) == 1.0


def test_invalid_rate():
    r = invalid_rate([True, False, True, True])
    assert r == 0.25 and r.count == 1 and r.n == 4
    assert math.isnan(invalid_rate([]))
    assert invalid_rate(np.array([1, 1, 0])).count == 1


# ---------------------------------------------------------------- batched resampling vs a loop

def tied_table(n_groups=8, n_sys=4, seed=0):
    """Scores with ties, non-finite cells and a split column (levels, subsets, tie handling)."""
    rng = np.random.default_rng(seed)
    n = n_groups * n_sys
    human = np.round(rng.normal(size=n)) * 25
    df = pd.DataFrame({
        "group": np.repeat([f"doc{g}" for g in range(n_groups)], n_sys),
        "system": np.tile([f"sys{s}" for s in range(n_sys)], n_groups),
        "human.h": human,
        "score.a": np.round(human / 25 + rng.normal(size=n), 1),
        "score.b": np.round(rng.normal(size=n), 1),
        "lp": rng.choice(["x", "y"], size=n),
    })
    df.loc[3, "score.a"] = np.nan
    df.loc[6, "human.h"] = np.nan
    df.loc[9, "score.b"] = np.inf
    return df


STATS = [  # (level, kind, variant, options)
    ("segment", "pearson", None, {}), ("segment", "spearman", None, {}), ("segment", "kendall", None, {}),
    ("segment", "kendall", "c", {}), ("segment", "kendall", "23", {"epsilon": 0.15}),
    ("segment", "kendall", "acc23", {}), ("segment", "kendall", "like", {"thresh": 25}),
    ("item", "pearson", None, {}), ("item", "spearman", None, {"average": "micro"}),
    ("item", "kendall", None, {}), ("item", "kendall", "like", {"average": "micro", "thresh": 0}),
    ("system_grouped", "kendall", "b", {"epsilon": 0.15}), ("system_grouped", "pearson", None, {}),
    ("system", "pearson", None, {}), ("system", "spearman", None, {}), ("system", "kendall", "acc23", {}),
    ("system", "kendall", None, {}), ("system", "kendall", "c", {}), ("system", "kendall", "like", {"thresh": 0}),
]


def settings(options: dict) -> dict:
    """A STATS row's options as the ``grouping`` and Kendall ``options`` objects."""
    kendall = {k: v for k, v in options.items() if k != "average"}
    return {"grouping": Grouping(average=options.get("average", "macro")), "options": KendallOptions(**kendall)}


def _resampled(df, drawn, col, relabel):
    """The loop reference's resample: the rows of each drawn unit, in draw order."""
    units = pd.unique(df[col])
    parts = []
    for k, u in enumerate(drawn):
        part = df[df[col] == units[u]].copy()
        if relabel:
            part[col] = k
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _reference_stat(level, kind, variant, options, subset=None):
    def stat(d, m):
        part = d if subset is None else d[d[subset[0]] == subset[1]]
        return correlate_at(part, m, "human.h", level, kind, variant, **settings(options))["value"]
    return stat


RESAMPLES = [("group", True, None), ("system", True, ("lp", "x")), ("group", False, None), (None, True, None)]
# every statistic with items resampled and relabelled (the report's setting); the other
# resampling schemes with one statistic per level and kind
BOOTSTRAP_CASES = [(st, RESAMPLES[0]) for st in STATS] + [
    (STATS[k], RESAMPLES[r]) for k, r in [(0, 1), (1, 2), (6, 3), (8, 1), (10, 2), (11, 3), (13, 2), (15, 1),
                                          (14, 3), (9, 3)]]


def _with_fallback(cases, kind_of):
    """Each case with Kendall / Spearman on pair matrices, and (those kinds only) again with
    every group above the pair-matrix limits: per-version loop and sort-based ranks."""
    return [(*c, False) for c in cases] + [(*c, True) for c in cases if kind_of(c) != "pearson"]


@pytest.mark.parametrize("stat_args,scheme,fallback", _with_fallback(BOOTSTRAP_CASES, lambda c: c[0][1]))
def test_batched_bootstrap_equals_loop_on_the_same_draws(stat_args, scheme, fallback, monkeypatch):
    if fallback:
        monkeypatch.setattr(kernels, "PAIRWISE_MAX", 2)
        monkeypatch.setattr(kernels, "ROW_PAIRS_MAX", 2)
    (level, kind, variant, options), (resample, relabel, subset) = stat_args, scheme
    df, n = tied_table(), 10
    stat = LevelStat("human.h", level, kind, variant, subset=subset, **settings(options))
    ci = bootstrap_ci(df, stat, "score.a", resample=resample, n=n, seed=3, relabel=relabel)
    reference = _reference_stat(level, kind, variant, options, subset)
    n_units = len(df) if resample is None else df[resample].nunique()
    draws = np.random.default_rng(3).integers(0, n_units, size=(n, n_units))
    want = np.array([reference(df.iloc[d] if resample is None else _resampled(df, d, resample, relabel), "score.a")
                     for d in draws])
    assert np.isfinite(want).sum() > n // 2  # the case tests values, not only NaN counts
    assert ci.point == pytest.approx(reference(df, "score.a"), abs=1e-12, nan_ok=True)
    assert ci.n_nan == int(np.isnan(want).sum())
    np.testing.assert_allclose(ci.samples, want[np.isfinite(want)], rtol=0, atol=1e-12)


def _zscored(x):
    ok = np.isfinite(x)
    out = np.full(len(x), np.nan)
    out[ok] = stats.zscore(x[ok])
    return out


@pytest.mark.parametrize("stat_args,fallback", _with_fallback([(st,) for st in STATS], lambda c: c[0][1]))
def test_batched_permutation_equals_loop_on_the_same_coins(stat_args, fallback, monkeypatch):
    if fallback:
        monkeypatch.setattr(kernels, "PAIRWISE_MAX", 2)
        monkeypatch.setattr(kernels, "ROW_PAIRS_MAX", 2)
    level, kind, variant, options = stat_args
    df, n = tied_table(seed=1), 10
    stat = LevelStat("human.h", level, kind, variant, **settings(options))
    reference = _reference_stat(level, kind, variant, options)
    a, b = _zscored(df["score.a"].to_numpy()), _zscored(df["score.b"].to_numpy())
    rng = np.random.default_rng(5)
    coins = np.array([rng.random(len(df)) < 0.5 for _ in range(n)])  # one draw per permutation

    def delta(x, y):
        return reference(df.assign(**{"score.a": x, "score.b": y}), "score.a") - \
            reference(df.assign(**{"score.a": y, "score.b": x}), "score.a")

    want = np.array([delta(np.where(c, b, a), np.where(c, a, b)) for c in coins])
    assert np.isfinite(want).all()
    stay, moved = (~coins).astype(float), coins.astype(float)
    got = stat.batch(df, [a, b], [stay, moved]) - stat.batch(df, [b, a], [stay, moved])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    res = permutation_test(df, stat, "score.a", "score.b", n=n, seed=5)
    observed = delta(a, b)
    finite = want[np.isfinite(want)]
    assert res["n_nan"] == n - len(finite)
    if len(finite):
        assert res["p_value"] == pytest.approx(np.mean(finite >= observed - 1e-12 * max(1, abs(observed))))


@pytest.mark.parametrize("constant", [0.3, 1.0])
@pytest.mark.parametrize("kind", ["pearson", "spearman", "kendall"])
def test_batched_bootstrap_gives_nan_for_a_constant_resample(constant, kind):
    # doc0 and doc1 hold the same constant metric: a resample of only them has no correlation
    # (0.3 is not exact in binary: sums of its copies round, the variance must still count as 0)
    df = pd.DataFrame({"group": ["doc0"] * 3 + ["doc1"] * 3 + ["doc2"] * 3,
                       "score.m": [constant] * 6 + [0.0, 2.0, 3.0], "human.h": [1, 2, 3, 3, 1, 2, 2, 1, 3.0]})
    stat = LevelStat("human.h", "segment", kind)
    fast = bootstrap_ci(df, stat, "score.m", n=40, seed=0)
    slow = bootstrap_ci(df, lambda d, m: stat(d, m), "score.m", n=40, seed=0)
    assert fast.n_nan == slow.n_nan > 0
    np.testing.assert_allclose(fast.samples, slow.samples, rtol=0, atol=1e-12)


def test_mean_stat_is_the_mean_of_its_parts():
    df = tied_table()
    parts = [LevelStat("human.h", "segment", "pearson"), LevelStat("human.h", "item", "kendall")]
    avg = MeanStat(parts)
    assert avg.batchable and not MeanStat([parts[0], PEARSON_PLAIN]).batchable
    assert avg(df, "score.a") == pytest.approx(np.mean([p(df, "score.a") for p in parts]))
    x, w = df["score.a"].to_numpy(), np.ones((3, len(df)))
    np.testing.assert_allclose(avg.batch(df, [x], [w]), np.mean([p.batch(df, [x], [w]) for p in parts], axis=0))


@pytest.mark.parametrize("scale", [1.0, 2.0**17])
def test_candidate_ranks_equal_sorted_ranks_exactly(scale):
    """The pair-matrix ranks of two candidates (float32 products while exact, float64 past 2**22
    in total weight) equal the sort-based average ranks of the materialised versions, bit for bit."""
    rng = np.random.default_rng(3)
    n = 97
    a = np.round(rng.normal(size=n), 1)  # ties within and across the candidates
    b = np.round(a + rng.normal(size=n), 1)
    counts = rng.multinomial(n, np.ones(n) / n, size=40).astype(np.float64) * scale
    pick = rng.random((40, n)) < 0.5
    ws = [counts * pick, counts * ~pick]
    X, W = kernels.materialise([a, b], ws)
    on = W > 0
    got = kernels._candidate_ranks([a, b], ws)
    np.testing.assert_array_equal(np.where(on, got, 0), np.where(on, kernels._ranks(X, W), 0))
