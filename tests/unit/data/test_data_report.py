"""LoadReport: rows excluded on purpose vs dropped, by reason and row by row (data/schema.py)."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from cscore.data import mqm
from cscore.data.schema import LoadReport
from cscore.tests.support.cli import read_run, tiny_args


def filled_report() -> LoadReport:
    report = LoadReport("x", ["f.tsv"], n_read=10)
    for i in range(3):
        report.exclude(f"ref/{i}", "human reference excluded (data.exclude_references=true)", f"f.tsv line {i}")
    report.drop("a", "empty hypothesis", "f.tsv line 7")
    report.drop("b", "inconsistent target text")
    report.drop("c", "empty hypothesis")
    report.ignore("d", "missing human score: q")
    return report


def test_reasons_count_each_kind_and_reason():
    report = filled_report()
    assert report.reasons() == [
        {"kind": "excluded", "reason": "human reference excluded (data.exclude_references=true)", "count": 3},
        {"kind": "dropped", "reason": "empty hypothesis", "count": 2},
        {"kind": "dropped", "reason": "inconsistent target text", "count": 1},
        {"kind": "ignored", "reason": "missing human score: q", "count": 1},
    ]
    assert report.left_out == 6


def test_one_console_line_per_reason_info_only_for_exclusions():
    assert filled_report().console_lines() == [
        (logging.INFO, "x: excluded 3 rows: human reference excluded (data.exclude_references=true)"),
        (logging.WARNING, "x: dropped 2 rows: empty hypothesis"),
        (logging.WARNING, "x: dropped 1 row: inconsistent target text"),
        (logging.WARNING, "x: ignored 1 value: missing human score: q"),
    ]


def test_details_and_summary_keep_every_row():
    report = filled_report()
    details = report.details()
    assert len(details) == 7 and details[0] == {"kind": "excluded", "id": "ref/0",
                                                "reason": "human reference excluded (data.exclude_references=true)",
                                                "where": "f.tsv line 0"}
    assert details[3] == {"kind": "dropped", "id": "a", "reason": "empty hypothesis", "where": "f.tsv line 7"}
    summary = report.summary()
    assert summary == {"dataset": "x", "files": ["f.tsv"], "read": 10, "excluded": 3,
                       "excluded_by_reason": {"human reference excluded (data.exclude_references=true)": 3},
                       "dropped": 3, "dropped_by_reason": {"empty hypothesis": 2, "inconsistent target text": 1},
                       "ignored_values": 1, "ignored_by_reason": {"missing human score: q": 1},
                       "human_references_scored": 0, "human_references_by_system": {}}
    assert report.summary(details=True) == {**summary, "details": details}


def test_merge_adds_everything():
    a, b = filled_report(), filled_report()
    a.merge(b)
    assert a.n_read == 20 and a.source_files == ["f.tsv", "f.tsv"] and a.left_out == 12 and len(a.ignored) == 2


def test_mqm_exclusions_are_deliberate_and_inconsistent_rows_dropped(tmp_path):
    rows = [("S1", "A text."), ("refA", "The reference."), ("refB", "Another reference."), ("S2", "One."),
            ("S2", "Two.")]
    text = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n" + "".join(
        f"{s}\td1\t1\t1\tr{i}\tQuelle.\t{t}\tNo-error\tNo-error\n" for i, (s, t) in enumerate(rows))
    file = tmp_path / "mqm_ted_zhen.tsv"
    file.write_text(text, encoding="utf-8")
    df, report = mqm.load(str(file), exclude_references=True)
    assert list(df["system"]) == ["S1"] and report.n_read == len(df) + report.left_out
    assert report.console_lines() == [
        (logging.INFO, "mqm: excluded 2 rows: human reference excluded (data.exclude_references=true)"),
        (logging.WARNING, "mqm: dropped 1 row: inconsistent target text"),
    ]
    assert [(d["kind"], d["id"]) for d in report.details()] == [
        ("excluded", "zh-en/refA/1"), ("excluded", "zh-en/refB/1"), ("dropped", "zh-en/S2/1")]


def write_mqm_with_reference(folder) -> object:
    """2 segments x (S1, S2 and the human reference ``ref``), one rater, en-de by its file name."""
    errors = {("S1", 1): ("Accuracy/Mistranslation", "Major"), ("S2", 1): ("Fluency/Grammar", "Minor"),
              ("S1", 2): ("Fluency/Grammar", "Minor")}
    text = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n" + "".join(
        f"{s}\td1\t{seg}\t{seg}\tr1\tSource {seg}.\tZiel {s} {seg}.\t"
        + "\t".join(errors.get((s, seg), ("No-error", "No-error"))) + "\n"
        for seg in (1, 2) for s in ("S1", "S2", "ref"))
    file = folder / "mqm_ted_ende.tsv"
    file.write_text(text, encoding="utf-8")
    return file


REF_LINE = "mqm: 2 human-reference rows (system ref) scored as a system; data.exclude_references=true drops them"


def test_mqm_counts_the_human_reference_rows_it_scores_as_a_system(tmp_path):
    file = write_mqm_with_reference(tmp_path)
    df, report = mqm.load(str(file))
    assert sorted(df["system"].unique()) == ["S1", "S2", "ref"] and report.references == {"ref": 2}
    assert report.console_lines() == [(logging.INFO, REF_LINE)]
    summary = report.summary()
    assert summary["human_references_scored"] == 2 and summary["human_references_by_system"] == {"ref": 2}
    df, report = mqm.load(str(file), exclude_references=True)
    assert "ref" not in set(df["system"]) and report.references == {} and report.reference_line() == ""
    assert all("scored as" not in line for _, line in report.console_lines())
    assert report.summary()["human_references_scored"] == 0
    merged = LoadReport("mqm23", references={"ref": 2})
    merged.merge(LoadReport("mqm", references={"ref": 3, "refB": 1}))
    assert merged.reference_line() == ("mqm23: 6 human-reference rows (systems ref 5, refB 1) scored as systems; "
                                       "data.exclude_references=true drops them")
    merged.count_references(pd.DataFrame({"system": ["ref", "S1", "ref"]}))  # after a split: 2 ref rows, no refB
    assert merged.references == {"ref": 2}


def test_the_data_card_and_export_say_how_many_reference_rows_are_scored(tmp_path, tiny_tokenizer, cscore_main):
    file = write_mqm_with_reference(tmp_path)
    res = cscore_main("data", "check", "data=mqm", f"data.path={file}", f"tokenizer={tiny_tokenizer}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "- systems: 3" in res.stdout and "- with a reference text: 0" in res.stdout
    assert ("- human-reference rows scored as systems: 2 (ref 2); data.exclude_references=true drops them"
            in res.stdout)
    res = cscore_main("data", "check", "data=mqm", f"data.path={file}", "data.exclude_references=true",
                      f"tokenizer={tiny_tokenizer}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "- systems: 2" in res.stdout and "- human-reference rows scored as systems: 0" in res.stdout
    res = cscore_main("data", "export", "data=mqm", f"data.path={file}", f"out={tmp_path / 'x.jsonl'}", cwd=tmp_path)
    assert res.returncode == 0 and f"  {REF_LINE}" in res.stdout.splitlines()


@pytest.mark.slow
def test_a_run_says_how_many_reference_rows_it_scores_and_records_it(tmp_path, tiny_dirs, cscore_main):
    """``cscore run data=mqm``: the console line and metrics.json's data.human_references_scored, counted
    on the rows the split keeps (dev: 1 of the 2 segments); exclude_references=true: 0 and no line."""
    file = write_mqm_with_reference(tmp_path)
    args = [*tiny_args(tiny_dirs, "data=mqm", f"data.path={file}", "method=single"), f"cache.dir={tmp_path / 'c'}"]
    res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / 'all'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert REF_LINE in res.stdout + res.stderr
    _, scores, metrics = read_run(tmp_path / "all")
    assert (scores["system"] == "ref").sum() == 2 and metrics["data"]["human_references_scored"] == 2
    assert metrics["data"]["human_references_by_system"] == {"ref": 2}
    res = cscore_main("run", *args, "split.use=dev", "split.dev_fraction=0.5", f"hydra.run.dir={tmp_path / 'dev'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, scores, metrics = read_run(tmp_path / "dev")
    assert len(scores) == 3 and metrics["data"]["human_references_scored"] == 1
    assert REF_LINE.replace("2 human-reference rows", "1 human-reference row") in res.stdout + res.stderr
    res = cscore_main("run", *args, "data.exclude_references=true", f"hydra.run.dir={tmp_path / 'x'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, scores, metrics = read_run(tmp_path / "x")
    assert "ref" not in set(scores["system"]) and metrics["data"]["human_references_scored"] == 0
    assert "scored as a system" not in res.stdout + res.stderr
