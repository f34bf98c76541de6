"""Quantized accuracy (metaeval/accuracy.py): the SummaC benchmark protocol against hand
computations and a plain loop, the top-k rule kept by name. No models: fast."""

import numpy as np
import pytest

from cscore.metaeval.accuracy import (
    PERCENTILES,
    accuracy,
    alternate_cut,
    balanced_accuracy,
    choose_threshold,
    summac_accuracy,
)
from cscore.metaeval.bias import quantized_accuracy

# rows in data order: even positions are the dev cut, odd ones the test cut
METRIC = [0.9, 0.8, 0.2, 0.5, 0.6, 0.3, 0.1, 0.55, 0.35, 0.25]
HUMAN = [5.0, 5.0, 3.0, 4.0, 5.0, 2.0, 1.0, 5.0, 4.67, 3.0]


def test_summac_protocol_hand_case():
    # dev: m 0.9 0.2 0.6 0.1 0.35, labels (human == 5) 1 0 1 0 0: any threshold in [0.35, 0.6) separates
    # them. Sorted dev scores 0.1 0.2 0.35 0.6 0.9; the percentile p lies at position p/100 * 4; the
    # last candidate below 0.6 (position 3) is p = 74.8 -> position 2.992 -> 0.35 + 0.992 * 0.25.
    res = summac_accuracy(METRIC, HUMAN)
    assert res["threshold"] == pytest.approx(0.35 + 0.992 * 0.25)
    assert res["dev_value"] == 1.0 and (res["n_dev"], res["n_test"]) == (5, 5)
    # test: m 0.8 0.5 0.3 0.55 0.25, labels 1 0 0 1 0; predicted (> 0.598) 1 0 0 0 0:
    # recall of the positives 1/2, of the negatives 3/3 -> balanced accuracy 0.75 (plain accuracy 0.8)
    assert res["value"] == pytest.approx((1 / 2 + 3 / 3) / 2)
    assert accuracy(METRIC, HUMAN)["value"] == res["value"]  # summac is the default protocol


def test_always_consistent_gets_half():
    human = np.array(HUMAN * 3)
    for constant in (1.0, 0.0):
        assert summac_accuracy(np.full(len(human), constant), human)["value"] == 0.5
    # the top-k rule rewards the majority class instead: with 70 % positives it reaches 0.7
    labels = np.r_[np.ones(7), np.zeros(3)]
    assert quantized_accuracy(np.ones(10), labels) == pytest.approx(0.7)
    assert accuracy(np.ones(10), labels, "topk")["value"] == pytest.approx(0.7)


def loop_threshold(scores, labels):
    """SummaC's threshold choice written out as a plain loop over the candidates."""
    best, best_t = -1.0, None
    for p in PERCENTILES:
        t = np.percentile(scores, p)
        pred = [s > t for s in scores]
        pos = [pr for pr, y in zip(pred, labels) if y]
        neg = [not pr for pr, y in zip(pred, labels) if not y]
        recalls = [sum(r) / len(r) for r in (pos, neg) if r]
        value = sum(recalls) / len(recalls)
        if value >= best:
            best, best_t = value, t
    return best_t, best


@pytest.mark.parametrize("seed", range(4))
def test_threshold_choice_equals_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    n = 41 + seed
    labels = rng.random(n) < 0.7
    scores = np.round(labels * 0.5 + rng.normal(size=n), 1)  # ties among the scores
    got = choose_threshold(scores, labels)
    want = loop_threshold(scores, labels)
    assert got[0] == pytest.approx(want[0]) and got[1] == pytest.approx(want[1])


def test_balanced_accuracy_is_the_mean_recall_of_the_classes_present():
    assert balanced_accuracy([1, 1, 0, 0, 0], [1, 0, 0, 0, 0]) == pytest.approx((1 + 3 / 4) / 2)
    assert balanced_accuracy([1, 0], [1, 1]) == 0.5  # one class present: its recall
    assert np.isnan(balanced_accuracy([], []))


def test_non_finite_rows_are_dropped_after_the_cut():
    metric = np.array(METRIC + [np.nan, 0.7])
    human = np.array(HUMAN + [5.0, 5.0])
    res = summac_accuracy(metric, human)  # the NaN row (position 10, dev) goes; 0.7 (position 11) is test
    assert (res["n_dev"], res["n_test"]) == (5, 6)
    assert res["value"] == pytest.approx((2 / 3 + 3 / 3) / 2)
    assert alternate_cut(4).tolist() == [True, False, True, False]


def test_unknown_protocol_is_an_error():
    with pytest.raises(ValueError, match="summac, topk"):
        accuracy(METRIC, HUMAN, "oracle")
