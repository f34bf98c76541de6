"""The demo set and the example-table validation."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from cscore.data import load_examples
from cscore.data.prompts import TEMPLATES, render
from cscore.data.schema import DataError, LoadReport, validate
from cscore.tests.support import REPO

ROOT = REPO


def test_demo_loads_as_a_validated_table():
    df, report = load_examples("demo")
    assert len(df) == 160 and report.n_read == 160 and not report.dropped
    assert df["group"].nunique() == 20 and df["id"].is_unique
    assert {"human.consistency", "human.fluency", "human.relevance", "human.overall"} <= set(df.columns)
    clean = df[df["system"] == "clean"]["human.overall"]
    unrelated = df[df["system"] == "unrelated"]["human.overall"]
    assert (clean == 5).all() and (unrelated == 1).all()


def test_demo_file_is_what_the_generator_writes():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_demo.py"), "--check"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def row(i, **kw):
    base = {"id": f"x{i}", "doc_id": "d1", "system": "s", "source": "A source.", "reference": "ref",
            "hypothesis": "A hypothesis.", "scores": {"overall": 3.0}}
    base.update(kw)
    return base


def test_empty_hypotheses_are_dropped_and_counted(tmp_path):
    f = tmp_path / "d.jsonl"
    write_jsonl(f, [row(1), row(2, hypothesis="  "), row(3)])
    df, report = load_examples("demo", str(f))
    assert list(df["id"]) == ["x1", "x3"]
    assert report.summary()["dropped_by_reason"] == {"empty hypothesis": 1}


@pytest.mark.parametrize("rows,message", [
    ([row(1), row(1)], "duplicate ids"),
    ([row(1, scores={"overall": "bad"})], "non-numeric human.overall"),
])
def test_invalid_tables_are_clear_errors(tmp_path, rows, message):
    f = tmp_path / "d.jsonl"
    write_jsonl(f, rows)
    with pytest.raises(DataError, match=message):
        load_examples("demo", str(f))


def test_malformed_json_and_missing_fields_name_the_line(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps(row(1)) + "\n{not json\n")
    with pytest.raises(DataError, match=r"d\.jsonl:2:2: not valid JSON: Expecting property name enclosed in "
                                        r"double quotes: line 2 column 2$"):
        load_examples("demo", str(f))
    bad = row(1)
    del bad["hypothesis"]
    write_jsonl(f, [bad])
    with pytest.raises(DataError, match=r"d.jsonl:1: missing field 'hypothesis'"):
        load_examples("demo", str(f))


def test_validate_requires_columns():
    with pytest.raises(DataError, match="lacks required columns"):
        validate(pd.DataFrame({"id": ["a"]}), LoadReport("t"))


def test_prompt_render_returns_the_source_span():
    prompt, (a, b) = render(TEMPLATES["summarization"], "Some article.")
    assert prompt[a:b] == "Some article."
    assert prompt == ("Write an accurate, relevant, and coherent summary of the following texts:\n"
                      "Some article.\nSummary:\n")
    prompt, (a, b) = render(TEMPLATES["translation"], "Hallo Welt.", {"target_language": "English"})
    assert prompt == "Translate the following sentence to English:\nHallo Welt.\n" and prompt[a:b] == "Hallo Welt."
