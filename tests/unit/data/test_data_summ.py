"""SummEval and QAGS-XSum loaders. Expected values come from shared/data/README.md ("verified counts")
or from reading the files here with the json module, never from the loaders themselves.

Tests on the real files skip when the shared data folder cannot be found, except under CI=true,
where that is a failure. Tests on small synthetic files always run."""

from __future__ import annotations

import json
import os
import pickle
import re
import statistics
import sys
import types

import pandas as pd
import pytest

from cscore.data import io, load_config, paths, qags_xsum, summeval
from cscore.data.schema import DataError

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
README_MEANS = {"coherence": 3.41, "consistency": 4.66, "fluency": 4.67, "relevance": 3.78}
README_SYSTEMS = {"M0", "M1", "M2", "M5", "M8", "M9", "M10", "M11", "M12", "M13", "M14", "M15", "M17", "M20",
                  "M22", "M23"}


def read_jsonl(file):
    with open(file, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_jsonl(file, records):
    file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return file


def fake_record(doc="d1", system="A", **kw):
    rec = {"doc_id": doc, "system": system, "source": "An article .", "reference": "Ref one .",
           "references": ["Ref one .", "Ref two ."], "hypothesis": "A summary .",
           "scores": {"coherence": 3.0, "consistency": 5.0, "fluency": 4.0, "relevance": 2.0}}
    rec.update(kw)
    return rec


def normalized(text):
    return re.sub(r"\s+", "", text.replace("``", '"').replace("''", '"')).lower()


# ----- SummEval on the real files -----

def test_summeval_counts_and_means(shared):
    expected = read_jsonl(shared / "summeval" / "summeval.jsonl")
    df, report = summeval.load()
    assert len(expected) == 1600 and len(df) == 1600 and report.n_read == 1600 and not report.dropped
    assert df["group"].nunique() == 100 and set(df["system"]) == README_SYSTEMS
    assert df.groupby("group")["system"].nunique().eq(16).all()
    assert sum(g.startswith("dm-test-") for g in df["group"].unique()) == 87
    assert sum(g.startswith("cnn-test-") for g in df["group"].unique()) == 13
    assert list(df["id"]) == [f"{r['doc_id']}/{r['system']}" for r in expected]
    assert list(df["group"]) == [r["doc_id"] for r in expected]
    assert list(df["hypothesis"]) == [r["hypothesis"] for r in expected]
    assert list(df["reference"]) == [r["references"][0] for r in expected]
    assert df["references"].map(len).eq(11).all() and (df["task"] == "summarization").all()
    assert df["lang_pair"].isna().all()
    for aspect in ASPECTS:
        values = df["human." + aspect]
        assert list(values) == [r["scores"][aspect] for r in expected]
        assert values.mean() == pytest.approx(statistics.fmean(r["scores"][aspect] for r in expected), abs=1e-12)
        assert round(values.mean(), 2) == README_MEANS[aspect]
        assert values.min() == 1.0 and values.max() == 5.0


def test_summeval_pickle_equals_jsonl(shared):
    from_jsonl, _ = summeval.load()
    from_pickle, report = summeval.load(str(shared / "summeval" / "data.pkl"))
    assert report.source_files == [str(shared / "summeval" / "data.pkl")] and report.n_read == 1600
    assert set(from_pickle["id"]) == set(from_jsonl["id"])
    a = from_jsonl.set_index("id").sort_index()
    b = from_pickle.set_index("id").sort_index()
    for col in ("group", "system", "source", "reference", "hypothesis", *("human." + x for x in ASPECTS)):
        assert (a[col] == b[col]).all(), col
    assert [list(r) for r in a["references"]] == [list(r) for r in b["references"]]


def test_summeval_parquet_path(shared, tmp_path):
    records = read_jsonl(shared / "summeval" / "summeval.jsonl")
    file = tmp_path / "summeval.parquet"
    pd.DataFrame(records).to_parquet(file)
    df, report = summeval.load(str(file))
    assert report.source_files == [str(file)] and len(df) == 1600
    assert list(df["id"]) == [f"{r['doc_id']}/{r['system']}" for r in records]
    assert [list(r) for r in df["references"]] == [r["references"] for r in records]
    for aspect in ASPECTS:
        assert list(df["human." + aspect]) == [r["scores"][aspect] for r in records]


def test_shared_folder_found_from_env_and_by_walking_up(tmp_path, monkeypatch):
    root = tmp_path / "ws" / "shared" / "data"
    (root / "summeval").mkdir(parents=True)
    write_jsonl(root / "summeval" / "summeval.jsonl", [fake_record()])
    (tmp_path / "ws" / "main" / "sub").mkdir(parents=True)
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path / "ws" / "main" / "sub")
    assert paths.shared_data_dir() == root
    monkeypatch.chdir(tmp_path)  # not below ws/: that folder is not found any more
    assert paths.shared_data_dir() != root
    monkeypatch.setenv(paths.ENV_VAR, str(root))
    df, report = summeval.load()
    assert list(df["id"]) == ["d1/A"] and report.source_files == [str(root / "summeval" / "summeval.jsonl")]


