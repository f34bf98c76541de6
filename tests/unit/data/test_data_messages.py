"""Error messages of the data side: they name the file, line and column, speak the command line
(data.<option>=value), reject unknown options with a "did you mean", and are reported once."""

from __future__ import annotations

import logging
import re
import tarfile

import pandas as pd
import pytest

from cscore.cli import data_cmd
from cscore.data import LOADERS, fed, load_config, load_examples, mqm
from cscore.data.schema import DataError

MQM_HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"
MQM_ROW = "S1\td1\t1\t1\tr1\tQuelle.\tZiel.\tFluency/Spelling\tMinor\n"


def mqm_file(folder, name, text=MQM_HEADER + MQM_ROW):
    file = folder / name
    file.write_text(text, encoding="utf-8")
    return file


# ----- B: the language pair of a WMT file comes from its published name -----

@pytest.mark.parametrize("name,pair", [("mqm_ted_zhen.tsv", "zh-en"), ("mqm_generalMT2023_ende.tsv", "en-de"),
                                       ("mqm_generalMT2022_enru.tsv", "en-ru")])
def test_mqm_lang_pair_from_the_file_name(tmp_path, name, pair):
    df, _ = mqm.load(str(mqm_file(tmp_path, name)))
    assert list(df["id"]) == [f"{pair}/S1/1"] and list(df["lang_pair"]) == [pair]


def test_mqm_lang_pair_from_an_archive_name_or_its_member(tmp_path):
    tsv = mqm_file(tmp_path, "inner.tsv")
    for archive, member, pair in [("sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv.tar.gz", "x.tsv", "zh-en"),
                                  ("ratings.tar.gz", "mqm_generalMT2023_heen.tsv", "he-en")]:
        with tarfile.open(tmp_path / archive, "w:gz") as tar:
            tar.add(tsv, arcname=member)
        df, _ = mqm.load(str(tmp_path / archive))
        assert list(df["lang_pair"]) == [pair]


def test_mqm_without_any_pair_asks_for_the_cli_option(tmp_path):
    file = mqm_file(tmp_path, "ratings.tsv")
    with pytest.raises(DataError) as err:
        mqm.load(str(file))
    assert str(err.value) == (f"{file}: cannot tell the language pair (no :xx-yy suffix on doc, none in the file "
                              "name); set data.lang_pair, e.g. data.lang_pair=zh-en")
    df, _ = mqm.load(str(file), mqm.MqmOptions(lang_pair="de-en"))  # the option wins
    assert list(df["lang_pair"]) == ["de-en"]


def test_the_reported_command_works_on_the_shared_file(shared, tmp_path, capsys):
    out = tmp_path / "x.parquet"
    data_cmd.main(["export", "data=mqm", f"data.path={shared / 'mqm' / 'ted_zhen' / 'mqm_ted_zhen.tsv'}", f"out={out}"])
    df = pd.read_parquet(out)
    assert set(df["lang_pair"]) == {"zh-en"} and len(df) == 7935  # README 3.2: 7935 scored pairs


def test_option_errors_speak_the_command_line(tmp_path):
    file = mqm_file(tmp_path, "mqm_ted_zhen.tsv")
    with pytest.raises(DataError, match=re.escape("data.reference_system=refZ: no such system (systems: ['S1'])")):
        mqm.load(str(file), mqm.MqmOptions(reference_system="refZ"))
    with pytest.raises(DataError, match=re.escape("data.exclude_systems names unknown system(s) ['S9']")):
        mqm.load(str(file), mqm.MqmOptions(exclude_systems=["S9"]))
    with pytest.raises(DataError, match=re.escape("data.level=turns is not a FED level; use data.level=turn, "
                                                  "dialog or both")):
        load_examples("fed", str(file), fed.FedOptions(level="turns"))


# ----- C: invalid UTF-8 and broken JSON name file, line and column -----

GOOD_JSONL = ('{"id": "a", "doc_id": "d", "system": "s", "source": "S.", "hypothesis": "H.", "scores": {"x": 1}}\n'
              '{"doc_id": "d", "system": "t", "source": "S.", "hypothesis": "H.", "scores": {"coherence": 1}}\n')
BAD_LINE = b'{"id": "b", "hypothesis": "caf\xff"}\n'
COLUMN = BAD_LINE.index(b"\xff") + 1


