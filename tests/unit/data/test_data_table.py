"""data=table (data/table.py, data/formats.py) and exporting to a datasets folder (data/export.py).
Every input is a small table built here; the expected example table is written out by hand."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import datasets
import numpy as np
import pandas as pd
import pytest

from cscore.cli import data_cmd
from cscore.data import load_examples
from cscore.data.schema import DataError
from cscore.data.table import TableOptions

# A user's own layout: none of the column names is cscore's.
USER = {
    "seg": [7, 8, 9, 10],
    "src": ["Das Haus ist rot.", "Das Haus ist rot.", "Ein Baum.", "Ein Baum."],
    "mt": ["The house is red.", "The house is red!", "", "A tree."],
    "ref": ["The house is red.", "The house is red.", "A tree.", ""],
    "engine": ["A", "B", "A", "B"],
    "adequacy": [4.5, 3.0, 2.0, None],
    "fluency": [5.0, 4.0, 1.0, 3.0],
}
COLUMNS = {"id": "seg", "source": "src", "hypothesis": "mt", "reference": "ref", "system": "engine",
           "human": ["adequacy", "fluency"]}
OPTIONS = TableOptions(task="translation", lang_pair="de-en", columns=COLUMNS)


def expected_table() -> pd.DataFrame:
    """What USER becomes: segment 9 (empty hypothesis) is dropped; segment 10 has no reference and
    a missing adequacy score; rows sharing a source share a group."""
    return pd.DataFrame({
        "id": ["7", "8", "10"], "system": ["A", "B", "B"], "task": "translation",
        "source": ["Das Haus ist rot.", "Das Haus ist rot.", "Ein Baum."],
        "hypothesis": ["The house is red.", "The house is red!", "A tree."],
        "reference": ["The house is red.", "The house is red.", None], "lang_pair": "de-en",
        "human.adequacy": [4.5, 3.0, np.nan], "human.fluency": [5.0, 4.0, 3.0],
    })


def check(df, report, where_dropped: str):
    want = expected_table()
    assert df["group"].iloc[0] == df["group"].iloc[1] != df["group"].iloc[2]
    pd.testing.assert_frame_equal(df.drop(columns="group"), want[[c for c in df.columns if c != "group"]])
    assert report.n_read == 4 and report.dataset == "table"
    assert report.dropped == [{"id": "9", "reason": "empty hypothesis", "where": where_dropped}]
    assert [(e["id"], e["reason"]) for e in report.ignored] == [("10", "missing human score: adequacy")]


def write_jsonl(file, records):
    file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return file


def user_records():
    frame = pd.DataFrame(USER)
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in frame.to_dict("records")]


# ----- every format gives the same table -----

@pytest.mark.parametrize("suffix,where", [(".csv", "row 3"), (".tsv", "row 3"), (".parquet", "row 3"),
                                          (".jsonl", ":3")])
def test_each_file_format_round_trips(tmp_path, suffix, where):
    file = tmp_path / f"mine{suffix}"
    frame = pd.DataFrame(USER)
    if suffix == ".csv":
        frame.to_csv(file, index=False)
    elif suffix == ".tsv":
        frame.to_csv(file, sep="\t", index=False)
    elif suffix == ".parquet":
        frame.to_parquet(file, index=False)
    else:
        write_jsonl(file, user_records())
    df, report = load_examples("table", str(file), OPTIONS)
    check(df, report, f"{file}{where}" if where.startswith(":") else f"{file} {where}")


def test_save_to_disk_folder_and_its_splits(tmp_path):
    folder = tmp_path / "mine_ds"
    datasets.Dataset.from_pandas(pd.DataFrame(USER)).save_to_disk(str(folder))
    df, report = load_examples("table", str(folder), OPTIONS)
    check(df, report, f"{folder} row 3")

    other = pd.DataFrame(USER).iloc[:2]
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_pandas(other, preserve_index=False),
                               "test": datasets.Dataset.from_pandas(pd.DataFrame(USER))})
    dd.save_to_disk(str(tmp_path / "dd"))
    df, report = load_examples("table", str(tmp_path / "dd"), replace(OPTIONS, split="test"))
    check(df, report, f"{tmp_path / 'dd'}[test] row 3")
    with pytest.raises(DataError, match=re.escape("has splits ['train', 'test']; choose one with data.split=<split>")):
        load_examples("table", str(tmp_path / "dd"), OPTIONS)
    with pytest.raises(DataError, match=re.escape("has no split 'dev' (data.split=dev); its splits: "
                                                  "['train', 'test']")):
        load_examples("table", str(tmp_path / "dd"), replace(OPTIONS, split="dev"))
    with pytest.raises(DataError, match="holds one dataset without splits; leave out data.split"):
        load_examples("table", str(folder), replace(OPTIONS, split="test"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(DataError, match="not one written by datasets' save_to_disk"):
        load_examples("table", str(tmp_path / "plain"), OPTIONS)


def test_hub_id_goes_through_load_dataset(monkeypatch):
    calls = []

    def load_dataset(hub_id):
        calls.append(hub_id)
        return datasets.DatasetDict({"test": datasets.Dataset.from_pandas(pd.DataFrame(USER))})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    df, report = load_examples("table", None, replace(OPTIONS, hub_id="someone/ratings"))
    check(df, report, "hub:someone/ratings[test] row 3")
    assert calls == ["someone/ratings"] and report.source_files == ["hub:someone/ratings[test]"]
    with pytest.raises(DataError, match="set one"):
        load_examples("table", "x.csv", replace(OPTIONS, hub_id="someone/ratings"))


# ----- the mapping -----

def test_nested_fields_lists_of_turns_defaults_and_aspect_names(tmp_path):
    """JSONL with nested scores and dialogue turns; columns named like the roles need no mapping."""
    file = write_jsonl(tmp_path / "chat.jsonl", [
        {"source": ["Hi!", "Hello, how are you?"], "hypothesis": "Fine, thanks.", "scores": {"q": 4, "e": "2"}},
        {"source": ["Hi!", "Hello, how are you?"], "hypothesis": "What?", "scores": {"q": 1, "e": "NA"}},
        {"source": ["Any news?"], "hypothesis": "None today.", "scores": {"q": 3, "e": 1.5}},
    ])
    df, report = load_examples("table", str(file), TableOptions(
        task="dialogue", columns={"human": {"quality": "scores.q", "engaging": "scores.e"}}))
    assert list(df["id"]) == ["row1", "row2", "row3"] and set(df["system"]) == {"unknown"}
    assert df["source"].iloc[0] == "Hi!\nHello, how are you?" and df["reference"].isna().all()
    assert df["group"].nunique() == 2 and df["lang_pair"].isna().all()
    assert list(df["human.quality"]) == [4.0, 1.0, 3.0]
    assert df["human.engaging"].iloc[[0, 2]].tolist() == [2.0, 1.5] and np.isnan(df["human.engaging"].iloc[1])
    assert report.ignored == [{"id": "row2", "reason": "missing human score: engaging", "where": f"{file}:2"}]


def test_an_exported_table_loads_back_without_a_mapping(tmp_path):
    demo, _ = load_examples("demo")
    file = tmp_path / "demo.parquet"
    demo.to_parquet(file, index=False)
    df, _ = load_examples("table", str(file), TableOptions(task="summarization"))
    pd.testing.assert_frame_equal(df, demo[list(df.columns)])  # human.* columns are found by name


def test_missing_columns_name_the_column_and_the_file(tmp_path):
    file = tmp_path / "mine.csv"
    pd.DataFrame(USER).to_csv(file, index=False)
    with pytest.raises(DataError, match=re.escape(f"{file}: no column 'mtt' (data.columns.hypothesis=mtt) "
                                                  "(did you mean 'mt'?); columns: ")):
        load_examples("table", str(file), replace(OPTIONS, columns={**COLUMNS, "hypothesis": "mtt"}))
    with pytest.raises(DataError, match=re.escape(f"{file}: no hypothesis column; "
                                                  "set data.columns.hypothesis=<column>")):
        load_examples("table", str(file), replace(OPTIONS, columns={**COLUMNS, "hypothesis": None}))
    with pytest.raises(DataError, match=re.escape(f"{file}: no column 'fluent' (data.columns.human) "
                                                  "(did you mean 'fluency'?)")):
        load_examples("table", str(file), replace(OPTIONS, columns={**COLUMNS, "human": ["fluent"]}))
    with pytest.raises(DataError, match=re.escape(f"{file}: no human score columns; set data.columns.human=")):
        load_examples("table", str(file), replace(OPTIONS, columns={**COLUMNS, "human": None}))


@pytest.mark.parametrize("suffix,where", [(".csv", " row 2"), (".jsonl", ":2")])
def test_non_numeric_score_names_column_file_and_row(tmp_path, suffix, where):
    file = tmp_path / f"mine{suffix}"
    frame = pd.DataFrame(USER).astype({"adequacy": object})
    frame.loc[1, "adequacy"] = "good"
    frame.loc[3, "adequacy"] = "bad"
    if suffix == ".csv":
        frame.to_csv(file, index=False)
    else:
        write_jsonl(file, frame.astype(object).where(frame.notna(), None).to_dict("records"))
    with pytest.raises(DataError, match=re.escape(f"{file}{where}: column 'adequacy' (data.columns.human) is not "
                                                  "numeric: 'good' (and 1 more rows)")):
        load_examples("table", str(file), OPTIONS)


def test_other_mistakes_are_one_line_errors(tmp_path):
    file = tmp_path / "mine.csv"
    pd.DataFrame({**USER, "seg": [7, 7, 9, 10]}).to_csv(file, index=False)
    with pytest.raises(DataError, match=re.escape(f"{file}: column 'seg' (data.columns.id) repeats ids ['7']")):
        load_examples("table", str(file), OPTIONS)
    with pytest.raises(DataError, match=re.escape("data=table needs data.task=summarization|translation|dialogue")):
        load_examples("table", str(file), TableOptions(columns=COLUMNS))
    with pytest.raises(DataError, match=re.escape("data=table: unknown option data.columns.hypothesys (did you mean "
                                                  "data.columns.hypothesis?)")):
        load_examples("table", str(file), TableOptions(task="translation", columns={"hypothesys": "mt"}))
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'mine.xlsx'}: unknown file type '.xlsx'")):
        (tmp_path / "mine.xlsx").write_text("x")
        load_examples("table", str(tmp_path / "mine.xlsx"), OPTIONS)
    with pytest.raises(DataError, match=re.escape(f"data file {tmp_path / 'nope.csv'} does not exist")):
        load_examples("table", str(tmp_path / "nope.csv"), OPTIONS)


# ----- export, and the command line -----

def test_export_to_a_datasets_folder_loads_back_equal(tmp_path, capsys):
    file = tmp_path / "mine.csv"
    pd.DataFrame(USER).to_csv(file, index=False)
    out = tmp_path / "exported"
    args = ["data=table", f"data.path={file}", "data.task=translation", "data.lang_pair=de-en",
            "data.columns.id=seg", "data.columns.source=src", "data.columns.hypothesis=mt",
            "data.columns.reference=ref", "data.columns.system=engine", "data.columns.human=[adequacy,fluency]"]
    data_cmd.main(["export", *args, f"out={out}"])
    assert "wrote 3 rows" in capsys.readouterr().out
    table, _ = load_examples("table", str(file), OPTIONS)
    back = datasets.load_from_disk(str(out)).to_pandas()
    pd.testing.assert_frame_equal(back, table)
    again, _ = load_examples("table", str(out), TableOptions(task="translation"))  # and data=table reads it as it is
    pd.testing.assert_frame_equal(again, table)
    with pytest.raises(SystemExit):
        data_cmd.main(["export", *args, f"out={tmp_path / 'x.csv'}"])
    assert "expected a .parquet or .jsonl file, or a folder" in capsys.readouterr().err


def test_data_check_on_your_own_table(tmp_path, tiny_tokenizer, cscore_main):
    file = tmp_path / "mine.tsv"
    pd.DataFrame(USER).to_csv(file, sep="\t", index=False)
    res = cscore_main("data", "check", "data=table", f"data.path={file}", "data.columns.hypothesis=mt",
                     "data.columns.source=src", "data.columns.human=[fluency]", "data.task=translation",
                     f"tokenizer={tiny_tokenizer}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "# dataset card: table" in res.stdout and "- items: 3" in res.stdout and "- groups: 2" in res.stdout
    assert "| fluency | 3 | 3 | 4 | 5 | 3 |" in res.stdout  # kept rows: fluency 5, 4, 3
    assert "- dropped 1: empty hypothesis" in res.stdout
    assert f"row3: dropped, empty hypothesis {file} row 3" in res.stdout
