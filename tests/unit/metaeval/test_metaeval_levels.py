"""Kendall variants, correlation levels and tie-calibrated pairwise accuracy (acc_eq)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cscore.metaeval.kendall import (
    acc_23,
    kendall,
    kendall_like,
    kendall_like_counts,
    pair_counts,
    tau_23,
    tau_b,
    tau_c,
)
from cscore.metaeval.levels import Grouping, KendallOptions, correlate_at
from cscore.metaeval.pairwise import acc_eq, acc_eq_at, pairwise_accuracy, tie_calibration

# ---------------------------------------------------------------- Kendall variants

# x = metric, y = human
X = [1, 2, 2, 4, 4]
Y = [1, 1, 3, 2, 2]
# pairs (i, j): dx, dy -> class
# (0,1): 1, 0 Ty   (0,2): 1, 2 C   (0,3): 3, 1 C   (0,4): 3, 1 C
# (1,2): 0, 2 Tx   (1,3): 2, 1 C   (1,4): 2, 1 C
# (2,3): 2,-1 D    (2,4): 2,-1 D
# (3,4): 0, 0 Txy
# C=5 D=2 Tx=1 Ty=1 Txy=1, N=10


def test_pair_counts_hand_case():
    assert tuple(pair_counts(X, Y)) == (5, 2, 1, 1, 1)
    # epsilon=1: |dx| <= 1 is a metric tie -> (0,1) becomes Txy, (0,2) becomes Tx
    # C=(0,3),(0,4),(1,3),(1,4)=4  D=(2,3),(2,4)=2  Tx=(0,2),(1,2)=2  Ty=0  Txy=(0,1),(3,4)=2
    assert tuple(pair_counts(X, Y, epsilon=1)) == (4, 2, 2, 0, 2)


def test_kendall_variants_hand_case():
    # tau-b = (C - D) / sqrt((N - Tx - Txy)(N - Ty - Txy)) = 3 / sqrt(8 * 8)
    assert tau_b(X, Y) == pytest.approx(3 / 8)
    # tau-c = 2 (C - D) / (n^2 (m - 1) / m), n=5, m=min(3 distinct x, 3 distinct y)=3 -> 6 / (50/3)
    assert tau_c(X, Y) == pytest.approx(18 / 50)
    # tau_23 = (C + Txy - D - Tx - Ty) / N = (5 + 1 - 2 - 1 - 1) / 10
    assert tau_23(X, Y) == pytest.approx(0.2)
    # acc_23 = (C + Txy) / N = 6 / 10
    assert acc_23(X, Y) == pytest.approx(0.6)
    # with epsilon=1: acc = (4 + 2) / 10, tau23 = (4 + 2 - 2 - 2 - 0) / 10
    assert acc_23(X, Y, epsilon=1) == pytest.approx(0.6)
    assert tau_23(X, Y, epsilon=1) == pytest.approx(0.2)
    # epsilon=2: C=(0,3),(0,4)  Tx=(0,2),(1,2),(1,3),(1,4),(2,3),(2,4)  Txy=(0,1),(3,4)
    assert acc_23(X, Y, epsilon=2) == pytest.approx(0.4)
    assert tau_23(X, Y, epsilon=2) == pytest.approx((2 + 2 - 6) / 10)
    # dispatcher
    assert kendall(X, Y, "b") == tau_b(X, Y)
    assert kendall(X, Y, "c") == tau_c(X, Y)
    assert kendall(X, Y, "23") == tau_23(X, Y)
    assert kendall(X, Y, "acc23", epsilon=2) == acc_23(X, Y, epsilon=2)
    with pytest.raises(ValueError):
        kendall(X, Y, "zz")
    with pytest.raises(ValueError):
        kendall(X, Y, "c", epsilon=1)


def test_kendall_like_hand_case():
    # thresh=1: counted pairs |dy| >= 1 (all but (0,1), (3,4)):
    # (0,2) C  (0,3) C  (0,4) C  (1,3) C  (1,4) C ; (1,2) dx=0 metric tie -> D ; (2,3) D (2,4) D
    assert kendall_like_counts(X, Y, thresh=1) == (5, 3)
    assert kendall_like(X, Y, thresh=1) == pytest.approx(2 / 8)
    # thresh=2: only (0,2) C and (1,2) metric tie -> D
    assert kendall(X, Y, "like", thresh=2) == pytest.approx(0.0)
    # thresh=0 (as mt-metrics-eval): gold-tied pairs (0,1), (3,4) are counted, as discordant
    assert kendall_like_counts(X, Y, thresh=0) == (5, 5)
    # no pair reaches the threshold -> NaN, not 0
    assert math.isnan(kendall_like(X, Y, thresh=3))
    # default threshold 25 (raw DA points)
    assert kendall_like([0, 10, 50], [0, 30, 60]) == pytest.approx(1.0)  # |dy| = 30, 60, 30: all C
    assert kendall_like_counts([0, 10, 50], [0, 20, 60]) == (2, 0)  # (0,1): |dy|=20 < 25 not counted


def test_kendall_b_c_equal_scipy_random():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(3, 40))
        x = rng.integers(0, 5, n).astype(float)  # many ties
        y = rng.integers(0, 4, n) + 0.5 * rng.integers(0, 2, n)
        for v in ("b", "c"):
            ref = stats.kendalltau(x, y, variant=v)[0]
            got = kendall(x, y, v)
            assert (math.isnan(ref) and math.isnan(got)) or got == pytest.approx(ref, abs=1e-12)
    x, y = rng.normal(size=300), rng.normal(size=300)
    assert tau_b(x, y) == pytest.approx(stats.kendalltau(x, y)[0], abs=1e-12)
    assert tau_c(x, y) == pytest.approx(stats.kendalltau(x, y, variant="c")[0], abs=1e-12)


def test_kendall_constant_and_short_give_nan():
    for v in ("b", "c"):
        assert math.isnan(kendall([1, 1, 1], [1, 2, 3], v))
        assert math.isnan(kendall([1, 2, 3], [4, 4, 4], v))
    for v in ("b", "c", "23", "acc23", "like"):
        assert math.isnan(kendall([1.0], [2.0], v))
    # the '23' variants are defined on constant vectors: all pairs tied in metric only
    assert acc_23([1, 1, 1], [1, 2, 3]) == 0.0 and tau_23([1, 1, 1], [1, 2, 3]) == -1.0
    # non-finite cells are dropped in tandem
    assert tau_b([1, 2, np.nan, 3], [1, 2, 5, 3]) == pytest.approx(1.0)


# ---------------------------------------------------------------- levels

# 3 systems x 4 items
#          A (m, h)  B (m, h)  C (m, h)
# g1       1, 1      2, 2      3, 3      perfect
# g2       3, 1      2, 2      1, 3      reversed
# g3       1, 2      2, 2      3, 2      human constant -> skipped at item level
# g4       1, 1      3, 2      2, 3
TABLE = pd.DataFrame({
    "group": ["g1"] * 3 + ["g2"] * 3 + ["g3"] * 3 + ["g4"] * 3,
    "system": ["A", "B", "C"] * 4,
    "score.m": [1, 2, 3, 3, 2, 1, 1, 2, 3, 1, 3, 2],
    "human.h": [1, 2, 3, 1, 2, 3, 2, 2, 2, 1, 2, 3],
}).astype({"score.m": float, "human.h": float})


def _at(level, kind, variant=None, df=TABLE):
    return correlate_at(df, "score.m", "human.h", level, kind, variant)


def test_segment_level_equals_scipy():
    m, h = TABLE["score.m"], TABLE["human.h"]
    assert _at("segment", "pearson")["value"] == pytest.approx(stats.pearsonr(m, h)[0])
    assert _at("segment", "spearman")["value"] == pytest.approx(stats.spearmanr(m, h)[0])
    assert _at("segment", "kendall")["value"] == pytest.approx(stats.kendalltau(m, h)[0])
    r = _at("segment", "kendall", "c")
    assert r["value"] == pytest.approx(stats.kendalltau(m, h, variant="c")[0])
    assert (r["n"], r["n_groups"], r["n_skipped"], r["n_nonfinite"]) == (12, 1, 0, 0)


def test_item_level_hand_values_and_skipping():
    # g1: +1, g2: -1, g3 skipped (human constant), g4: m=[1,3,2], h=[1,2,3]
    # g4 Pearson: deviations m=(-1,1,0), h=(-1,0,1): cov 1 / sqrt(2 * 2) = 0.5; Spearman same
    # g4 Kendall: (A,B) C, (A,C) C, (B,C) D -> 1/3
    r = _at("item", "pearson")
    assert r["value"] == pytest.approx((1 - 1 + 0.5) / 3)
    assert (r["n"], r["n_groups"], r["n_skipped"]) == (9, 3, 1)
    assert _at("item", "spearman")["value"] == pytest.approx((1 - 1 + 0.5) / 3)
    assert _at("item", "kendall")["value"] == pytest.approx((1 - 1 + 1 / 3) / 3)
    # acc23 keeps g3 (defined with human ties): g1 1, g2 0, g3 0 (metric untied), g4 2/3
    r = _at("item", "kendall", "acc23")
    assert r["value"] == pytest.approx((1 + 0 + 0 + 2 / 3) / 4) and r["n_skipped"] == 0


def test_system_grouped_level():
    # A: m=[1,3,1,1] h=[1,1,2,1]: C=0 D=1 Tx=2 Ty=2 Txy=1 -> tau-b = -1 / sqrt(3 * 3)
    # B: human constant [2,2,2,2] -> skipped
    # C: m=[3,1,3,2] h=[3,3,2,3]: C=0 D=2 Tx=1 Ty=3 Txy=0 -> tau-b = -2 / sqrt(5 * 3)
    r = _at("system_grouped", "kendall")
    assert r["value"] == pytest.approx((-1 / 3 - 2 / math.sqrt(15)) / 2)
    assert (r["n"], r["n_groups"], r["n_skipped"]) == (8, 2, 1)
    # Pearson against an independent numpy computation
    a = np.corrcoef([1, 3, 1, 1], [1, 1, 2, 1])[0, 1]
    c = np.corrcoef([3, 1, 3, 2], [3, 3, 2, 3])[0, 1]
    assert _at("system_grouped", "pearson")["value"] == pytest.approx((a + c) / 2)


def test_system_level():
    # means: A (1.5, 1.25), B (2.25, 2.0), C (2.25, 2.75)
    # Kendall-b: (A,B) C, (A,C) C, (B,C) metric tie -> 2 / sqrt((3 - 1) * 3)
    r = _at("system", "kendall")
    assert r["value"] == pytest.approx(2 / math.sqrt(6))
    assert (r["n"], r["n_groups"], r["n_skipped"]) == (12, 3, 0)
    ref = stats.pearsonr([1.5, 2.25, 2.25], [1.25, 2.0, 2.75])[0]
    assert _at("system", "pearson")["value"] == pytest.approx(ref)


def test_nonfinite_cells_left_out_and_counted():
    df = TABLE.copy()
    df.loc[0, "score.m"] = np.nan      # g1/A: g1 keeps B, C -> still +1
    df.loc[9, "human.h"] = np.inf      # g4/A
    df.loc[10, "score.m"] = -np.inf    # g4/B: g4 has one finite cell -> skipped
    r = _at("item", "pearson", df=df)
    assert r["value"] == pytest.approx((1 - 1) / 2)
    assert (r["n"], r["n_groups"], r["n_skipped"], r["n_nonfinite"]) == (5, 2, 2, 3)
    seg = _at("segment", "pearson", df=df)
    ok = np.isfinite(df["score.m"]) & np.isfinite(df["human.h"])
    assert seg["value"] == pytest.approx(stats.pearsonr(df["score.m"][ok], df["human.h"][ok])[0])
    assert seg["n"] == 9


def test_constant_vectors_give_nan_never_zero():
    df = TABLE.assign(**{"score.m": 1.0})
    for level in ("segment", "item", "system_grouped", "system"):
        for kind in ("pearson", "spearman", "kendall"):
            r = _at(level, kind, df=df)
            assert math.isnan(r["value"]), (level, kind)
    r = _at("item", "pearson", df=df)
    assert (r["n_groups"], r["n_skipped"]) == (0, 4)


def test_item_level_random_against_independent_loop():
    rng = np.random.default_rng(3)
    n_items, n_sys = 12, 5
    df = pd.DataFrame({"group": np.repeat(np.arange(n_items), n_sys),
                       "system": np.tile(list("ABCDE"), n_items),
                       "m": rng.normal(size=n_items * n_sys),
                       "h": rng.integers(1, 6, n_items * n_sys).astype(float)})
    df.loc[df["group"] == 0, "h"] = 3.0  # constant -> skipped
    for kind, fn in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr),
                     ("kendall", stats.kendalltau)):
        vals = [fn(g["m"], g["h"])[0] for _, g in df.groupby("group") if g["h"].nunique() > 1]
        r = correlate_at(df, "m", "h", "item", kind)
        assert r["value"] == pytest.approx(np.mean(vals)) and r["n_skipped"] == 1
    vals = [stats.kendalltau(g["m"], g["h"], variant="c")[0]
            for _, g in df.groupby("system")]
    assert correlate_at(df, "m", "h", "system_grouped", "kendall", "c")["value"] == \
        pytest.approx(np.mean(vals))


def test_like_micro_average_is_pooled():
    df = pd.DataFrame({"group": [1, 1, 1, 2, 2],
                       "system": list("ABCAB"),
                       "m": [0.1, 0.2, 0.3, 0.9, 0.1],
                       "h": [0.0, 30.0, 60.0, 0.0, 50.0]})
    # group 1: 3 counted pairs, all C -> +1 ; group 2: 1 pair, D -> -1
    macro = correlate_at(df, "m", "h", "item", "kendall", "like")
    micro = correlate_at(df, "m", "h", "item", "kendall", "like", Grouping(average="micro"))
    assert macro["value"] == pytest.approx(0.0)
    assert micro["value"] == pytest.approx((3 - 1) / 4)


def test_bad_arguments():
    with pytest.raises(ValueError):
        _at("corpus", "pearson")
    with pytest.raises(ValueError):
        _at("item", "pearson", "b")


# ---------------------------------------------------------------- acc_eq (tie calibration)

def test_acc_eq_single_item():
    # m=[1, 1.5, 3, 4], h=[1, 1, 2, 3]; |dm|: (0,1) .5 human tie; others untied and concordant
    # eps=0: 5/6 correct; eps=0.5: (0,1) tied in both -> 6/6
    acc, eps = acc_eq([1, 1.5, 3, 4], [1, 1, 2, 3])
    assert (acc, eps) == (pytest.approx(1.0), 0.5)
    assert pairwise_accuracy([1, 1.5, 3, 4], [1, 1, 2, 3]) == pytest.approx(5 / 6)


# Two items with ties in gold and in metric.
# item a: m=[0, 0, 1], h=[1, 2, 3]
#   (0,1) dm=0 dh=1: metric tie, human untied -> always wrong
#   (0,2) |dm|=1 C, (1,2) |dm|=1 C -> right while eps < 1
#   acc_a: eps<1 -> 2/3, eps>=1 -> 0
# item b: m=[0, .25, 2, 5, 10], h=[1, 1, 1, 4, 1]
#   human ties, right once eps >= |dm|: (0,1) .25, (1,2) 1.75, (0,2) 2, (2,4) 8, (1,4) 9.75, (0,4) 10
#   concordant, right while eps < |dm|: (2,3) 3, (1,3) 4.75, (0,3) 5
#   (3,4) |dm|=5 discordant -> always wrong
#   correct/10 at eps = 0:3 .25:4 1.75:5 2:6 3:5 4.75:4 5:3 8:4 9.75:5 10:6
# mean over items: eps=0 (2/3+.3)/2=29/60, .25 (2/3+.4)/2=8/15 (best), 1 .2, 1.75 .25, 2 .3, ...
M2 = [0, 0, 1, 0, .25, 2, 5, 10]
H2 = [1, 2, 3, 1, 1, 1, 4, 1]
G2 = ["a"] * 3 + ["b"] * 5


def test_acc_eq_two_items_with_ties():
    res = tie_calibration(M2, H2, G2)
    assert res.epsilon == 0.25 and res.value == pytest.approx(8 / 15)
    assert list(res.thresholds) == [0, .25, 1, 1.75, 2, 3, 4.75, 5, 8, 9.75, 10]
    expected = [29 / 60, 8 / 15, .2, .25, .3, .25, .2, .15, .2, .25, .3]
    assert np.allclose(res.values, expected)
    assert (res.n_items, res.n_pairs) == (2, 13)
    assert acc_eq(M2, H2, G2) == (pytest.approx(8 / 15), 0.25)
    assert pairwise_accuracy(M2, H2, G2) == pytest.approx(29 / 60)
    # tau23 variant: 2 * acc - 1 per item, same optimum
    t = tie_calibration(M2, H2, G2, variant="23")
    assert t.epsilon == 0.25 and t.value == pytest.approx(2 * 8 / 15 - 1)
    # consistency with the level abstraction at the fixed epsilon
    df = pd.DataFrame({"group": G2, "system": list("xyz") + list("xyzuv"), "m": M2, "h": H2})
    r = correlate_at(df, "m", "h", "item", "kendall", "acc23", options=KendallOptions(epsilon=0.25))
    assert r["value"] == pytest.approx(8 / 15)
    assert acc_eq_at(df, "m", "h") == (pytest.approx(8 / 15), 0.25)


def test_acc_eq_item_average_differs_from_pooled():
    # item a: m=[0, 1], h=[0, 1]: right iff eps < 1
    # item b: m=[0, 2, 2], h=[5, 5, 5]: (1,2) always tied-right; (0,1), (0,2) right iff eps >= 2
    # item-averaged: eps=0 (1 + 1/3)/2 = 2/3; eps=1 (0 + 1/3)/2; eps=2 (0 + 1)/2 -> best eps=0
    # pooling the 4 within-item pairs instead would pick eps=2 (3/4 vs 2/4 at eps=0): WMT23 /
    # mt-metrics-eval average per item, so the answer is (2/3, 0).
    m, h, g = [0, 1, 0, 2, 2], [0, 1, 5, 5, 5], ["a", "a", "b", "b", "b"]
    assert acc_eq(m, h, g) == (pytest.approx(2 / 3), 0.0)
    df = pd.DataFrame({"group": g, "system": list("xyxyz"), "m": m, "h": h})
    assert acc_eq_at(df, "m", "h") == (pytest.approx(2 / 3), 0.0)
    # no grouping (all 10 pairs of cells, average_by='none'):
    # cells (m,h): 0:(0,0) 1:(1,1) 2:(0,5) 3:(2,5) 4:(2,5)
    # C while untied: (0,1) |dm|=1, (1,3) 1, (1,4) 1, (0,3) 2, (0,4) 2
    # human tie, right once tied: (2,3) |dm|=2, (2,4) 2 ; tied in both: (3,4) always right
    # always wrong: (0,2) metric tie only, (1,2) discordant
    # eps=0: 5 + 1 = 6/10 ; eps=1: 2 + 1 = 3/10 ; eps=2: 2 + 1 = 3/10 -> (0.6, 0)
    assert acc_eq(m, h) == (pytest.approx(0.6), 0.0)
    assert acc_eq_at(df, "m", "h", level="segment") == (pytest.approx(0.6), 0.0)


def test_acc_eq_at_least_uncalibrated_and_matches_brute_force():
    rng = np.random.default_rng(7)
    n_items, n_sys = 15, 6
    m = np.round(rng.normal(size=n_items * n_sys), 1)
    h = rng.integers(0, 3, n_items * n_sys).astype(float)
    g = np.repeat(np.arange(n_items), n_sys)
    res = tie_calibration(m, h, g)
    assert res.value >= pairwise_accuracy(m, h, g, epsilon=0.0) - 1e-12
    # brute force: every candidate epsilon through the fixed-epsilon path
    brute = [pairwise_accuracy(m, h, g, epsilon=e) for e in res.thresholds]
    assert np.allclose(brute, res.values)
    assert res.value == pytest.approx(max(brute))
    assert res.epsilon == res.thresholds[int(np.argmax(np.asarray(brute) >= max(brute) - 1e-12))]
    # fixed-epsilon item average == mean of per-item kendall acc23
    per_item = [acc_23(m[g == i], h[g == i], epsilon=res.epsilon) for i in range(n_items)]
    assert res.value == pytest.approx(np.mean(per_item))


def test_acc_eq_nonfinite_and_empty():
    acc, eps = acc_eq([1, np.nan, 2, 3], [1, 2, np.inf, 3])  # finite cells: (1,1), (3,3)
    assert (acc, eps) == (pytest.approx(1.0), 0.0)
    acc, eps = acc_eq([1.0], [1.0])
    assert math.isnan(acc)


def test_like_macro_counts_a_group_without_a_qualifying_pair_as_zero():
    """Issue 39, item 10c: mt-metrics-eval's item-wise KendallLike (``AverageCorrelation`` with
    macro=True) counts a group whose pairs all differ by less than the threshold as 0; cscore's
    macro default follows it (micro, the pooled value, is unchanged: such a group weighs 0).
    Hand-computed: group a: 3 pairs, all concordant -> +1; group b: pairs (0,1) dy 50 D, (0,2)
    dy 100 D, (1,2) dy 50 C -> -1/3; group c: one pair, dy 10 < 25 -> 0; group d: one cell, skipped."""
    from cscore.metaeval.statistic import LevelStat

    df = pd.DataFrame({"group": list("aaabbbccd"), "system": list("ABCABCABA"),
                       "m": [0.1, 0.2, 0.3, 0.9, 0.1, 0.5, 0.3, 0.7, 0.5],
                       "h": [0.0, 30.0, 60.0, 0.0, 50.0, 100.0, 10.0, 20.0, 40.0]})
    macro = correlate_at(df, "m", "h", "item", "kendall", "like")
    assert macro["value"] == pytest.approx((1 - 1 / 3 + 0) / 3)  # was (1 - 1/3) / 2, group c left out
    assert (macro["n_groups"], macro["n_skipped"], macro["n"]) == (3, 1, 8)
    micro = correlate_at(df, "m", "h", "item", "kendall", "like", Grouping(average="micro"))
    assert micro["value"] == pytest.approx((3 + 1 - 2) / (3 + 3))
    stat = LevelStat("h", "item", "kendall", "like")
    assert stat(df, "m") == pytest.approx(macro["value"])
    twice = np.array([[2, 1, 1, 1, 1, 1, 0, 1, 1]], dtype=np.float64)  # a resample: row 0 twice, row 6 left out
    expanded = df.loc[df.index.repeat(twice[0].astype(int))]
    assert stat.batch(df, [df["m"].to_numpy()], [twice])[0] == pytest.approx(
        correlate_at(expanded, "m", "h", "item", "kendall", "like")["value"])  # group c has one cell left: skipped
    from cscore.metaeval.statistic import Units

    draws = Units("group", pd.factorize(df["group"])[0], np.array([[1, 0, 2, 0], [0, 0, 2, 1], [0, 1, 0, 0]], float))
    got = stat.batch(df, [df["m"].to_numpy()], [np.ones((3, 9))], draws)  # each draw of a group is one group
    assert got[0] == pytest.approx((1 + 0 + 0) / 3) and np.isnan(got[1]) and got[2] == pytest.approx(-1 / 3)
    none = df[df["group"].isin(["c", "d"])]  # no group has a qualifying pair: NaN, not 0
    assert np.isnan(correlate_at(none, "m", "h", "item", "kendall", "like")["value"])
    assert np.isnan(stat(none, "m"))