@pytest.mark.parametrize("dataset,name,content,line", [
    ("demo", "d.jsonl", GOOD_JSONL.encode() + BAD_LINE, 3),
    ("summeval", "s.jsonl", GOOD_JSONL.encode() + BAD_LINE, 3),
    ("fed", "fed.json", b"[\n" + BAD_LINE + b"]\n", 2),
    ("dstc9", "dstc9.json", b"{\n\n" + BAD_LINE + b"}\n", 3),
    ("mqm", "mqm_ted_zhen.tsv", (MQM_HEADER + MQM_ROW).encode() + BAD_LINE, 3),
    ("table", "t.csv", b"source,hypothesis,q\nS.,H.,1\n" + BAD_LINE, 3),
])
def test_invalid_utf8_names_file_line_and_column(tmp_path, dataset, name, content, line):
    file = tmp_path / name
    file.write_bytes(content)
    options = {"task": "summarization"} if dataset == "table" else {}
    with pytest.raises(DataError) as err:
        load_config({"name": dataset, "path": str(file), **options})
    assert str(err.value).startswith(f"{file}:{line}:{COLUMN}: not valid UTF-8: byte 0xff (invalid start byte)")


@pytest.mark.parametrize("dataset", ["demo", "summeval", "table"])
def test_truncated_jsonl_line_gives_the_whole_json_message(tmp_path, dataset):
    file = tmp_path / "cut.jsonl"
    cut = '{"id": "b", "doc_id": "d", "system": "s", "source": "S.", "hypothesis": "cut off he'
    file.write_text("\n" + cut + "\n", encoding="utf-8")  # a blank line 1, then the cut line
    col = cut.index('"cut off') + 1
    options = {"task": "summarization"} if dataset == "table" else {}
    with pytest.raises(DataError) as err:
        load_config({"name": dataset, "path": str(file), **options})
    assert str(err.value) == (f"{file}:2:{col}: not valid JSON: Unterminated string starting at: line 2 column {col} "
                              "(the text ends there: is it truncated?)")


def test_a_control_character_inside_a_line_is_named_with_its_column(tmp_path):
    file = tmp_path / "tab.jsonl"
    file.write_text('{"hypothesis": "a\tb"}\n', encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_config({"name": "table", "path": str(file), "task": "dialogue"})
    assert str(err.value) == f"{file}:1:18: not valid JSON: Invalid control character at: line 1 column 18"


DATASETS_WITH_PATH = [("demo", {}), ("summeval", {}), ("qags_xsum", {}), ("mqm", {}), ("fed", {}), ("dstc9", {}),
                      ("table", {"data.task": "summarization"})]


@pytest.mark.parametrize("dataset,extra", DATASETS_WITH_PATH)
def test_a_missing_path_is_reported_once(tmp_path, capsys, caplog, dataset, extra):
    """The CLI prints the error once; the data side raises without logging anything."""
    caplog.set_level(logging.DEBUG)
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(SystemExit) as stop:
        data_cmd.main(["export", f"data={dataset}", f"data.path={missing}", *[f"{k}={v}" for k, v in extra.items()],
                       f"out={tmp_path / 'x.parquet'}"])
    assert stop.value.code == 2  # a data-input mistake (docs/concepts.md, Exit codes)
    assert capsys.readouterr().err == f"cscore: error: data file {missing} does not exist (data.path={missing})\n"
    assert not [r for r in caplog.records if r.name.startswith("cscore")]


# ----- E: unknown options -----

@pytest.mark.parametrize("dataset", sorted(LOADERS))
def test_every_loader_rejects_an_unknown_option(dataset):
    with pytest.raises(DataError) as err:
        load_config({"name": dataset, "foo": 1})
    message = str(err.value)
    assert message.startswith(f"data={dataset}: unknown option data.foo; allowed: ")
    assert "data.path" in message and "data.template" in message and "\n" not in message


TYPOS = [("mqm", "lang_pairs", "data.lang_pair"), ("fed", "levl", "data.level"), ("mqm23", "pair", "data.pairs"),
         ("table", "colums", "data.columns"), ("summeval", "hub_splt", "data.hub_split"),
         ("demo", "templat", "data.template")]


@pytest.mark.parametrize("dataset,typo,meant", TYPOS)
def test_a_close_option_gets_a_did_you_mean(dataset, typo, meant):
    with pytest.raises(DataError, match=re.escape(f"unknown option data.{typo} (did you mean {meant}?); allowed:")):
        load_config({"name": dataset, typo: "x"})


def test_unknown_option_on_the_command_line_is_one_clean_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        data_cmd.main(["export", "data=demo", "+data.foo=1", f"out={tmp_path / 'x.jsonl'}"])
    err = capsys.readouterr().err
    assert err == ("cscore: error: data=demo: unknown option data.foo; allowed: data.path, data.template, "
                   "data.split_by, data.judge_aspect\n")


def test_unknown_dataset_name():
    message = "unknown dataset data=summevl (did you mean data=summeval?); known: "
    with pytest.raises(DataError, match=re.escape(message)):
        load_examples("summevl")
