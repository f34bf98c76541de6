"""Property-based test of the multi-file MQM22 / MQM23 loader (``data/wmt.py``): random language
pair selections, file-name lists, per-pair paths and roots (some pointing at a valid MQM file, some
at nothing, some of the wrong type) give a validated table or a one-line DataError, never a
traceback; a table holds exactly the pairs whose file was found."""

from __future__ import annotations

import importlib.util

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cscore.data import wmt
from cscore.data.schema import DataError
from cscore.tests.support import REPO

spec = importlib.util.spec_from_file_location("cscore_fuzz", REPO / "scripts" / "fuzz.py")
fuzz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz)

PAIRS = ["zh-en", "en-de", "he-en"]
name_or_junk = st.one_of(st.sampled_from(["good.tsv", "missing.tsv", "good.tsv.gz", "/nowhere/x.tsv", "", "sub/"]),
                         st.text(max_size=8), st.integers(), st.none())


random_options = st.fixed_dictionaries({
    "pairs": st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(PAIRS), st.text(max_size=5)), max_size=3),
                       st.text(max_size=5), st.integers()),
    "files": st.one_of(st.none(), st.dictionaries(st.sampled_from(PAIRS), st.lists(name_or_junk, max_size=3),
                                                  max_size=3), st.lists(st.text(max_size=3), max_size=2)),
    "paths": st.one_of(st.none(), st.dictionaries(st.sampled_from(PAIRS), name_or_junk, max_size=2)),
    "root": st.one_of(st.none(), st.sampled_from(["ROOT", "ROOT/none", "ROOT/good.tsv"]), st.integers()),
    "path": st.one_of(st.none(), st.sampled_from(["ROOT/good.tsv", "ROOT/missing.tsv"]))})
# well-formed settings, some finding every file: the success path is reached too
good_name = st.sampled_from(["good.tsv", "good.tsv", "missing.tsv"])
valid_options = st.fixed_dictionaries({
    "pairs": st.one_of(st.none(), st.lists(st.sampled_from(PAIRS), min_size=1, max_size=2, unique=True)),
    "files": st.dictionaries(st.sampled_from(PAIRS), st.lists(good_name, min_size=1, max_size=2), min_size=1),
    "paths": st.one_of(st.none(), st.dictionaries(st.sampled_from(PAIRS), good_name, max_size=1)),
    "root": st.just("ROOT"), "path": st.none()})


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(opts=st.one_of(random_options, valid_options))
def test_options_load_or_fail_in_one_line(tmp_path_factory, opts):
    pairs, files, paths, root, path = (opts[k] for k in ("pairs", "files", "paths", "root", "path"))
    folder = tmp_path_factory.mktemp("wmt")
    file_name, content, _ = fuzz.seed_files()["mqm_tsv"]
    (folder / "good.tsv").write_bytes(content)
    (folder / "sub").mkdir()

    def place(v):
        return v.replace("ROOT", str(folder)) if isinstance(v, str) else v

    def local(v):  # relative names in files / paths live in the folder
        return str(folder / v) if isinstance(v, str) and v and not v.startswith("/") else v

    paths = {k: local(v) for k, v in paths.items()} if isinstance(paths, dict) else paths
    try:
        df, report = wmt.load(place(path), wmt.WmtOptions(pairs=pairs, files=files, paths=paths, root=place(root)),
                              name="mqm23")
    except DataError as err:
        assert "\n" not in str(err) and str(err).startswith("mqm23"), str(err)
        return
    selected = pairs if pairs is not None else list(files)
    assert len(df) and set(df["lang_pair"]) == set(selected)  # every selected pair, and only those
    assert df["id"].is_unique and not df["hypothesis"].isna().any()


def test_a_well_formed_selection_loads(tmp_path):
    file_name, content, _ = fuzz.seed_files()["mqm_tsv"]
    (tmp_path / "good.tsv").write_bytes(content)
    df, _ = wmt.load(None, wmt.WmtOptions(pairs=["zh-en", "en-de"], root=str(tmp_path),
                                          files={"zh-en": ["missing.tsv", "good.tsv"], "en-de": ["good.tsv"]}),
                     name="mqm23")
    assert sorted(set(df["lang_pair"])) == ["en-de", "zh-en"] and len(df) % 2 == 0