# ----- SummEval on synthetic files (always run) -----

def test_default_file_error_says_what_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path))
    with pytest.raises(DataError) as err:
        summeval.load()
    msg = str(err.value)
    assert "summeval/summeval.jsonl" in msg and str(tmp_path / "summeval" / "summeval.jsonl") in msg
    assert "data.path=" in msg and paths.ENV_VAR in msg
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(DataError, match="^default data file .*: point data.path=.*is not a folder"):  # the fix first
        qags_xsum.load()


def test_malformed_jsonl_line_names_the_line(tmp_path):
    file = tmp_path / "s.jsonl"
    file.write_text(json.dumps(fake_record()) + "\n{not json\n")
    with pytest.raises(DataError, match=re.escape(f"{file}:2:2: not valid JSON: Expecting property name")):
        summeval.load(str(file))
    write_jsonl(file, [fake_record(), {k: v for k, v in fake_record("d2").items() if k != "hypothesis"}])
    with pytest.raises(DataError, match=re.escape(f"{file}:2: missing field 'hypothesis'")):
        summeval.load(str(file))


@pytest.mark.parametrize(
    "scores,message",
    [
        ({"coherence": 3.0, "consistency": 5.0, "fluency": 4.0}, "missing score field 'scores.relevance'"),
        (
            {"coherence": 3.0, "consistency": None, "fluency": 4.0, "relevance": 1.0},
            "missing score field 'scores.consistency'",
        ),
        (
            {"coherence": "high", "consistency": 5.0, "fluency": 4.0, "relevance": 1.0},
            "'scores.coherence' is not a finite number",
        ),
        (
            {"coherence": True, "consistency": 5.0, "fluency": 4.0, "relevance": 1.0},
            "'scores.coherence' is not a finite number",
        ),
    ],
)
def test_missing_or_bad_score_names_the_field(tmp_path, scores, message):
    file = write_jsonl(tmp_path / "s.jsonl", [fake_record(), fake_record("d2"), fake_record("d3", scores=scores)])
    with pytest.raises(DataError, match=re.escape(f"{file}:3: ") + ".*" + re.escape(message)):
        summeval.load(str(file))


def test_pickle_errors_name_the_doc_key_and_field(tmp_path):
    good = {"src": "An article .", "ref_summ": "R .", "ref_summs": ["R ."],
            "sys_summs": {"M1": {"sys_summ": "S .", "scores": dict(fake_record()["scores"])}}}
    bad = json.loads(json.dumps(good))
    del bad["sys_summs"]["M1"]["scores"]["fluency"]
    file = tmp_path / "data.pkl"
    file.write_bytes(pickle.dumps({"doc-a": good, "doc-b": bad}, protocol=3))
    with pytest.raises(
        DataError, match=re.escape(f"{file}: doc 'doc-b' system 'M1': missing score field 'scores.fluency'")
    ):
        summeval.load(str(file))
    file.write_bytes(pickle.dumps({"doc-a": good, "doc-b": {**good, "src": 7}}, protocol=3))
    with pytest.raises(DataError, match=re.escape("doc 'doc-b' system 'M1': field 'src' is not a string")):
        summeval.load(str(file))
    file.write_bytes(pickle.dumps({"doc-a": good}, protocol=3))
    df, _ = summeval.load(str(file))
    assert list(df["id"]) == ["doc-a/M1"] and df.loc[0, "reference"] == "R ."


def test_empty_hypothesis_is_dropped_and_counted(tmp_path):
    file = write_jsonl(tmp_path / "s.jsonl", [fake_record(), fake_record("d2", hypothesis="  "), fake_record("d3")])
    df, report = summeval.load(str(file))
    assert list(df["id"]) == ["d1/A", "d3/A"] and report.n_read == 3
    assert report.summary()["dropped_by_reason"] == {"empty hypothesis": 1}


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("loader", [summeval.load, qags_xsum.load])
def test_restricted_unpickler_refuses_a_malicious_pickle(tmp_path, loader):
    marker = tmp_path / "ran"
    file = tmp_path / "data.pkl"
    file.write_bytes(pickle.dumps({"doc": Evil(marker)}))
    with pytest.raises(DataError) as err:
        loader(str(file))
    assert str(file) in str(err.value) and f"{os.system.__module__}.system" in str(err.value)
    assert "refused to unpickle" in str(err.value)
    assert not marker.exists()


def test_hub_path_uses_the_same_conversion(tmp_path, monkeypatch):
    records = [fake_record("d1"), fake_record("d1", "B", hypothesis=""), fake_record("d2")]
    calls = []

    def load_dataset(hub_id, split=None):
        calls.append((hub_id, split))
        return {"test": records} if split is None else records

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    df, report = summeval.load(None, summeval.SummevalOptions(hub_id="someone/summeval", hub_split="test"))
    assert calls == [("someone/summeval", "test")] and report.source_files == ["hub:someone/summeval[test]"]
    assert list(df["id"]) == ["d1/A", "d2/A"] and report.summary()["dropped_by_reason"] == {"empty hypothesis": 1}
    # one split: taken without naming it
    df2, report2 = summeval.load(None, summeval.SummevalOptions(hub_id="someone/summeval"))
    assert df2.equals(df) and report2.source_files == ["hub:someone/summeval[test]"]
    records[2] = fake_record("d2", scores={"coherence": 1.0})
    with pytest.raises(DataError, match=re.escape("hub:someone/summeval[test]: row 2: missing score field")):
        summeval.load(None, summeval.SummevalOptions(hub_id="someone/summeval", hub_split="test"))


