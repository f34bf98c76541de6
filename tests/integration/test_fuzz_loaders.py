"""Property-based tests of every loader: mutated files (truncated, bit-flipped, mis-encoded, deeply
nested, wrong types) give a validated table or a one-line DataError naming the file, never a
traceback; valid random tables keep every id with its own row. The mutations and the check are
scripts/fuzz.py's (which runs them at scale); below them, each crash it found, kept as a test."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import pickle
import struct

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cscore.data.registry import load_examples
from cscore.data.schema import DataError
from cscore.data.table import TableOptions
from cscore.tests.support import REPO

spec = importlib.util.spec_from_file_location("cscore_fuzz", REPO / "scripts" / "fuzz.py")
fuzz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz)

FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("target", list(fuzz.seed_files()))
def test_mutated_files_load_or_fail_in_one_line(target, tmp_path):
    result = fuzz.run_target(target, examples=60, seed=None, folder=tmp_path, derandomize=True)
    assert result["findings"] == []
    assert result["ok"] + result["error"] == 60
    assert result["error"] > 0  # the mutations do reach the error paths


def test_seed_files_are_valid(tmp_path):
    for name, (file_name, content, call) in fuzz.seed_files().items():
        (tmp_path / file_name).write_bytes(content)
        assert fuzz.check_load(tmp_path / file_name, call) == "ok", name


def test_the_check_catches_a_traceback_and_a_bad_message(tmp_path, monkeypatch):
    """The fuzz check itself can fail: a non-CscoreError, and a message without the file."""
    from cscore.data import registry

    f = tmp_path / "x.jsonl"
    f.write_text("{}\n")
    broken = type("Broken", (registry.Loader,),
                  {"name": "broken", "load": staticmethod(lambda path, options: {}["a key"])})
    monkeypatch.setitem(registry.LOADERS.entries, "broken", broken)
    with pytest.raises(fuzz.Finding, match="traceback: KeyError"):
        fuzz.check_load(f, {"data": "broken"})
    with pytest.raises(fuzz.Finding, match="bad error message"):
        fuzz.check_load(f, {"data": "no_such_loader"})


# ---------------------------------------------------------------------------------------------
# ids travel with their rows


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@FAST
@given(st.lists(st.tuples(text, text, st.one_of(st.none(), st.floats(-5, 5), st.integers(-3, 3))),
                min_size=1, max_size=12), st.sampled_from([".jsonl", ".csv", ".parquet"]))
def test_table_rows_keep_their_ids(tmp_path_factory, rows, suffix):
    """Every kept row has its own texts and score under its id; every other id is reported dropped."""
    ids = [f"id{i}" for i in range(len(rows))]
    frame = pd.DataFrame({"id": ids, "src": [r[0] for r in rows], "hyp": [r[1] for r in rows],
                          "q": [None if r[2] is None else str(r[2]) for r in rows]})
    f = tmp_path_factory.mktemp("t") / f"t{suffix}"
    if suffix == ".jsonl":
        f.write_text("".join(json.dumps(rec) + "\n" for rec in frame.to_dict("records")))
    elif suffix == ".csv":
        frame.to_csv(f, index=False)
    else:
        frame.to_parquet(f)
    try:
        df, report = load_examples("table", str(f), TableOptions(
            task="summarization", columns={"source": "src", "hypothesis": "hyp", "human": ["q"]}))
    except DataError as err:
        assert "\n" not in str(err) and str(f) in str(err)
        return
    by_id = dict(zip(ids, rows))
    for rec in df.to_dict("records"):
        src, hyp, score = by_id[rec["id"]]
        assert (rec["source"], rec["hypothesis"]) == (src, hyp)
        assert math.isnan(rec["human.q"]) if score is None else rec["human.q"] == float(score)
    dropped = {d["id"] for d in report.dropped}
    assert set(df["id"]) | dropped == set(ids) and not set(df["id"]) & dropped
    assert all(not by_id[i][0].strip() or not by_id[i][1].strip() for i in dropped)


# ---------------------------------------------------------------------------------------------
# what the fuzz run found (each was a traceback or a message without the file before its fix)


def load_demo(f):
    return load_examples("demo", str(f))


def demo_line(**kw):
    rec = {"id": "a", "doc_id": "d", "system": "s", "source": "x", "hypothesis": "y", "scores": {"o": 1}}
    rec.update(kw)
    return json.dumps(rec)


@pytest.mark.parametrize("content,message", [
    ("[" * 100000 + "\n", r"d\.jsonl:1: not usable JSON: maximum recursion depth"),
    ('{"id": ' + "9" * 5000 + "}\n", r"d\.jsonl:1: not usable JSON: Exceeds the limit"),
    (demo_line(scores={"o": 1e999}) + "\n", r"d\.jsonl\): infinite human\.o for ids \['a'\]"),
    (demo_line(scores={"o": 10 ** 400}) + "\n", r"d\.jsonl\): non-numeric human\.o for ids \['a'\]"),
    ("\n\n", r"d\.jsonl: no records"),
    (demo_line(scores=[1, 2]) + "\n", r"d\.jsonl:1: field 'scores' is not an object \(list\)"),
    (demo_line(hypothesis="bad \udc40 text") + "\n", r"d\.jsonl:1: field 'hypothesis' holds a lone UTF-16 surrogate"),
    (demo_line(scores={"\ud800": 1}) + "\n", r"d\.jsonl:1: field 'scores\.\\ud800' holds a lone UTF-16 surrogate"),
    (demo_line() + "\n" + demo_line() + "\n", r"^demo \(.*d\.jsonl\): duplicate ids \['a'\]"),
])
def test_demo_jsonl_findings(tmp_path, content, message):
    f = tmp_path / "d.jsonl"
    f.write_text(content)
    with pytest.raises(DataError, match=message) as err:
        load_demo(f)
    assert "\n" not in str(err.value)


def test_valid_surrogate_pairs_are_text(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(demo_line(hypothesis="emoji \U0001F600") + "\n")  # json.dumps writes the pair \ud83d\ude00
    assert "\\ud83d" in f.read_text()
    df, _ = load_demo(f)
    assert df["hypothesis"][0] == "emoji \U0001F600"


TABLE = TableOptions(task="translation", columns={"source": "src", "hypothesis": "mt", "human": ["q"]})


@pytest.mark.parametrize("name,content,message", [
    ("t.tsv", "src\tmt\tq\na\tb\t1\nc\td\t2\textra\n", r"t\.tsv: not readable as TSV: Error tokenizing data.*saw 4$"),
    ("t.csv", "src,m\rt,q\na,b,1\n", r"t\.csv:1: the header row is not readable: new-line character"),
    ("t.jsonl", '{"src": "a", "mt": "b", "q": ' + "9" * 400 + "}\n", r"t\.jsonl:1: column 'q' .* is not numeric"),
    ("t.jsonl", '{"src": "a \\udc40", "mt": "b", "q": 1}\n', r"t\.jsonl:1: field 'src' holds a lone UTF-16"),
])
def test_table_findings(tmp_path, name, content, message):
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(DataError, match=message) as err:
        load_examples("table", str(f), TABLE)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("human", [5, 2.5, True])
def test_table_human_mapping_of_the_wrong_type(tmp_path, human):
    f = tmp_path / "t.jsonl"
    f.write_text('{"src": "a", "mt": "b", "q": 1}\n')
    with pytest.raises(DataError, match=r"data\.columns\.human must be a column name, a list of names or a "):
        load_examples("table", str(f), TableOptions(
            task="translation", columns={"source": "src", "hypothesis": "mt", "human": human}))


def test_corrupt_pickle_lengths_and_surrogates(tmp_path):
    f = tmp_path / "data.pkl"
    f.write_bytes(b"\x80\x04\x8d" + struct.pack("<Q", 2 ** 62) + b"x")  # a BINUNICODE8 of 4 EiB
    with pytest.raises(DataError, match=r"data\.pkl: not a readable pickle \(MemoryError: a length in it"):
        load_examples("summeval", str(f))
    doc = {"src": "a", "sys_summs": {"M1": {"sys_summ": "b\udc40", "scores": {}}}}
    f.write_bytes(pickle.dumps({"d1": doc}))
    with pytest.raises(DataError, match=r"data\.pkl: field 'd1\.sys_summs\.M1\.sys_summ' holds a lone UTF-16"):
        load_examples("summeval", str(f))


def test_fed_huge_integer_annotation_is_ignored_not_a_crash(tmp_path):
    f = tmp_path / "fed_data.json"
    items = [{"context": "User: Hi", "response": "System: Hello", "system": "Meena",
              "annotations": {"Overall": [3, 10 ** 400]}}]
    f.write_text(json.dumps(items))
    df, report = load_examples("fed", str(f))
    assert df["human.overall"].tolist() == [3.0]
    assert report.summary()["ignored_by_reason"] == {"annotation non-numeric ignored: overall": 1}


@pytest.mark.parametrize("seg", ["\u00b2", "9" * 5000])
def test_mqm_segment_ids_that_are_not_integers(tmp_path, seg):
    name, content, call = fuzz.seed_files()["mqm_tsv"]
    f = tmp_path / name
    f.write_bytes(content.replace(b"\t1\trater1", f"\t{seg}\trater1".encode(), 1))
    assert fuzz.check_load(f, call) == "ok"


def test_qags_doc_key_that_is_a_unicode_digit(tmp_path):
    name, content, call = fuzz.seed_files()["qags_bartscore_jsonl"]
    f = tmp_path / name
    f.write_bytes(content.replace(b'"d0"', '"\u00b2"'.encode()))
    df, _ = load_examples("qags_xsum", str(f))
    assert df["doc_index"].tolist()[:1] == [0]


def test_corrupt_deflate_stream_in_a_gzipped_mqm_file(tmp_path):
    raw = bytearray(gzip.compress(b"system\tdoc\n" * 50, mtime=0))
    raw[16] ^= 0xFF  # inside the deflate data: zlib.error, which is neither OSError nor EOFError
    f = tmp_path / "mqm_ted_zhen.tsv.gz"
    f.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"mqm_ted_zhen\.tsv\.gz: cannot read \(error: Error -3 while decompressing"):
        load_examples("mqm", str(f))


def test_parquet_errors_are_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pd.DataFrame({"src": ["a"], "mt": ["b"], "q": [1]}))
    meta = json.loads(table.schema.metadata[b"pandas"])
    meta["columns"][0]["numpy_type"] = "sir"  # damaged pandas metadata: a TypeError inside pandas
    f = tmp_path / "t.parquet"
    pq.write_table(table.replace_schema_metadata({b"pandas": json.dumps(meta)}), f)
    with pytest.raises(DataError, match=r"t\.parquet: not a readable parquet file \(TypeError: data type 'sir'"):
        load_examples("table", str(f), TABLE)
    name, content, call = fuzz.seed_files()["table_parquet"]
    data = bytearray(content)
    data[len(data) // 2] ^= 0xFF  # pyarrow's thrift errors span several lines
    f.write_bytes(bytes(data))
    assert fuzz.check_load(f, call) in ("ok", "error")


def test_parquet_string_column_with_invalid_utf8(tmp_path):
    """Found by the seed-9 fuzz run: pyarrow reads such a file, pandas decodes each string only when
    it is used, and the first use (the id column) raised UnicodeDecodeError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = pa.array([b"ok", b"\xf2bad"], type=pa.binary()).view(pa.string())  # no UTF-8 check on view
    table = pa.table({"id": bad, "src": ["a", "c"], "mt": ["b", "d"], "q": [1, 2]})
    f = tmp_path / "t.parquet"
    pq.write_table(table, f)
    with pytest.raises(DataError, match=r"t\.parquet: not a readable parquet file \(ArrowInvalid: Column 0: .*"
                                        r"Invalid UTF8 sequence at string index 1\)"):
        load_examples("table", str(f), TABLE)
