"""Quantized accuracy (metaeval/accuracy.py): the SummaC benchmark protocol against hand
computations and a plain loop, the top-k rule kept by name. No models: fast."""

from itertools import product

import numpy as np
import pytest

from cscore.metaeval.accuracy import (
    PERCENTILES,
    accuracy,
    alternate_cut,
    balanced_accuracy,
    choose_threshold,
    label_rule,
    majority_from_mean,
    majority_top,
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


# ----- SummaC's labels: the majority of the experts gave the top score -----

def test_majority_top_by_hand():
    ratings = [[5, 5, 4], [5, 4, 4], [5, 5, 5], [3, 5, 5], [4, 4, 4], [5, np.nan, 4], [5, 5, np.nan]]
    # fives: 2 of 3, 1 of 3, 3 of 3, 2 of 3, 0; one rater missing: 1 of 2 (not more than half), 2 of 2
    assert majority_top(ratings, 5).tolist() == [True, False, True, True, False, False, True]


def brute_force(total: int):
    """(every triple of ratings 1-5 with this sum has two 5s, some triple has) by enumeration."""
    votes = [sum(r == 5 for r in t) >= 2 for t in product(range(1, 6), repeat=3) if sum(t) == total]
    return all(votes), any(votes)


def test_majority_from_the_mean_equals_an_enumeration_of_the_ratings():
    means = np.arange(3, 16) / 3
    labels, undecided = majority_from_mean(means, 3, 1, 5)
    for total, lab, und in zip(range(3, 16), labels, undecided):
        always, sometimes = brute_force(total)
        assert (lab, und) == (always, sometimes and not always), total
    assert [t for t, u in zip(range(3, 16), undecided) if u] == [11, 12, 13]  # 5,5,1 / 5,4,2 ... 5,5,3 / 5,4,4
    assert [t for t, lab in zip(range(3, 16), labels) if lab] == [14, 15]


def test_summac_labels_on_the_shared_summeval_file(shared):
    """On the real file (means only): positives = the summaries whose three ratings sum to 14 or 15
    (counted here from the file by hand), undecided = sums 11-13; the old rule (mean = 5) had fewer."""
    import pandas as pd

    from cscore.data import summeval

    path = shared / "summeval" / "summeval.jsonl"
    frame, _ = summeval.load(str(path))
    for aspect in summeval.ASPECTS:
        sums = np.rint(frame[f"human.{aspect}"].to_numpy() * 3).astype(int)
        labels, rule = label_rule(frame, f"human.{aspect}", "summeval")
        assert labels.tolist() == (sums >= 14).tolist()
        assert rule["n_undecided"] == int(((sums >= 11) & (sums <= 13)).sum())
    sums = pd.Series(np.rint(frame["human.consistency"].to_numpy() * 3).astype(int)).value_counts()
    assert (sums[15], sums[14], sums[13] + sums[12] + sums[11]) == (1306, 81, 59)  # was 1306 positives
    assert label_rule(frame, "human.consistency", "demo")[0] is None  # other data: the top score present


def test_per_expert_ratings_are_loaded_and_decide_the_labels(tmp_path):
    import json

    from cscore.data import summeval
    from cscore.errors import DataError

    def record(i, consistency):
        scores = {"coherence": 3.0, "consistency": float(np.mean(consistency)), "fluency": 3.0, "relevance": 3.0}
        return {"doc_id": f"d{i}", "system": "M0", "source": "an article", "reference": "a reference",
                "references": ["a reference"], "hypothesis": f"summary {i}", "scores": scores,
                "expert_scores": {"consistency": consistency}}

    # 5,5,3 and 5,4,4 share the mean 13/3: only the ratings tell them apart
    recs = [record(0, [5, 5, 3]), record(1, [5, 4, 4]), record(2, [5, 5, 5]), record(3, [2, 5, 5])]
    path = tmp_path / "rated.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    frame, _ = summeval.load(str(path))
    assert frame["experts.consistency"].tolist() == [[5, 5, 3], [5, 4, 4], [5, 5, 5], [2, 5, 5]]
    assert frame["experts.coherence"].isna().all()
    labels, rule = label_rule(frame, "human.consistency", "summeval")
    assert labels.tolist() == [True, False, True, True] and rule["labels"] == "majority of the raters gave 5"
    # the coherence column holds no ratings: those rows are not a majority
    assert label_rule(frame, "human.coherence", "summeval")[0].tolist() == [False] * 4
    metric = [0.9, 0.8, 0.7, 0.2]
    res = summac_accuracy(metric, frame["human.consistency"], labels=labels)
    assert res == summac_accuracy(metric, labels.astype(float))  # 0/1 human scores: the top score is the label
    assert res != summac_accuracy(metric, frame["human.consistency"])  # the old rule: only 5,5,5 positive
    path.write_text(json.dumps({**recs[0], "expert_scores": {"consistency": [5, 5, 5]}}) + "\n")
    with pytest.raises(DataError, match="is not scores.consistency"):
        summeval.load(str(path))


def test_the_report_table_uses_the_summac_labels_for_summeval_only():
    """side_tables.quantized: SummEval's rows get the majority labels (mean 14/3 is positive), other data
    the top score present; the long table says which rule and how many rows it could not decide."""
    from types import SimpleNamespace

    import pandas as pd

    from cscore.metaeval import side_tables, tables

    rng = np.random.default_rng(0)
    human = rng.choice([5.0, 14 / 3, 13 / 3, 3.0], size=40)
    metric = human + rng.normal(scale=0.5, size=40)
    frame = pd.DataFrame({"id": [str(i) for i in range(40)], "human.consistency": human, "score.m": metric})
    for name, labels in (("summeval", human >= 14 / 3 - 1e-9), ("demo", human == 5.0)):
        run = SimpleNamespace(config={"data": {"name": name}})
        ds = tables.Dataset("k", frame, ["human.consistency"], None, {"m": {"run": run, "variant": "m"}})
        cell = side_tables.quantized(ds).iloc[0]
        assert cell["value"] == summac_accuracy(metric, labels.astype(float))["value"]
        assert cell["labels"] == ("majority of 3 gave 5, certain from the mean" if name == "summeval" else "top score")
        if name == "summeval":
            assert cell["n_undecided"] == int(np.isclose(human, 13 / 3).sum())
        assert "labels" not in side_tables.quantized(ds, "topk").columns


def test_summevals_original_annotation_file_gives_each_experts_rating(tmp_path):
    """Issue 39, item 10a: ``data.annotations`` = SummEval's model_annotations.aligned.jsonl layout
    (a tiny file built here: ``id``, ``model_id``, ``expert_annotations`` one dict per expert) joins
    each expert's rating onto the rows; the labels are then SummaC's majority, not the mean's guess."""
    import json

    from cscore.data import summeval
    from cscore.errors import DataError

    experts = {("d0", "M0"): [5, 5, 3], ("d0", "M1"): [5, 4, 4], ("d1", "M0"): [5, 5, 5], ("d1", "M1"): [2, 5, 5]}
    rows, notes = [], []
    for (doc, system), cons in experts.items():
        scores = {"coherence": 3.0, "consistency": sum(cons) / 3, "fluency": 4.0, "relevance": 3.0}
        rows.append({"doc_id": doc, "system": system, "source": "an article", "reference": "a reference",
                     "hypothesis": f"summary of {doc} by {system}", "scores": scores})
        notes.append({"id": doc, "model_id": system, "decoded": "...", "references": ["a reference"],
                      "turker_annotations": [],
                      "expert_annotations": [{"coherence": 3, "consistency": c, "fluency": f, "relevance": 3}
                                             for c, f in zip(cons, (4, 4, 4))]})
    data, ann = tmp_path / "summeval.jsonl", tmp_path / "model_annotations.aligned.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ann.write_text("".join(json.dumps(n) + "\n" for n in reversed(notes)))  # another order: joined by key
    frame, _ = summeval.load(str(data), summeval.SummevalOptions(annotations=str(ann)))
    assert frame["experts.consistency"].tolist() == [[5, 5, 3], [5, 4, 4], [5, 5, 5], [2, 5, 5]]
    assert frame["experts.fluency"].tolist() == [[4, 4, 4]] * 4
    labels, rule = label_rule(frame, "human.consistency", "summeval")
    assert labels.tolist() == [True, False, True, True] and rule == {"labels": "majority of the raters gave 5"}
    mean_only, _ = summeval.load(str(data))
    guess, rule = label_rule(mean_only, "human.consistency", "summeval")
    assert guess.tolist() == [False, False, True, False] and rule["n_undecided"] == 3  # 13/3, 13/3, 4: undecided
    ann.write_text("".join(json.dumps(n) + "\n" for n in notes[1:]))
    with pytest.raises(DataError, match="data.annotations has no summary of document 'd0' by system 'M0'"):
        summeval.load(str(data), summeval.SummevalOptions(annotations=str(ann)))
    notes[0]["expert_annotations"][0]["consistency"] = 1  # 1,5,3: not the file's mean 13/3
    ann.write_text("".join(json.dumps(n) + "\n" for n in notes))
    with pytest.raises(DataError, match="is not scores.consistency"):
        summeval.load(str(data), summeval.SummevalOptions(annotations=str(ann)))


def test_the_summac_title_says_when_the_labels_are_an_approximation_from_the_mean(tmp_path):
    """The table titled "SummaC protocol" says its SummEval labels come from the experts' mean and how
    many summaries that cannot decide (counted negative); with the ratings (or other data) it does not."""
    from types import SimpleNamespace

    import pandas as pd

    from cscore.metaeval import sections, tables

    human = np.array([5.0, 14 / 3, 13 / 3, 13 / 3, 4.0, 3.0, 11 / 3, 5.0])
    frame = pd.DataFrame({"id": [str(i) for i in range(8)], "human.consistency": human,
                          "human.coherence": np.full(8, 3.0), "score.m": np.arange(8.0)})
    for name in ("summeval", "demo"):
        run = SimpleNamespace(config={"data": {"name": name}})
        ds = tables.Dataset("k", frame, ["human.consistency", "human.coherence"], None,
                            {"m": {"run": run, "variant": "m"}})
        sections.quantized_section(ds, name, tmp_path)
        title = (tmp_path / f"{name}_quantized_accuracy.md").read_text().splitlines()[0]
        if name == "summeval":
            assert "SummaC protocol" in title and "labels approximated from the mean of the experts' ratings" in title
            assert "counted negative: consistency 4, coherence 0;" in title  # 13/3, 13/3, 4, 11/3
            assert "data.annotations=<SummEval's model_annotations.aligned.jsonl>" in title
        else:
            assert "SummaC protocol" in title and "approximated" not in title


def test_the_annotations_file_through_the_cli(tmp_path, cscore_main):
    """``cscore data export data=summeval data.annotations=<file>`` writes each expert's ratings;
    a missing annotations file is refused before anything is read (one line, exit 2)."""
    import json

    row = {"doc_id": "d0", "system": "M0", "source": "an article", "reference": "a reference",
           "hypothesis": "a summary", "scores": {"coherence": 3.0, "consistency": 13 / 3, "fluency": 4.0,
                                                 "relevance": 3.0}}
    note = {"id": "d0", "model_id": "M0", "expert_annotations": [
        {"coherence": 3, "consistency": c, "fluency": 4, "relevance": 3} for c in (5, 5, 3)]}
    (tmp_path / "s.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "a.jsonl").write_text(json.dumps(note) + "\n")
    out = tmp_path / "x.jsonl"
    res = cscore_main("data", "export", "data=summeval", f"data.path={tmp_path / 's.jsonl'}",
                      f"data.annotations={tmp_path / 'a.jsonl'}", f"out={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text().splitlines()[0])["experts.consistency"] == [5, 5, 3]
    res = cscore_main("run", "data=summeval", f"data.path={tmp_path / 's.jsonl'}",
                      f"data.annotations={tmp_path / 'none.jsonl'}", cwd=tmp_path)
    assert res.returncode == 2 and not (tmp_path / "outputs").exists()
    assert res.stderr.strip().splitlines() == [
        f"cscore: error: data.annotations={tmp_path / 'none.jsonl'}: no such file (SummEval's "
        "model_annotations.aligned.jsonl)"]