def test_hub_path_without_datasets_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(DataError, match="pip install datasets"):
        summeval.load(None, summeval.SummevalOptions(hub_id="someone/summeval"))


def test_unknown_option_is_an_error():
    with pytest.raises(DataError, match="unknown option"):
        load_config({"name": "summeval", "hub_idd": "x"})
    with pytest.raises(DataError, match="unknown option"):
        load_config({"name": "qags_xsum", "hub_id": "x"})


# ----- QAGS-XSum -----

def majority_fact(rec):
    """Independent statement of the rule: mean over sentences of (yes-votes > half)."""
    votes = [sum(r["response"] == "yes" for r in s["responses"]) > len(s["responses"]) / 2
             for s in rec["summary_sentences"]]
    return sum(votes) / len(votes)


def test_qags_counts_from_the_crowd_file(shared):
    crowd = read_jsonl(shared / "qags_xsum" / "mturk_xsum.jsonl")
    responses = [r["response"] for rec in crowd for s in rec["summary_sentences"] for r in s["responses"]]
    assert len(crowd) == 239 and len(responses) == 717 and responses.count("yes") == 348  # README counts
    df, report = qags_xsum.load()
    assert report.source_files == [str(shared / "qags_xsum" / "mturk_xsum.jsonl")] and not report.dropped
    assert len(df) == 239 and df["group"].nunique() == 239 and set(df["system"]) == {"bart-xsum"}
    assert list(df["human.fact"]) == [majority_fact(rec) for rec in crowd]
    assert (df["human.fact"] == 1.0).sum() == 116 and (df["human.fact"] == 0.0).sum() == 123  # README
    assert list(df["source"]) == [rec["article"] for rec in crowd]
    assert df["reference"].isna().all() and list(df["doc_index"]) == list(range(239))


def test_qags_crowd_majority_agrees_with_the_pickle(shared):
    crowd = read_jsonl(shared / "qags_xsum" / "mturk_xsum.jsonl")
    with open(shared / "qags_xsum" / "data.pkl", "rb") as fh:
        raw = io.RefusingUnpickler(fh, "data.pkl").load()
    assert [majority_fact(rec) for rec in crowd] == [raw[i]["sys_summs"][0]["scores"]["fact"] for i in range(239)]
    a, _ = qags_xsum.load()
    b, _ = qags_xsum.load(None, qags_xsum.QagsOptions(source_file="data.pkl"))
    assert list(a["id"]) == list(b["id"]) and list(a["group"]) == list(b["group"])  # group hash agrees across files
    assert list(a["human.fact"]) == list(b["human.fact"])
    assert [normalized(x) for x in a["hypothesis"]] == [normalized(x) for x in b["hypothesis"]]
    assert [normalized(x) for x in a["source"]] == [normalized(x) for x in b["source"]]
    assert list(b["source"]) == [raw[i]["src"] for i in range(239)]


def test_qags_pickle_equals_jsonl_conversion(shared):
    conv = read_jsonl(shared / "qags_xsum" / "qags_xsum.jsonl")
    a, _ = qags_xsum.load(str(shared / "qags_xsum" / "data.pkl"))
    b, _ = qags_xsum.load(str(shared / "qags_xsum" / "qags_xsum.jsonl"))
    assert a.equals(b)
    assert list(b["hypothesis"]) == [r["hypothesis"] for r in conv]
    assert list(b["human.fact"]) == [r["scores"]["fact"] for r in conv]
    assert list(b["doc_index"]) == [int(r["doc_id"]) for r in conv]


def test_qags_bad_crowd_answer_names_line_and_field(tmp_path):
    def rec(answers, article="An article."):
        return {"article": article, "summary_sentences": [
            {"sentence": "A summary.", "responses": [{"worker_id": i, "response": a} for i, a in enumerate(answers)]}]}

    file = write_jsonl(tmp_path / "mturk_xsum.jsonl", [rec(["yes", "yes", "no"]), rec(["no", "maybe", "no"], "B.")])
    with pytest.raises(DataError, match=re.escape(f"{file}:2: summary_sentences[0]: field 'responses[1].response'")):
        qags_xsum.load(str(file))
    write_jsonl(file, [rec(["yes", "yes", "no"]), rec(["no", "yes"], "B."), rec(["no", "no", "yes"], "C.")])
    df, _ = qags_xsum.load(str(file))
    assert list(df["human.fact"]) == [1.0, 0.0, 0.0]  # a tie is not a majority
