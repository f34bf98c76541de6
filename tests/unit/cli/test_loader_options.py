"""A loader declares its own options (its ``Options`` dataclass): a new one reaches the loader
through ``cscore run`` (the precheck, the typed config, the job) with no other file touched, and
a key the loader does not declare is a one-line config error naming those it does (issue 48)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from cscore.data import demo, registry
from cscore.data.loader import Loader, option
from cscore.tests.support.cli import tiny_args

SEEN: list = []  # the options each call of the probe's loader got


@dataclass
class ProbeOptions:
    keep: int | None = option(doc="read only the demo set's first `keep` rows")


def probe_load(path=None, options: ProbeOptions | None = None):
    """The demo set, cut to its first ``keep`` rows (an option no other file knows)."""
    SEEN.append(options)
    table, report = demo.load(path)
    return table.head((options or ProbeOptions()).keep).reset_index(drop=True), report


class Probe(Loader):
    name = "probe"
    task = "summarization"
    Options = ProbeOptions
    load = staticmethod(probe_load)


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setattr(registry.LOADERS, "entries", dict(registry.LOADERS.entries))
    registry.LOADERS(Probe)
    SEEN.clear()


def test_a_new_loader_option_reaches_the_loader_through_cscore_run(probe, tiny_dirs, tmp_path, cscore_main):
    run = tmp_path / "run"
    res = cscore_main("run", *tiny_args(tiny_dirs, "method=single", "data.name=probe", "+data.keep=5",
                                        f"hydra.run.dir={run}", f"cache.dir={tmp_path / 'stats'}"), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert SEEN == [ProbeOptions(keep=5)]  # read once, by the precheck; the job took what it read
    assert json.loads((run / "metrics.json").read_text())["n_items"] == 5


def test_an_option_the_loader_does_not_declare_is_one_line_with_exit_2(probe, tmp_path, cscore_main):
    res = cscore_main("run", "data.name=probe", "+data.kep=5", cwd=tmp_path)
    assert res.returncode == 2 and not SEEN
    assert res.stderr.strip().splitlines() == [
        "cscore: error: data=probe: unknown option data.kep (did you mean data.keep?); allowed: data.keep, "
        "data.path, data.template, data.split_by, data.judge_aspect"]
    assert not (tmp_path / "outputs").exists()


def test_the_typed_data_section_holds_the_common_keys_and_the_loaders_options(probe):
    from cscore.run.typed import typed_data

    data = typed_data({"name": "probe", "path": None, "template": "t {source}", "keep": 3})
    assert (data.name, data.template, data.options) == ("probe", "t {source}", ProbeOptions(keep=3))
    assert registry.load_data(data)[0]["id"].tolist() == demo.load()[0]["id"].tolist()[:3]
    assert len(registry.load_config({"name": "probe", "keep": 2})[0]) == 2  # `cscore data check` / export
    assert SEEN[-1] == ProbeOptions(keep=2)
