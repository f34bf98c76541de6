"""LoadReport: rows excluded on purpose vs dropped, by reason and row by row (data/schema.py)."""

from __future__ import annotations

import logging

import pandas as pd

from cscore.data import mqm
from cscore.data.schema import LoadReport
from cscore.tests.support.cli import REF_LINE, write_mqm_with_reference


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
    df, report = mqm.load(str(file), mqm.MqmOptions(exclude_references=True))
    assert list(df["system"]) == ["S1"] and report.n_read == len(df) + report.left_out
    assert report.console_lines() == [
        (logging.INFO, "mqm: excluded 2 rows: human reference excluded (data.exclude_references=true)"),
        (logging.WARNING, "mqm: dropped 1 row: inconsistent target text"),
    ]
    assert [(d["kind"], d["id"]) for d in report.details()] == [
        ("excluded", "zh-en/refA/1"), ("excluded", "zh-en/refB/1"), ("dropped", "zh-en/S2/1")]


def test_mqm_counts_the_human_reference_rows_it_scores_as_a_system(tmp_path):
    file = write_mqm_with_reference(tmp_path)
    df, report = mqm.load(str(file))
    assert sorted(df["system"].unique()) == ["S1", "S2", "ref"] and report.references == {"ref": 2}
    assert report.console_lines() == [(logging.INFO, REF_LINE)]
    summary = report.summary()
    assert summary["human_references_scored"] == 2 and summary["human_references_by_system"] == {"ref": 2}
    df, report = mqm.load(str(file), mqm.MqmOptions(exclude_references=True))
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
