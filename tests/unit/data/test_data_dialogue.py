"""FED and DSTC9 loaders (data/fed.py, data/dstc9.py). Expected values come from shared/data/README.md
(sections 4 and 5, "verified counts"), from annotations read by hand (item indices given), or
from reading the files here with the json module, never from the loaders themselves.

Tests on the real files skip when the shared data folder cannot be found, except under CI=true,
where that is a failure. Tests on small synthetic files always run."""

from __future__ import annotations

import json
import math

import pytest

from cscore.data import dstc9, fed
from cscore.data.schema import DataError

TURN_ASPECTS = {"interesting", "engaging", "specific", "relevant", "correct", "semantically_appropriate",
                "understandable", "fluent", "overall"}
DIALOG_ASPECTS = {"coherent", "error_recovery", "consistent", "diverse", "depth", "likeable", "understanding",
                  "flexible", "informative", "inquisitive", "overall"}


@pytest.fixture(scope="module")
def fed_file(shared):
    return shared / "fed" / "fed_data.json"


@pytest.fixture(scope="module")
def fed_loaded(fed_file):
    return fed.load(str(fed_file))


def aspects(df):
    return {c.removeprefix("human.") for c in df.columns if c.startswith("human.")}


def reasons(report, prefix):
    return sum(n for r, n in report.summary()["ignored_by_reason"].items() if r.startswith(prefix))


# ----- FED -----

def test_fed_counts_and_aspects(fed_loaded, fed_file):
    df, report = fed_loaded
    assert len(df) == 500 and report.n_read == 500
    assert df["level"].value_counts().to_dict() == {"turn": 375, "dialog": 125}  # README 4
    counts = df.groupby(["level", "system"]).size().to_dict()
    assert counts == {("turn", "Mitsuku"): 132, ("turn", "Human"): 123, ("turn", "Meena"): 120,
                      ("dialog", "Mitsuku"): 44, ("dialog", "Human"): 41, ("dialog", "Meena"): 40}
    assert aspects(df) == TURN_ASPECTS | DIALOG_ASPECTS and set(df["task"]) == {"dialogue"}
    assert df["reference"].isna().all() and df["lang_pair"].isna().all()
    # 125 conversations: 3 turn items + 1 dialog item each (README: ordered in blocks of 4)
    assert df["group"].nunique() == 125 and (df.groupby("group")["level"].apply(sorted).map(tuple) ==
                                             ("dialog", "turn", "turn", "turn")).all()
    turn, _ = fed.load(str(fed_file), fed.FedOptions(level="turn"))
    dialog, _ = fed.load(str(fed_file), fed.FedOptions(level="dialog"))
    assert (len(turn), len(dialog)) == (375, 125)
    assert aspects(turn) == TURN_ASPECTS and aspects(dialog) == DIALOG_ASPECTS


def test_fed_na_annotations_are_counted(fed_loaded):
    _, report = fed_loaded
    # README 4: N/A strings: 12 at turn level, 155 at dialog level; one dialog has all 5
    # Error recovery answers N/A
    assert reasons(report, "annotation N/A ignored") == 12 + 155
    assert reasons(report, "annotation N/A ignored: error_recovery") == 154
    assert reasons(report, "annotation N/A ignored: flexible") == 1
    assert report.summary()["ignored_by_reason"]["no numeric annotation (human.error_recovery = NaN)"] == 1
    assert report.dropped == []  # N/A ratings are left out of means; no row is dropped


def test_fed_hand_checked_averages(fed_loaded):
    got = fed_loaded[0].set_index("id")
    # item 0 (turn): Interesting [2,1,1,1,1], Overall [2,1,3,3,4]
    assert got.loc["fed/turn/0", "human.interesting"] == pytest.approx(6 / 5)
    assert got.loc["fed/turn/0", "human.overall"] == pytest.approx(13 / 5)
    assert math.isnan(got.loc["fed/turn/0", "human.coherent"])  # a dialog-level aspect
    # item 10 (turn): Correct [2, 2, "N/A (...)", 1, 2] -> mean of the four numbers
    assert got.loc["fed/turn/10", "human.correct"] == pytest.approx(7 / 4)
    # item 457 (turn): Specific ["N/A ...", 0, 0, 2, "N/A ..."]
    assert got.loc["fed/turn/457", "human.specific"] == pytest.approx(2 / 3)
    # item 3 (dialog): Error recovery ["N/A ...", 1, 1, "N/A ...", 2], Overall [3,1,2,3,4]
    assert got.loc["fed/dialog/3", "human.error_recovery"] == pytest.approx(4 / 3)
    assert got.loc["fed/dialog/3", "human.overall"] == pytest.approx(13 / 5)
    # item 399 (dialog): all five Error recovery answers N/A -> NaN, row kept; Overall [3,4,4,4,4]
    assert math.isnan(got.loc["fed/dialog/399", "human.error_recovery"])
    assert got.loc["fed/dialog/399", "human.overall"] == pytest.approx(19 / 5)


