"""Prompts, splits, multi-pair MQM configs and the `cscore data` commands."""

import json
import subprocess
import sys
from dataclasses import dataclass

import pandas as pd
import pytest

from cscore.data import load_examples, prompts, splits
from cscore.data.loader import option
from cscore.data.schema import DataError
from cscore.data.wmt import WmtOptions

needs_shared = pytest.mark.usefixtures("shared")  # skips without the shared/data folder (fails under CI=true)


def table(**cols):
    base = {"id": ["a", "b"], "group": ["g1", "g2"], "system": ["s", "s"], "task": ["translation", "summarization"],
            "source": ["Hallo Welt.", "An article."], "reference": ["Hello world.", None],
            "hypothesis": ["Hello world!", "A summary."], "lang_pair": ["de-en", None]}
    base.update(cols)
    return pd.DataFrame(base)


def test_prompts_follow_task_and_language_pair():
    p, spans = prompts.build(table())
    assert p[0] == "Translate the following sentence to English:\nHallo Welt.\n"
    assert p[1].startswith("Write an accurate, relevant, and coherent summary") and "An article." in p[1]
    assert [q[a:b] for q, (a, b) in zip(p, spans)] == ["Hallo Welt.", "An article."]
    p, _ = prompts.build(table(lang_pair=["en-zh", None]))
    assert "to Chinese:" in p[0]


def test_reference_condition_fills_the_reference_and_needs_one():
    df = table().iloc[:1]
    p, (span,) = prompts.build(df, condition="reference")
    assert p[0][span[0]:span[1]] == "Hello world." and "English" in p[0]
    with pytest.raises(ValueError, match="has no reference"):
        prompts.build(table(), condition="reference")


def test_chat_wrapping_moves_the_span():
    p, [(a, b), _] = prompts.build(table(), chat=lambda t: f"<user>{t}</user><assistant>")
    assert p[0].startswith("<user>Translate") and p[0][a:b] == "Hallo Welt."


def test_template_override_from_data_config():
    p, _ = prompts.build(table(), template="Source: {source}\nOutput: ")
    assert p == ["Source: Hallo Welt.\nOutput: ", "Source: An article.\nOutput: "]


def test_split_is_deterministic_by_group_and_partitions_rows():
    df = pd.DataFrame({"group": [f"d{i // 3}" for i in range(300)], "id": range(300)})
    dev, test = splits.select(df, "dev", 0.1, 0), splits.select(df, "test", 0.1, 0)
    assert len(dev) + len(test) == 300 and set(dev["id"]).isdisjoint(test["id"])
    assert dev["group"].nunique() == 10  # 10 % of 100 documents
    assert set(dev["group"]).isdisjoint(test["group"])
    assert splits.select(df, "dev", 0.1, 0).equals(dev)
    assert set(splits.select(df, "dev", 0.1, 1)["group"]) != set(dev["group"])


@needs_shared
def test_mqm23_selects_pairs_and_names_missing_files():
    df, _ = load_examples("mqm23", None, WmtOptions(pairs=["zh-en"], files={"zh-en": [
        "generalMT2023_zhen/sxs_mqm_generalMT2023_zhen.3ratingsPerSegment.tsv.tar.gz"]}))
    assert len(df) == 3770 and set(df["lang_pair"]) == {"zh-en"}
    with pytest.raises(DataError, match=r"missing MQM file\(s\) for he-en: .* Looked for .*mqm_generalMT2023_heen.tsv"):
        load_examples("mqm23", None, WmtOptions(pairs=["he-en"], files={
            "he-en": ["generalMT2023/heen/mqm_generalMT2023_heen.tsv"]}))


