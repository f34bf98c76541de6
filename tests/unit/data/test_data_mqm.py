"""MQM loader (data/mqm.py). Expected values come from shared/data/README.md (section 3, "verified
counts"), from rows read and scored by hand (the line numbers are given), or from a few-line
re-reading of the TSVs with the csv module here, never from the loader itself.

Tests on the real files skip when the shared data folder cannot be found, except under CI=true,
where that is a failure. Tests on small synthetic files always run."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import re
import shutil
import tarfile
from collections import defaultdict

import pandas as pd
import pytest

from cscore.data import load_config, mqm
from cscore.data.schema import DataError

TED = ("mqm", "ted_zhen", "mqm_ted_zhen.tsv")
WMT23 = ("mqm", "generalMT2023_zhen", "sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv.tar.gz")
TED_SYSTEMS = {"Borderline", "DIDI-NLP", "Facebook-AI", "IIE-MT", "MiSS", "NiuTrans", "Online-W", "SMU",
               "metricsystem1", "metricsystem2", "metricsystem3", "metricsystem4", "metricsystem5", "ref", "refB"}


@pytest.fixture(scope="module")
def ted_file(shared):
    return shared.joinpath(*TED)


@pytest.fixture(scope="module")
def wmt23_file(shared):
    return shared.joinpath(*WMT23)


@pytest.fixture(scope="module")
def ted(ted_file):
    return mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en"))


@pytest.fixture(scope="module")
def wmt23(wmt23_file):
    return mqm.load(str(wmt23_file), mqm.MqmOptions(lang_pair="zh-en"))


def score_of(df, system, seg, lang_pair="zh-en"):
    return df.set_index("id").loc[f"{lang_pair}/{system}/{seg}", "human.mqm"]


def csv_rows(handle):
    """The TSV read independently of the loader: csv module, no quoting; header -> dicts."""
    reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader)
    return [dict(zip(header, r)) for r in reader]


def wmt23_rows(file):
    with tarfile.open(file) as tar:
        member = tar.getmembers()[0]
        return csv_rows(io.TextIOWrapper(tar.extractfile(member), encoding="utf-8", newline=""))


# ----- the real files -----

def test_ted_counts_match_the_readme(ted):
    df, report = ted
    # README 3.2: 7935 scored (system, segment) pairs = 15 systems x 529 segments, one rater each
    assert len(df) == 7935 and report.n_read == 7935 and not report.dropped
    assert set(df["system"]) == TED_SYSTEMS and df["group"].nunique() == 529
    assert (df.groupby("group").size() == 15).all() and (df["n_raters"] == 1).all()
    assert set(df["task"]) == {"translation"} and set(df["lang_pair"]) == {"zh-en"}
    assert df["reference"].isna().all()
    s = df["human.mqm"]
    assert s.min() == -25.0 and s.max() == 0.0          # README: range -25.0 to 0.0
    assert round(s.mean(), 2) == -2.34                   # README: mean -2.34
    assert round((s == 0).mean(), 2) == 0.54             # README: 54% exactly 0
    # README: system means (as positive penalties) refB 0.42, DIDI-NLP 1.65, ref 5.52
    means = -df.groupby("system")["human.mqm"].mean()
    assert (round(means["refB"], 2), round(means["DIDI-NLP"], 2), round(means["ref"], 2)) == (0.42, 1.65, 5.52)


def test_defaults_read_the_shared_files(ted):
    pd.testing.assert_frame_equal(mqm.load()[0], ted[0])  # no path: the shared TED zh-en file
    assert len(mqm.load(None, mqm.MqmOptions(lang_pair="zh-en"))[0]) == 7935


def test_ted_hand_checked_scores(ted):
    df, _ = ted
    # mqm_ted_zhen.tsv lines 110-111 (rater5): Accuracy/Omission Minor (1) + Fluency/Punctuation Minor (0.1)
    assert score_of(df, "metricsystem1", "89") == pytest.approx(-1.1)
    # lines 168-169 (rater3): Fluency/Punctuation Minor (0.1) + Style/Awkward Major (5)
    assert score_of(df, "metricsystem3", "92") == pytest.approx(-5.1)
    # line 9622: one Accuracy/Mistranslation Major; its target has an unclosed "<v>"
    assert score_of(df, "MiSS", "827") == -5.0
    row = df.set_index("id").loc["zh-en/MiSS/827"]
    assert row["hypothesis"].startswith("The same country, the same inequality") and "<v>" not in row["hypothesis"]
    # lines 2-5: Borderline's four marked errors on segment 84 are all Major
    assert score_of(df, "Borderline", "84") == -20.0


def test_ted_matches_an_independent_recomputation(ted, ted_file):
    """Every pair, scored by a few lines here (README 3.1 rules) from a csv-module reading."""
    df, _ = ted
    with open(ted_file, encoding="utf-8", newline="") as fh:
        rows = csv_rows(fh)
    assert len(rows) == 9915  # README: 9915 rows
    weight = {"Major": 5.0, "Minor": 1.0, "No-error": 0.0}
    penalty = defaultdict(float)
    target = {}
    for r in rows:
        w = 0.1 if (r["severity"], r["category"]) == ("Minor", "Fluency/Punctuation") else weight[r["severity"]]
        penalty[(r["system"], r["seg_id"])] += w  # one rater per pair in this file
        target[(r["system"], r["seg_id"])] = r["target"].replace("<v>", "").replace("</v>", "")
    got = df.set_index("id")
    assert len(penalty) == len(got)
    for (system, seg), p in penalty.items():
        assert got.loc[f"zh-en/{system}/{seg}", "human.mqm"] == pytest.approx(-p, abs=1e-9)
        assert got.loc[f"zh-en/{system}/{seg}", "hypothesis"] == target[(system, seg)].strip()


def test_wmt23_counts_match_the_readme(wmt23):
    df, report = wmt23
    # README 3.3: 3770 pairs = 10 systems x 377 segments, each rated by exactly 3 raters
    assert len(df) == 3770 and report.n_read == 3770 and not report.dropped
    assert df["system"].nunique() == 10 and df["group"].nunique() == 377 and (df["n_raters"] == 3).all()
    s = df["human.mqm"]
    assert s.min() == pytest.approx(-44.8) and s.max() == 0.0
    assert round(s.mean(), 2) == -4.54 and round((s == 0).mean(), 3) == 0.077


def test_wmt23_hand_checked_multi_rater_scores(wmt23):
    df, _ = wmt23
    # Line numbers in the TSV inside the archive. Non-translation! (25) from two of three raters:
    # 1946 rater1 Non-translation!; 1947 rater3 Non-translation!; 1948-1950 rater2 3 x Major
    assert score_of(df, "NLLB_Greedy", "30") == pytest.approx(-(25 + 25 + 15) / 3)
    # 2737 rater5 Major; 2738 rater6 Found/HOTW-test (0) + 2739 Non-translation!; 2740 rater3 Major
    assert score_of(df, "NLLB_MBR_BLEU", "41") == pytest.approx(-(5 + 25 + 5) / 3)
    # 1051 rater7 Major; 1052-1054 rater1 Major + Minor + Minor Fluency/Punctuation; 1055 rater2 Major
    assert score_of(df, "HW-TSC", "16") == pytest.approx(-(5 + 6.1 + 5) / 3)
    # 1079 rater7 No-error; 1080-1082 rater1 5 + 1 + 0.1; 1083 rater2 Minor
    assert score_of(df, "ONLINE-B", "16") == pytest.approx(-(0 + 6.1 + 1) / 3)
    # 103 rater2 Minor; 104-105 rater7 Found (0) + Minor; 106 rater4 Minor
    assert score_of(df, "ONLINE-M", "2") == pytest.approx(-1.0)


def test_wmt23_tool_variant_equals_the_stored_metric(wmt23_file):
    """README 3.3: with Source issue and Creative Reinterpretation at weight 0, the score equals
    minus metadata.segment.metrics.MQM for all 3770 pairs (a value the rating tool stored)."""
    stored = {}
    for r in wmt23_rows(wmt23_file):
        if '"segment"' in r["metadata"]:
            meta = json.loads(r["metadata"])
            if "segment" in meta:
                stored[(r["system"], r["globalSegId"])] = -meta["segment"]["metrics"]["MQM"]
    assert len(stored) == 3770
    df, _ = mqm.load(str(wmt23_file), mqm.MqmOptions(
        zero_weight_categories=["Source issue", "Accuracy/Creative Reinterpretation"]))
    got = df.set_index("id")["human.mqm"]
    assert round(got.mean(), 2) == -4.52  # README: variant mean -4.52
    for (system, seg), value in stored.items():
        assert got[f"zh-en/{system}/{seg}"] == pytest.approx(value, abs=1e-9)


def test_wmt23_lang_pair_is_read_from_doc_and_texts_are_clean(wmt23_file):
    df, _ = mqm.load(str(wmt23_file))  # no lang_pair: the doc suffix ":zh-en" gives it
    assert set(df["lang_pair"]) == {"zh-en"} and df["id"].str.startswith("zh-en/").all()
    for col in ("source", "hypothesis"):
        assert not df[col].str.contains("<v>|</v>", regex=True).any()
        assert (df[col] == df[col].str.strip()).all()
    # one of IOL_Research/15's 12 rows carries 'wounds." ' (a space the tool added next to a mark)
    assert df.set_index("id").loc["zh-en/IOL_Research/15", "hypothesis"].endswith('self-inflicted wounds."')
    # every system of a segment shares the source
    assert (df.groupby("group")["source"].nunique() == 1).all()


def test_references_excluded_and_used(ted, ted_file):
    df, report = mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en", exclude_references=True))
    assert len(df) == 13 * 529 and not ({"ref", "refB"} & set(df["system"]))
    reason = "human reference excluded (data.exclude_references=true)"
    summary = report.summary()
    assert summary["excluded_by_reason"] == {reason: 2 * 529} and summary["dropped"] == 0
    assert report.n_read == len(df) + len(report.excluded) + len(report.dropped)
    # one console line for the 1058 rows, at INFO (a deliberate exclusion); the per-row list separately
    assert report.console_lines() == [(logging.INFO, f"mqm: excluded 1058 rows: {reason}")]
    assert report.reasons() == [{"kind": "excluded", "reason": reason, "count": 1058}]
    details = report.details()
    assert len(details) == 1058 and {d["id"].split("/")[1] for d in details} == {"ref", "refB"}
    assert details[0]["kind"] == "excluded" and details[0]["where"].startswith(f"{ted_file} line(s) ")
    assert report.summary(details=True)["details"] == details

    assert report.references == {} and report.summary()["human_references_scored"] == 0

    # refA: an alias of TED's "ref"
    df, report = mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en", reference_system="refA"))
    assert "ref" not in set(df["system"]) and len(df) == 14 * 529
    assert report.references == {"refB": 529}  # the other reference is still scored as a system, and says so
    assert report.console_lines()[-1] == (logging.INFO, "mqm: 529 human-reference rows (system refB) scored as a "
                                                        "system; data.exclude_references=true drops them")
    assert report.summary()["excluded_by_reason"] == {"used as the reference (data.reference_system=ref)": 529}
    with open(ted_file, encoding="utf-8", newline="") as fh:
        ref84 = next(r["target"] for r in csv_rows(fh) if r["system"] == "ref" and r["seg_id"] == "84")
    assert (df.loc[df["group"] == "zh-en/84", "reference"] == re.sub("</?v>", "", ref84)).all()
    assert df["reference"].notna().all()

    df, report = mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en", exclude_systems=["SMU", "MiSS"]))
    assert len(df) == 13 * 529
    assert report.summary()["excluded_by_reason"] == {"excluded system (data.exclude_systems)": 1058}
    with pytest.raises(DataError, match="unknown system"):
        mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en", exclude_systems=["NoSuchSystem"]))
    with pytest.raises(DataError, match="data.reference_system=refZ: no such system"):
        mqm.load(str(ted_file), mqm.MqmOptions(lang_pair="zh-en", reference_system="refZ"))


def test_plain_gz_and_tar_gz_give_the_same_table(ted, ted_file, tmp_path):
    gz = tmp_path / "ted.tsv.gz"
    with open(ted_file, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    tgz = tmp_path / "ted.tsv.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(ted_file, arcname="mqm_ted_zhen.tsv")
    plain, _ = ted
    for file in (gz, tgz):
        df, _ = mqm.load(str(file), mqm.MqmOptions(lang_pair="zh-en"))
        pd.testing.assert_frame_equal(df, plain)


# ----- synthetic files -----

HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"


def write(tmp_path, text, name="bad.tsv"):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return str(f)


def line(system="A", seg="1", rater="r1", source="源。", target="A target.", category="No-error",
         severity="No-error", doc="d1"):
    return f"{system}\t{doc}\t1\t{seg}\t{rater}\t{source}\t{target}\t{category}\t{severity}\n"


def test_malformed_files_name_file_and_line(tmp_path):
    with pytest.raises(DataError, match=r"bad\.tsv:1: header lacks column\(s\) \['severity'\]"):
        mqm.load(write(tmp_path, HEADER.replace("\tseverity", "") + "A\td\t1\t1\tr\ts\tt\tc\n"),
                 mqm.MqmOptions(lang_pair="zh-en"))
    with pytest.raises(DataError, match=r"bad\.tsv:3: unknown severity 'Critical'"):
        mqm.load(write(tmp_path, HEADER + line() + line(category="Accuracy/Addition", severity="Critical")),
                 mqm.MqmOptions(lang_pair="zh-en"))
    with pytest.raises(DataError, match=r"bad\.tsv:2: expected 9 tab-separated fields, found 8"):
        mqm.load(write(tmp_path, HEADER + line().replace("\td1", "")), mqm.MqmOptions(lang_pair="zh-en"))
    with pytest.raises(DataError, match=r"bad\.tsv:2: category 'Accuracy/Addition' with severity 'No-error'"):
        mqm.load(write(tmp_path, HEADER + line(category="Accuracy/Addition")), mqm.MqmOptions(lang_pair="zh-en"))
    with pytest.raises(DataError, match=r"bad\.tsv:2: empty 'system'"):
        mqm.load(write(tmp_path, HEADER + line(system=" ")), mqm.MqmOptions(lang_pair="zh-en"))
    with pytest.raises(DataError, match=r"bad\.tsv: cannot tell the language pair .*set data\.lang_pair, "
                                        r"e\.g\. data\.lang_pair=zh-en$"):
        mqm.load(write(tmp_path, HEADER + line()))
    with pytest.raises(DataError, match=re.escape("data=mqm: unknown option data.lang_pairs (did you mean "
                                                  "data.lang_pair?); allowed: data.lang_pair, ")):
        load_config({"name": "mqm", "path": write(tmp_path, HEADER + line()), "lang_pairs": "zh-en"})


def test_quotes_spans_weights_and_inconsistent_rows(tmp_path):
    text = HEADER + "".join([
        line("A", "1", "r1", '"引号', '"Quoted <v>text</v>', "Fluency/Punctuation", "Minor"),
        line("A", "1", "r2", '"引号', '"Quoted text', "Style/Awkward", "Major"),
        line("A", "1", "r2", '"<v>引号</v>', '"Quoted text', "Accuracy/Omission", "Minor"),
        line("B", "1", "r1", '"引号', "<v>Garbage</v>", "Non-translation!", "Major"),
        line("B", "1", "r3", '"引号', "Garbage", "No-error", "No-error"),
        line("C", "1", "r1", '"引号', "One text.", "No-error", "No-error"),
        line("C", "1", "r2", '"引号', "Another text.", "No-error", "No-error"),
    ])
    df, report = mqm.load(write(tmp_path, text, "ok.tsv"), mqm.MqmOptions(lang_pair="xx-yy"))
    got = df.set_index("id")
    assert got.loc["xx-yy/A/1", "human.mqm"] == pytest.approx(-(0.1 + 6) / 2)
    assert got.loc["xx-yy/A/1", "hypothesis"] == '"Quoted text' and got.loc["xx-yy/A/1", "source"] == '"引号'
    assert got.loc["xx-yy/B/1", "human.mqm"] == pytest.approx(-25 / 2)
    assert list(got["n_raters"]) == [2, 2] and set(got["group"]) == {"xx-yy/1"}
    assert report.summary()["dropped_by_reason"] == {"inconsistent target text": 1}
    assert report.dropped[0]["id"] == "xx-yy/C/1" and "line(s) 7,8" in report.dropped[0]["where"]


def test_wmt23_layout_and_load_many(tmp_path):
    header = ("system\tdoc\tdocSegId\tglobalSegId\trater\tsource\ttarget\tcategory\tseverity\tmetadata\t"
              "# Documentation: https://example.org\n")
    meta = '{"side": 1, "note": "a \\"quoted\\" note"}'
    zh = header + "".join(
        f"{s}\tnews_x.1:zh-en\t1\t{g}\t{r}\t源{g}\tT {s}{g}\t{c}\t{v}\t{meta}\n"
        for s, g, r, c, v in [("S1", "7", "r1", "Accuracy/Mistranslation", "Major"),
                              ("S1", "7", "r2", "Found", "HOTW-test"), ("S1", "7", "r2", "No-error", "No-error"),
                              ("S2", "7", "r1", "Source issue", "Minor"), ("refA", "7", "r1", "No-error", "No-error")])
    de = HEADER + line("S1", "7", source="Quelle.", target="Ziel.", category="Fluency/Spelling", severity="Minor")
    files = {"zh-en": write(tmp_path, zh, "zh.tsv"), "en-de": write(tmp_path, de, "de.tsv")}
    df, report = mqm.load_many(files, scoring=mqm.MqmScoring(exclude_references=True))
    got = df.set_index("id")["human.mqm"]
    assert got.to_dict() == {"zh-en/S1/7": -2.5, "zh-en/S2/7": -1.0, "en-de/S1/7": -1.0}
    assert set(df["group"]) == {"zh-en/7", "en-de/7"} and set(df["lang_pair"]) == {"zh-en", "en-de"}
    assert report.n_read == 4 and [d["id"] for d in report.excluded] == ["zh-en/refA/7"] and not report.dropped
    assert len(report.source_files) == 2
    df, _ = mqm.load(files["zh-en"], mqm.MqmOptions(zero_weight_categories=["Source issue"]))
    assert df.set_index("id").loc["zh-en/S2/7", "human.mqm"] == 0.0
    with pytest.raises(DataError, match="unknown system"):
        mqm.load_many(files, scoring=mqm.MqmScoring(exclude_systems=["S9"]))


def test_error_weight_rules():
    weight = mqm.error_weight_tenths  # in tenths of a point
    assert weight("Fluency/Punctuation", "Minor") == 1
    assert weight("Fluency/Punctuation", "Major") == 50
    assert weight("Non-translation!", "Major") == 250
    assert weight("Source error", "Minor") == 10
    assert weight("No-error", "No-error") == 0 and weight("Other", "Neutral") == 0
    assert weight("Found", "HOTW-test") == 0
    assert [mqm.is_reference(s) for s in ("ref", "refA", "ref-B", "ref.C", "Human-A.0", "refinery", "SMU")] == \
        [True, True, True, True, True, False, False]
