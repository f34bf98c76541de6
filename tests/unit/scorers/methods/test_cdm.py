"""Discriminative CDM: the contrastive momentum and its poolings against hand-computed values
on toy bigram models with chosen logits; the classifier pooler's group k-fold cross-validation
(no leak, every item once, deterministic, better than chance); `cscore run method=cdm` and
`method=cdm_classifier` end to end with tiny models, the second pooling read from the cache."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from cscore.errors import ConfigError
from cscore.run.variants import plan
from cscore.scorers import methods
from cscore.scorers.cdm import pooler as cdm_pooler
from cscore.scorers.engine import engine
from cscore.scorers.methods.common import aggregate, per_item
from cscore.tests.support.cli import tiny_args

V = 4
# Expert / amateur next-token probabilities (rows: previous token), chosen by hand.
P_EXP = [[0.60, 0.20, 0.10, 0.10],
         [0.10, 0.50, 0.30, 0.10],
         [0.20, 0.20, 0.40, 0.20],
         [0.05, 0.15, 0.30, 0.50]]
P_AMA = [[0.30, 0.40, 0.20, 0.10],
         [0.25, 0.25, 0.25, 0.25],
         [0.10, 0.50, 0.20, 0.20],
         [0.40, 0.30, 0.20, 0.10]]
# Three items: (prompt, hypothesis). The first hypothesis token is predicted from the prompt's last.
ITEMS = [([0], [0, 1, 2]), ([3, 3], [1]), ([2], [2, 3, 3, 0])]
# The (prev, target) pairs each hypothesis token is scored on:
SCORED = [[(0, 0), (0, 1), (1, 2)], [(3, 1)], [(2, 2), (2, 3), (3, 3), (3, 0)]]


# The toy models' weights pass through float32 layers (then .double()): log-probabilities are
# float32-exact only, so a momentum that is 0 by hand comes out ~1e-8.
TOL = 1e-6


def prob(table, prev, tok, t=1.0):
    w = [table[prev][v] ** (1.0 / t) for v in range(V)]
    return w[tok] / sum(w)


def m_hand(prev, tok, t=1.0):
    """The step-wise contrastive momentum log p_e - log p_a, by hand."""
    return math.log(prob(P_EXP, prev, tok, t)) - math.log(prob(P_AMA, prev, tok, t))


@pytest.fixture(scope="module")
def stats(toy_bigram):
    out = {}
    for name, table in (("expert", P_EXP), ("amateur", P_AMA)):
        model = toy_bigram(torch.log(torch.tensor(table, dtype=torch.float64))).double()
        got, _ = engine.compute(model, ITEMS, temperatures=(0.5, 1.0), heads={name: None})
        out.update(got)
    return out


# --- the momentum and its poolings ------------------------------------------------------------


def test_momentum_is_the_per_token_log_ratio(stats):
    want = [m_hand(p, y) for item in SCORED for p, y in item]
    np.testing.assert_allclose(methods.token_scores("cdm", stats), want, atol=TOL)
    # token (0 -> 1): log(0.2 / 0.4) < 0, the amateur prefers it; token (0 -> 0): log(0.6 / 0.3) > 0
    assert methods.token_scores("cdm", stats)[1] == pytest.approx(math.log(0.5))
    tempered = [m_hand(p, y, 0.5) for item in SCORED for p, y in item]
    np.testing.assert_allclose(methods.token_scores("cdm", stats, t=0.5), tempered, atol=TOL)


@pytest.mark.parametrize("pooling, reduce", [("sum", sum), ("mean", lambda v: sum(v) / len(v)), ("min", min),
                                             ("max", max)])
def test_each_pooling_by_hand(stats, pooling, reduce):
    want = [reduce([m_hand(p, y) for p, y in item]) for item in SCORED]
    np.testing.assert_allclose(methods.score("cdm", stats, pooling=pooling), want, atol=TOL)
    # skip_first: the first token of each item is left out; the one-token item has none left (0)
    skipped = [reduce([m_hand(p, y) for p, y in item[1:]]) if len(item) > 1 else 0.0 for item in SCORED]
    np.testing.assert_allclose(methods.score("cdm", stats, pooling=pooling, skip_first=True), skipped, atol=TOL)


def test_default_is_mean_pooling_at_t1_and_sum_is_division(stats):
    assert methods.defaults("cdm") == {"pooling": "mean", "t": 1.0, "clamp": None, "skip_first": False}
    np.testing.assert_allclose(methods.score("cdm", stats), methods.score("cdm", stats, pooling="mean"), rtol=1e-12)
    # sum pooling is m(s) = log p_e(s) - log p_a(s): the division ablation at T_e = T_a = 1
    np.testing.assert_allclose(methods.score("cdm", stats, pooling="sum"),
                               methods.score("division", stats, t_exp=1.0, t_ama=1.0), atol=TOL)
    # the max-pooled item 0 is its first token (log 2), the min-pooled its second (log 0.5)
    assert methods.score("cdm", stats, pooling="max")[0] == pytest.approx(math.log(2.0))
    assert methods.score("cdm", stats, pooling="min")[0] == pytest.approx(math.log(0.5))


def test_aggregate_min_max_with_empty_items_and_skip_first():
    values = np.array([3.0, -1.0, 2.0, 5.0, -4.0, 7.0])
    offsets = np.array([0, 3, 3, 4, 6])  # items: [3, -1, 2], [], [5], [-4, 7]
    np.testing.assert_array_equal(aggregate(values, offsets, norm="min"), [-1.0, 0.0, 5.0, -4.0])
    np.testing.assert_array_equal(aggregate(values, offsets, norm="max"), [3.0, 0.0, 5.0, 7.0])
    np.testing.assert_array_equal(aggregate(values, offsets, norm="min", skip_first=True), [-1.0, 0.0, 0.0, 7.0])
    np.testing.assert_array_equal(aggregate(values, offsets, norm="max", skip_first=True), [2.0, 0.0, 0.0, 7.0])
    assert [list(s) for s in per_item(values, offsets, skip_first=True)] == [[-1.0, 2.0], [], [], [7.0]]
    with pytest.raises(ConfigError, match="norm must be one of"):
        aggregate(values, offsets, norm="median")


def test_pooling_is_validated_and_is_the_norm_of_cdm():
    assert methods.check_params("cdm", {"pooling": "max", "t": 1}) == {"pooling": "max", "t": 1.0}
    with pytest.raises(ConfigError, match=re.escape("method.pooling must be sum | mean | min | max, got 'median'")):
        methods.check_params("cdm", {"pooling": "median"})
    with pytest.raises(ConfigError, match="has no parameter method.norm"):  # cdm calls it pooling
        methods.check_params("cdm", {"norm": "mean"})
    assert methods.get("cdm").aggregation_keys() == {"pooling": "norm", "skip_first": "skip_first"}
    # the other methods keep norm and its length normalisations
    with pytest.raises(ConfigError, match=re.escape("method.norm must be sum | mean | sqrt, got 'max'")):
        methods.check_params("single", {"norm": "max"})


def test_comparison_rows_are_pooled_like_the_method(stats):
    from cscore.run.typed import typed_method

    written = {"name": "cdm", "variant": "cdm", **methods.defaults("cdm"), "pooling": "max"}
    variants = plan(typed_method(written), written=written)
    assert [v.name for v in variants] == ["expert", "amateur", "ensemble", "cdm"]
    assert all(v.params.norm == "max" and v.record["norm"] == "max" for v in variants[:3])
    assert variants[-1].params.pooling == "max" and variants[-1].temperatures() == {1.0}
    expert = methods.score(variants[0].method, stats, **variants[0].settings())
    np.testing.assert_allclose(expert, [max(math.log(P_EXP[p][y]) for p, y in item) for item in SCORED], atol=TOL)
    # mean pooling: the momentum row is the expert row minus the amateur row
    rows = {v.name: methods.score(v.method, stats, **v.settings())
            for v in plan(typed_method({"name": "cdm", **methods.defaults("cdm")}))}
    np.testing.assert_allclose(rows["cdm"], rows["expert"] - rows["amateur"], atol=TOL)


def test_the_classifier_is_not_a_function_of_the_statistics(stats):
    with pytest.raises(ConfigError, match=r"cdm\.pooler"):
        methods.score("cdm_classifier", stats)
    np.testing.assert_array_equal(methods.token_scores("cdm_classifier", stats), methods.token_scores("cdm", stats))
    assert methods.get("cdm_classifier").kind == "pooler"
    assert methods.check_params("cdm_classifier", {"folds": 3, "seed": 7, "aspect": None})["folds"] == 3
    with pytest.raises(ConfigError, match="method.folds must be an integer >= 2, got 1"):
        methods.check_params("cdm_classifier", {"folds": 1})
    with pytest.raises(ConfigError, match="has no parameter method.pooling"):
        methods.check_params("cdm_classifier", {"pooling": "mean"})


@pytest.mark.parametrize("override, message", [
    ("method.pooling=median", "method.pooling must be sum | mean | min | max, got 'median'"),
    ("method.polling=max", "no setting method.polling (did you mean method.pooling?)"),
])
def test_config_mistakes_stop_before_anything_runs(override, message, tmp_path, cscore_main):
    res = cscore_main("run", "method=cdm", override, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "outputs").exists()


# --- the classifier pooler ---------------------------------------------------------------------


def synthetic(n_groups=30, per_group=(2, 3, 5), shift=0.6, seed=0):
    """Momentum sequences whose level follows a 0/1 label (separable on average), in groups of
    uneven size."""
    rng = np.random.default_rng(seed)
    seqs, labels, groups = [], [], []
    for g in range(n_groups):
        for _ in range(per_group[g % len(per_group)]):
            y = int(rng.integers(0, 2))
            seqs.append(rng.normal(shift if y else -shift, 1.0, int(rng.integers(4, 40))))
            labels.append(float(y))
            groups.append(f"doc{g:02d}")
    return seqs, np.array(labels), np.array(groups)


def test_features_by_hand():
    x = cdm_pooler.features([np.array([1.0, -2.0, 3.0, 0.0]), np.array([])])
    f = dict(zip(cdm_pooler.FEATURES, x[0]))
    assert f["mean"] == 0.5 and f["min"] == -2.0 and f["max"] == 3.0 and f["sum"] == 2.0
    assert f["q50"] == 0.5 and f["frac_pos"] == 0.5 and f["log_len"] == pytest.approx(math.log(5))
    assert f["std"] == pytest.approx(math.sqrt((0.25 + 6.25 + 6.25 + 0.25) / 4))
    assert f["q25"] == pytest.approx(-0.5) and f["q75"] == pytest.approx(1.5)  # linear interpolation
    assert not x[1].any()  # no scored token: all zeros
    with pytest.raises(ConfigError, match="method.clamp"):
        cdm_pooler.features([np.array([0.0, -np.inf])])


def test_binarize_rules():
    y, rule = cdm_pooler.binarize([0.1, 0.5, 0.7, 0.9])
    assert y.tolist() == [False, False, True, True] and "median" in rule
    y, _ = cdm_pooler.binarize([5, 5, 5, 4, 3])  # most share the top value: it is the positive class
    assert y.tolist() == [True, True, True, False, False]
    y, rule = cdm_pooler.binarize([0, 0, 0, 1])  # 0/1 labels stay as given (the median would be 0)
    assert y.tolist() == [False, False, False, True] and rule == "0/1 labels as given"
    assert cdm_pooler.binarize([1, 2, 3], threshold=2)[0].tolist() == [False, True, True]


def test_cross_validation_never_leaks_a_group_and_scores_each_item_once():
    seqs, labels, groups = synthetic()
    cv = cdm_pooler.cross_validate(seqs, labels, groups, folds=4, seed=3)
    assert len(cv.folds) == 4
    tested = np.concatenate([f.test for f in cv.folds])
    assert np.array_equal(np.sort(tested), np.arange(len(seqs)))  # every item scored exactly once
    for f in cv.folds:
        assert not set(f.train_groups) & set(f.test_groups)
        assert set(groups[f.train]).isdisjoint(groups[f.test])
        assert sorted(set(groups[f.test])) == f.test_groups and len(f.train) + len(f.test) == len(seqs)
        assert np.all(cv.fold_of[f.test] == f.index)
    assert sorted(g for f in cv.folds for g in f.test_groups) == sorted(set(groups))
    assert np.all(np.isfinite(cv.scores))
    # an item's score does not depend on its own group's labels: flip the labels of fold 0's
    # items and only the other folds' scores may move
    flipped = labels.copy()
    flipped[cv.folds[0].test] = 1 - flipped[cv.folds[0].test]
    again = cdm_pooler.cross_validate(seqs, flipped, groups, folds=4, seed=3)
    np.testing.assert_array_equal(again.scores[cv.folds[0].test], cv.scores[cv.folds[0].test])
    assert not np.array_equal(again.scores[cv.folds[1].test], cv.scores[cv.folds[1].test])


def test_items_without_a_label_are_scored_but_not_trained_on():
    seqs, labels, groups = synthetic()
    labels[::4] = np.nan
    cv = cdm_pooler.cross_validate(seqs, labels, groups, folds=3, seed=0)
    assert np.all(np.isfinite(cv.scores))
    for f in cv.folds:
        assert f.pooler.n_train == int(np.isfinite(labels[f.train]).sum()) < len(f.train)
    # the pooler of a fold is the one trained on its labelled training items only
    x = cdm_pooler.features(seqs)
    f = cv.folds[1]
    keep = f.train[np.isfinite(labels[f.train])]
    alone = cdm_pooler.fit(x[keep], labels[keep])
    np.testing.assert_array_equal(alone.decision(x[f.test]), cv.scores[f.test])


def test_cross_validation_is_deterministic_given_the_seed():
    seqs, labels, groups = synthetic()
    a = cdm_pooler.cross_validate(seqs, labels, groups, folds=5, seed=11)
    b = cdm_pooler.cross_validate(seqs, labels, groups, folds=5, seed=11)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert [f.test_groups for f in a.folds] == [f.test_groups for f in b.folds]
    c = cdm_pooler.cross_validate(seqs, labels, groups, folds=5, seed=12)
    assert [f.test_groups for f in a.folds] != [f.test_groups for f in c.folds]
    # the folds balance group counts (30 groups in 5 folds: 6 each)
    assert [len(f.test_groups) for f in a.folds] == [6] * 5


@pytest.mark.parametrize("objective", ["logistic", "ridge"])
def test_the_classifier_beats_chance_on_a_separable_set(objective):
    seqs, labels, groups = synthetic(n_groups=40, seed=1)
    cv = cdm_pooler.cross_validate(seqs, labels, groups, folds=5, seed=0, objective=objective)
    from scipy.stats import spearmanr

    assert spearmanr(cv.scores, labels)[0] > 0.6
    cut = 0.0 if objective == "logistic" else 0.5  # log-odds 0 / the midpoint of the 0/1 target
    accuracy = float(np.mean((cv.scores > cut) == (labels == 1)))
    assert accuracy > 0.85, accuracy  # chance: about 0.5


def test_train_pooler_on_positives_and_negatives():
    """The generative stage's entry point: one model from (sequences, 1/0 labels)."""
    seqs, labels, _ = synthetic(n_groups=20, seed=2)
    pooler = cdm_pooler.train_pooler(seqs, labels)
    assert pooler.rule == "0/1 labels as given" and pooler.n_positive == int(labels.sum())
    held_out, y, _ = synthetic(n_groups=10, seed=3)
    s = pooler.score(held_out)
    assert s[y == 1].mean() > s[y == 0].mean() + 1.0
    assert pooler.to_dict()["weights"].keys() == set(cdm_pooler.FEATURES)