@needs_shared
def test_data_export_writes_the_validated_table(tmp_path, cscore_main):
    out = tmp_path / "q.jsonl"  # in this process: `cscore data` scores nothing (no interpreter start-up)
    res = cscore_main("data", "export", "data=mqm23", "data.pairs=[zh-en]", f"out={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3770 and rows[0]["task"] == "translation" and "human.mqm" in rows[0]
    res = cscore_main("data", "export", "data=mqm22", f"out={tmp_path / 'x.parquet'}", cwd=tmp_path)
    assert res.returncode == 2 and "mqm22: missing MQM file(s)" in res.stderr and "data.paths" in res.stderr


def test_data_check_prints_a_card(tmp_path, tiny_tokenizer, cscore_main):
    res = cscore_main("data", "check", "data=demo", f"tokenizer={tiny_tokenizer}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "- items: 160" in res.stdout and "- groups: 20" in res.stdout and "| overall | 160 | 1 |" in res.stdout
    assert "| hypothesis |" in res.stdout and "dropped: 0" in res.stdout


def test_every_loader_is_load_path_and_options():
    """``load(path=None, options=None)``, ``options`` its ``Options`` (no keyword catch-all)."""
    import inspect

    from cscore.data import LOADERS

    for name, loader in LOADERS.items():
        params = [p for p in inspect.signature(loader.load).parameters.values() if p.kind is not p.KEYWORD_ONLY]
        assert [(p.name, p.default) for p in params] == [("path", None), ("options", None)], name
        assert not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(loader.load).parameters.values()), name


def test_a_run_loads_its_typed_data_section_as_the_composed_one():
    """``load_data`` reads the run's typed ``Data`` (every key present, defaults filled in): its
    loader gets the options it takes, so the rows are those of the section as composed."""
    from cscore.config.groups import Data
    from cscore.data import load_config
    from cscore.data.registry import load_data

    typed, report = load_data(Data(name="demo", template="x {source}"))
    given, _ = load_config({"name": "demo", "path": None, "template": "x {source}"})
    pd.testing.assert_frame_equal(typed, given)
    assert len(typed) == 160 and not report.dropped


def test_load_config_hands_every_key_but_the_runners_to_the_loader(tmp_path):
    from cscore.data import load_config
    from cscore.data.options import RUNNER_KEYS, loader_options

    data = {"name": "demo", "path": None, "template": "x {source}", "split_by": None, "foo": 1}
    assert loader_options(data) == {"foo": 1} and set(RUNNER_KEYS) == {
        "name",
        "path",
        "template",
        "split_by",
        "judge_aspect",
    }
    with pytest.raises(DataError, match=r"^data=demo: unknown option data\.foo;"):
        load_config(data)
    df, _ = load_config({**data, "foo": None})  # None: not given
    assert len(df) == 160


def test_data_error_is_a_cscore_error_and_a_value_error():
    from cscore.errors import CscoreError

    assert issubclass(DataError, CscoreError) and issubclass(DataError, ValueError)


def test_the_data_command_does_not_import_torch():
    code = "import sys, cscore.cli.data_cmd, cscore.data; print('torch' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "False", res.stderr


def test_registry_tasks_are_the_tasks_the_loaders_write():
    """Each loader's ``task`` (read before any data loads, to pick the prompt template) agrees with
    the rows the demo loader writes; every loader has one but the user's own table."""
    from cscore.data import registry

    assert {n for n in registry.LOADERS if registry.task_of(n) is None} == {"table"}
    assert registry.task_of("no_such_data") is None
    examples, _ = registry.load_examples("demo")
    assert set(examples["task"]) == {registry.task_of("demo")} == {"summarization"}
    assert registry.task_of("mqm23") == "translation" and registry.task_of("fed") == "dialogue"


def test_a_loader_registers_by_decorator_once_and_is_found_by_name(monkeypatch):
    """A loader is a Loader subclass under @LOADERS; a second one under a taken name is refused;
    an unknown name is one DataError line with its did-you-mean."""
    from cscore.data import registry
    from cscore.errors import CscoreError

    monkeypatch.setattr(registry.LOADERS, "entries", dict(registry.LOADERS.entries))

    @dataclass
    class TinyOptions:
        level: int | None = option(doc="a level")

    @registry.LOADERS
    class Tiny(registry.Loader):
        name = "tiny_data"
        task = "summarization"
        Options = TinyOptions
        load = staticmethod(lambda path=None, options=None: ("table", options))

    assert registry.load_examples("tiny_data", None, TinyOptions(level=2)) == ("table", TinyOptions(level=2))
    with pytest.raises(TypeError, match="data=tiny_data takes a TinyOptions, got dict"):
        registry.load_examples("tiny_data", None, {"level": 2})
    assert registry.options_of({"name": "tiny_data", "path": None, "level": 2}) == TinyOptions(level=2)
    assert registry.task_of("tiny_data") == "summarization"
    with pytest.raises(CscoreError, match="dataset 'demo' is registered twice"):
        registry.LOADERS(type("Demo2", (registry.Loader,), {"name": "demo"}))
    with pytest.raises(DataError, match=r"^unknown dataset data=tiny_dta \(did you mean data=tiny_data\?\); known: "):
        registry.load_examples("tiny_dta")
