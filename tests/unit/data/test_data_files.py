"""Files researchers bring (issue 30, item 6): QAGS-CNNDM by name, and every published file name of
the WMT22/23 MQM releases (google/wmt-mqm-human-evaluation) found under data.root.

The expected values are worked out by hand from the small synthetic files written here; the list
of published names is written out below from the release's own file listing, not read from conf/."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from cscore.data import load_config, load_examples
from cscore.data.schema import DataError


def compose_data(*overrides: str) -> dict:
    """cfg.data as ``cscore run`` composes it."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    return OmegaConf.to_container(cfg.data, resolve=True)


# ----- QAGS-CNNDM -----

def crowd_record(article: str, votes: list[list[str]]) -> dict:
    """One article of the QAGS crowd layout: one summary sentence per list of yes/no answers."""
    return {"article": article, "summary_sentences": [
        {"sentence": f"Sentence {k}.", "responses": [{"worker_id": w, "response": a} for w, a in enumerate(answers)]}
        for k, answers in enumerate(votes)]}


def write_crowd(folder, records, name="mturk_cnndm.jsonl"):
    file = folder / name
    file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return file


def test_qags_cnndm_reads_the_crowd_file_under_its_own_name(tmp_path):
    file = write_crowd(tmp_path, [
        # majorities: yes (2 of 3), no (1 of 3), yes (3 of 3) -> fact 2/3
        crowd_record("The council approved a library.", [["yes", "yes", "no"], ["no", "yes", "no"], ["yes"] * 3]),
        # no, no, no -> 0
        crowd_record("A storm hit the coast.", [["no"] * 3, ["yes", "no", "no"], ["no", "no", "yes"]]),
    ])
    df, report = load_config(compose_data("data=qags_cnndm", f"data.path={file}"))
    assert report.dataset == "qags_cnndm" and report.source_files == [str(file)]
    assert list(df["human.fact"]) == pytest.approx([2 / 3, 0.0])
    assert set(df["system"]) == {"bottom-up-cnndm"} and set(df["task"]) == {"summarization"}
    assert df["group"].str.startswith("cnndm-").all() and df["group"].nunique() == 2
    assert list(df["id"]) == [f"{g}/bottom-up-cnndm" for g in df["group"]]
    assert list(df["hypothesis"]) == ["Sentence 0. Sentence 1. Sentence 2."] * 2
    assert list(df["doc_index"]) == [0, 1]


def test_qags_cnndm_default_file_is_looked_for_in_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CSCORE_SHARED_DATA", str(tmp_path))
    with pytest.raises(DataError, match=r"default data file qags_cnndm/mturk_cnndm\.jsonl not found"):
        load_examples("qags_cnndm")
    (tmp_path / "qags_cnndm").mkdir()
    write_crowd(tmp_path / "qags_cnndm", [crowd_record("An article.", [["yes"] * 3])])
    df, report = load_examples("qags_cnndm")
    assert report.dataset == "qags_cnndm" and list(df["human.fact"]) == [1.0]


def test_qags_xsum_rows_are_unchanged_by_the_shared_reader(tmp_path):
    file = write_crowd(tmp_path, [crowd_record("An article.", [["yes", "no", "yes"]])], "mturk_xsum.jsonl")
    df, report = load_examples("qags_xsum", str(file))
    assert report.dataset == "qags_xsum" and set(df["system"]) == {"bart-xsum"}
    assert df["group"].str.startswith("xsum-").all() and list(df["human.fact"]) == [1.0]


# ----- WMT MQM: the published names -----

HEADER = "system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity\n"

# (dataset, pair, path inside google/wmt-mqm-human-evaluation): the error-level files of the
# release's generalMT2022 and generalMT2023 folders (the 3-ratings and side-by-side re-annotations
# included; .avg_seg_scores.tsv files hold no errors and are not read).
PUBLISHED = [
    ("mqm22", "en-de", "generalMT2022/ende/mqm_generalMT2022_ende.tsv"),
    ("mqm22", "en-de", "generalMT2022/ende/mqm_generalMT2022_ende.3ratingsPerSegment.tsv"),
    ("mqm22", "zh-en", "generalMT2022/zhen/mqm_generalMT2022_zhen.tsv"),
    ("mqm22", "en-ru", "generalMT2022/enru/mqm_generalMT2022_enru.tsv"),
    ("mqm23", "en-de", "generalMT2023/ende/mqm_generalMT2023_ende.tsv"),
    ("mqm23", "en-de", "generalMT2023/ende/sxs_mqm_generalMT2023_ende.3ratingsPerSegment.tsv.tar.gz"),
    ("mqm23", "zh-en", "generalMT2023/zhen/mqm_generalMT2023_zhen.tsv"),
    ("mqm23", "zh-en", "generalMT2023/zhen/sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv.tar.gz"),
    ("mqm23", "he-en", "generalMT2023/heen/mqm_generalMT2023_heen.tsv"),
]


def write_mqm(file, text: str) -> None:
    """``text`` as ``file`` in the form its name says: plain, .gz or a one-member .tar.gz."""
    file.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    if file.name.endswith(".tar.gz"):
        with tarfile.open(file, "w:gz") as tar:
            info = tarfile.TarInfo(file.name.removesuffix(".tar.gz"))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    elif file.name.endswith(".gz"):
        file.write_bytes(gzip.compress(data))
    else:
        file.write_bytes(data)


def rows(pair: str) -> str:
    # system A: one Major error (-5); system B: one Minor (-1); one rater each
    return HEADER + "".join(f"{s}\td1\t1\t1\tr1\tsrc\tout {s}\t{c}\t{v}\n"
                            for s, c, v in [("A", "Accuracy/Mistranslation", "Major"),
                                            ("B", "Fluency/Spelling", "Minor")])


@pytest.mark.parametrize("layout", ["folders", "flat"])
@pytest.mark.parametrize("dataset,pair,published", PUBLISHED)
def test_every_published_mqm_name_is_found_under_data_root(tmp_path, dataset, pair, published, layout):
    rel = published if layout == "folders" else published.rsplit("/", 1)[1]
    write_mqm(tmp_path / rel, rows(pair))
    df, report = load_config(compose_data(f"data={dataset}", f"data.pairs=[{pair}]", f"data.root={tmp_path}"))
    assert report.source_files[0].startswith(str(tmp_path / rel))
    assert report.dataset == dataset and set(df["lang_pair"]) == {pair}
    assert df.set_index("id")["human.mqm"].to_dict() == {f"{pair}/A/1": -5.0, f"{pair}/B/1": -1.0}


def test_an_extracted_side_by_side_file_is_found_too(tmp_path):
    write_mqm(tmp_path / "sxs_mqm_generalMT2023_ende.3ratingsPerSegment.tsv", rows("en-de"))
    df, _ = load_config(compose_data("data=mqm23", "data.pairs=[en-de]", f"data.root={tmp_path}"))
    assert len(df) == 2 and set(df["lang_pair"]) == {"en-de"}