def test_fed_texts(fed_loaded, fed_file):
    got = fed_loaded[0].set_index("id")
    items = json.loads(fed_file.read_text(encoding="utf-8"))
    assert got.loc["fed/turn/0", "source"] == items[0]["context"]
    assert got.loc["fed/turn/0", "hypothesis"] == "It's probably boring, isn't it?"  # "System: " removed
    assert got.loc["fed/turn/0", "system"] == items[0]["system"]
    # dialog item 3: split at its last System line; the closing User line is in neither field
    lines = items[3]["context"].split("\n")
    assert lines[-2] == "System: What can you tell me?" and lines[-1].startswith("User: ")
    assert got.loc["fed/dialog/3", "hypothesis"] == "What can you tell me?"
    assert got.loc["fed/dialog/3", "source"] == "\n".join(lines[:-2])
    assert not got["hypothesis"].str.startswith("System:").any()


def test_fed_malformed(tmp_path):
    f = tmp_path / "fed.json"
    f.write_text(json.dumps([{"context": "User: hi", "system": "Meena"}]))
    with pytest.raises(DataError, match=r"fed\.json: item 0: missing field 'annotations'"):
        fed.load(str(f))
    f.write_text("[{")
    with pytest.raises(DataError, match=r"fed\.json:1:3: not valid JSON: .*: line 1 column 3 \(the text ends "
                                        r"there: is it truncated\?\)"):
        fed.load(str(f))
    with pytest.raises(DataError, match="data.level=turns is not a FED level; use data.level=turn, dialog or both"):
        fed.load(str(f), fed.FedOptions(level="turns"))


def test_fed_synthetic_odd_values(tmp_path):
    items = [{"context": "User: hi", "response": "System: hello", "system": "S",
              "annotations": {"Semantically appropriate": [2, None, True, "N/A (x)", 1], "Overall": [1, 2]}},
             {"context": "User: hi\nSystem: hello\nUser: bye", "system": "S",
              "annotations": {"Overall": ["N/A (y)"]}}]
    f = tmp_path / "fed.json"
    f.write_text(json.dumps(items))
    df, report = fed.load(str(f))
    got = df.set_index("id")
    assert got.loc["fed/turn/0", "human.semantically_appropriate"] == 1.5
    assert math.isnan(got.loc["fed/dialog/1", "human.overall"])
    assert got.loc["fed/dialog/1", "hypothesis"] == "hello" and got.loc["fed/dialog/1", "source"] == "User: hi"
    assert set(df["group"]) == {"fed/conv0"}
    assert report.summary()["ignored_by_reason"] == {
        "annotation non-numeric ignored: semantically_appropriate": 2,
        "annotation N/A ignored: semantically_appropriate": 1, "annotation N/A ignored: overall": 1,
        "no numeric annotation (human.overall = NaN)": 1}


# ----- DSTC9 -----

def test_dstc9(shared):
    file = shared / "dstc9" / "dstc9_data.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    df, report = dstc9.load(str(file))
    empty = [i for i, r in enumerate(data["responses"]) if not r.strip()]
    assert report.n_read == 2200 and len(empty) == 51  # README 5: 2200 dialogs, 51 empty responses
    assert len(df) == 2200 - 51 and report.summary()["dropped_by_reason"] == {"empty hypothesis": 51}
    assert sorted(d["id"] for d in report.dropped) == sorted(f"dstc9/{i}" for i in empty)
    got = df.set_index("id")
    # index 0: the first dialog, rated 4.0; its first turns are "Howdy", "hi ya'll"
    assert got.loc["dstc9/0", "human.overall"] == 4.0
    assert got.loc["dstc9/0", "source"].startswith("Howdy\nhi ya'll\n")
    assert got.loc["dstc9/0", "hypothesis"] == "I hope you programming is better than your grammar."
    assert got.loc["dstc9/0", "source"] == "\n".join(data["contexts"][0])
    assert df["reference"].isna().all() and set(df["task"]) == {"dialogue"}
    kept = [s for i, s in enumerate(data["scores"]) if i not in set(empty)]
    assert df["human.overall"].mean() == pytest.approx(sum(kept) / len(kept))
    assert df["human.overall"].min() == pytest.approx(4 / 3) and df["human.overall"].max() == 5.0


def test_dstc9_malformed(tmp_path):
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"contexts": [["a"]], "responses": ["b", "c"], "scores": [1.0]}))
    with pytest.raises(DataError, match="differ in length"):
        dstc9.load(str(f))
    f.write_text(json.dumps({"contexts": [["a"], ["x"]], "responses": ["b", "c"], "scores": [None, 3],
                             "references": ["NO REF", "a ref"]}))
    df, report = dstc9.load(str(f))
    assert list(df["id"]) == ["dstc9/1"] and df["reference"].tolist() == ["a ref"]
    assert report.summary()["dropped_by_reason"] == {"missing score": 1}
    f.write_text(json.dumps({"contexts": [["a"]], "responses": ["b"], "scores": ["high"]}))
    with pytest.raises(DataError, match=r"index 0: scores\[0\] is not a number"):
        dstc9.load(str(f))


def test_aspect_names():
    assert fed.aspect_name("Semantically appropriate") == "semantically_appropriate"
    assert fed.aspect_name("Error recovery") == "error_recovery"
    assert fed.aspect_name(" Overall ") == "overall"