def test_impossible_folds_are_clear_errors():
    seqs, labels, groups = synthetic(n_groups=3)
    with pytest.raises(ConfigError, match="4 folds need at least 4 groups"):
        cdm_pooler.cross_validate(seqs, labels, groups, folds=4)
    with pytest.raises(ConfigError, match="all positive"):
        cdm_pooler.cross_validate(seqs, np.ones(len(seqs)), groups, folds=3)


# --- end to end --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cdm_runs(tiny_dirs, tmp_path_factory, cscore_cli):
    """A two-point multirun (pooling mean, then max) and a classifier run, all on one fresh
    statistics cache; each run is a fresh process (statistics pass only through the cache)."""
    root = tmp_path_factory.mktemp("cdm")
    cache = root / "stats"
    res = cscore_cli("run", "-m", *tiny_args(tiny_dirs, "data=demo"), f"cache.dir={cache}", "method=cdm",
                     "method.pooling=mean,max", f"hydra.sweep.dir={root / 'sw'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    res = cscore_cli("run", *tiny_args(tiny_dirs, "data=demo"), f"cache.dir={cache}", "method=cdm_classifier",
                     f"hydra.run.dir={root / 'cls'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    return root


def cached_stats(cache_dir):
    from cscore.scorers.engine.stats import TokenStats
    from cscore.scorers.store.cache import StatsCache

    cache = StatsCache(cache_dir)
    out = {}
    for key in cache.keys():
        out.update(cache.load(key, TokenStats).stats)
    assert sorted(out) == ["amateur", "expert"]
    return out


def run_files(run):
    return (pd.read_parquet(run / "scores.parquet"), json.loads((run / "metrics.json").read_text()))


@pytest.mark.slow
def test_cli_cdm_writes_the_score_and_the_comparison_rows(cdm_runs):
    scores, metrics = run_files(cdm_runs / "sw" / "0")
    assert len(scores) == 160
    for col in ("score.cdm", "score.expert", "score.amateur", "score.ensemble"):
        assert col in scores.columns and np.isfinite(scores[col]).all(), col
    assert {c["metric"] for c in metrics["correlations"]} == {"expert", "amateur", "ensemble", "cdm"}
    params = {v["name"]: v["params"] for v in metrics["variants"]}
    assert params["cdm"]["pooling"] == "mean" and params["expert"]["norm"] == "mean"
    # mean-pooled momentum = mean log p_e - mean log p_a: the expert row minus the amateur row
    np.testing.assert_allclose(scores["score.cdm"], scores["score.expert"] - scores["score.amateur"], atol=1e-9)
    # exactly the method applied to the cached statistics
    stats = cached_stats(cdm_runs / "stats")
    np.testing.assert_array_equal(scores["score.cdm"], methods.score("cdm", stats, pooling="mean"))


@pytest.mark.slow
def test_cli_another_pooling_reads_the_statistics_cache(cdm_runs):
    first, m0 = run_files(cdm_runs / "sw" / "0")
    second, m1 = run_files(cdm_runs / "sw" / "1")
    assert not m0["speed"]["from_cache"] and m1["speed"]["from_cache"]  # no forward pass for max
    assert all(p["from_cache"] for p in m1["speed"]["passes"].values())
    stats = cached_stats(cdm_runs / "stats")
    np.testing.assert_array_equal(second["score.cdm"], methods.score("cdm", stats, pooling="max"))
    np.testing.assert_array_equal(second["score.expert"], methods.score("single", stats, norm="max"))
    assert (second["score.cdm"] >= first["score.cdm"]).all() and (second["score.cdm"] > first["score.cdm"]).any()


@pytest.mark.slow
def test_cli_classifier_cross_validates_over_groups(cdm_runs):
    run = cdm_runs / "cls"
    scores, metrics = run_files(run)
    assert metrics["speed"]["from_cache"]  # the same passes as the cdm runs
    folds = json.loads((run / "cdm_folds.json").read_text())
    assert (folds["k"], folds["seed"], folds["aspect"], folds["objective"]) == (5, 0, "overall", "logistic")
    assert len(folds["folds"]) == 5
    all_groups = set(scores["group"].astype(str))
    tested = [i for f in folds["folds"] for i in f["test_ids"]]
    assert sorted(tested) == sorted(scores["id"])  # every item scored once
    group_of = dict(zip(scores["id"], scores["group"].astype(str)))
    for f in folds["folds"]:
        assert not set(f["train_groups"]) & set(f["test_groups"])
        assert set(f["train_groups"]) | set(f["test_groups"]) == all_groups
        assert {group_of[i] for i in f["test_ids"]} == set(f["test_groups"])
        assert f["n_train"] + f["n_test"] == 160 and np.isfinite(f["spearman"])
    assert metrics["pooler"]["per_fold"]["spearman"] == [f["spearman"] for f in folds["folds"]]
    assert "cdm_classifier" in {c["metric"] for c in metrics["correlations"]}
    # the column is the cross-validation of the cached statistics' momentum, bit for bit
    stats = cached_stats(cdm_runs / "stats")
    sequences = per_item(methods.token_scores("cdm", stats), stats["expert"].offsets)
    cv = cdm_pooler.cross_validate(sequences, scores["human.overall"], scores["group"], folds=5, seed=0)
    np.testing.assert_array_equal(scores["score.cdm_classifier"], cv.scores)
