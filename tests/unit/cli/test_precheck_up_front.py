"""Mistakes `cscore run` finds before anything loads (cli/precheck.py): one line, exit code 2, no
run directory, no model or data read. They used to surface inside the job, after the data and
the models had loaded: exit 1 several seconds later (an unknown data option, a data.path that
does not exist, a baseline's hub model offline, SLURM without its commands)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from cscore.cli import compose, precheck
from cscore.data import registry
from cscore.data.loader import option_names
from cscore.data.schema import DataError
from cscore.run import pair_check

SBATCH_HINT = "SLURM is not reachable: `sbatch` is not on PATH."


def assert_refused(res, message: str, cwd) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [f"cscore: error: {message}"]
    assert not (cwd / "outputs").exists()  # no run directory


def test_an_unknown_data_option_is_refused_up_front(tmp_path, cscore_main):
    res = cscore_main("run", "+data.foo=1", cwd=tmp_path)
    assert_refused(res, "data=demo: unknown option data.foo; allowed: data.path, data.template, data.split_by, "
                        "data.judge_aspect", tmp_path)
    res = cscore_main("run", "data=table", f"data.path={tmp_path}", "data.task=summarization",
                      "+data.columns.hypothesys=x", cwd=tmp_path)
    assert res.returncode == 2 and "unknown option data.columns.hypothesys (did you mean " \
                                   "data.columns.hypothesis?)" in res.stderr


def test_a_data_path_that_does_not_exist_is_refused_up_front(tmp_path, cscore_main):
    missing = tmp_path / "nonexistent.jsonl"
    res = cscore_main("run", f"data.path={missing}", cwd=tmp_path)
    assert_refused(res, f"data file {missing} does not exist (data.path={missing})", tmp_path)
    res = cscore_main("run", "-m", f"data.path={tmp_path / 'few.jsonl'},{missing}", cwd=tmp_path)
    assert res.returncode == 2 and "(multirun point data.path=" in res.stderr  # every point before the first job


@pytest.mark.parametrize("dataset", sorted(registry.LOADERS))
def test_the_up_front_data_check_agrees_with_each_loader(dataset, tmp_path):
    """The same message as loading the section (``load_config``: what `cscore data check` reads) for
    an unknown option (it lists the options the loader takes: its ``Options``); every one of them passes."""
    with pytest.raises(DataError) as by_loader:
        registry.load_config({"name": dataset, "foo": 1})
    with pytest.raises(DataError) as up_front:
        registry.check_config({"name": dataset, "foo": 1})
    assert str(up_front.value) == str(by_loader.value)
    options = option_names(registry.LOADERS.get(dataset).Options)
    registry.check_config({"name": dataset, "path": str(tmp_path), **dict.fromkeys(options)})


def test_a_baseline_hub_model_offline_is_refused_up_front(tmp_path, cscore_main, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty hub cache
    res = cscore_main("run", "method=baseline", "baseline=bartscore", cwd=tmp_path)
    assert_refused(res, "set baseline.bartscore.model= to a local model directory: facebook/bart-large-cnn is a hub "
                        "model not in the local hub cache, and the Hugging Face hub is unreachable "
                        "(HF_HUB_OFFLINE is set); weights downloaded before: set HF_HOME (or HF_HUB_CACHE) to the "
                        "folder that holds them, and HF_HUB_OFFLINE=1", tmp_path)
    res = cscore_main("run", "method=baseline", "baseline=t5score", f"baseline.t5score.model={tmp_path / 'no'}",
                      cwd=tmp_path)
    assert res.returncode == 2 and f"baseline.t5score.model={tmp_path / 'no'}: " in res.stderr
    composed = OmegaConf.to_container(compose.composed("config", ["method=baseline", "baseline=[bertscore,bartscore]"]),
                                      resolve=True)
    assert pair_check.kind_models(composed) == {  # the packaged BERTScore model is no hub id
        "baseline.bartscore.model": ("facebook/bart-large-cnn", None)}


def test_slurm_without_sbatch_is_refused_up_front(tmp_path, cscore_main, monkeypatch):
    if not precheck.installed(precheck.LAUNCHERS["slurm"]):
        pytest.skip("hydra-submitit-launcher is not installed (that is refused up front too)")
    monkeypatch.setenv("PATH", str(tmp_path))
    for launcher in ("slurm", "slurm_warm"):
        res = cscore_main("run", "-m", f"hydra/launcher={launcher}", "method.gamma=0.1,0.2", cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith(f"cscore: error: {SBATCH_HINT} hydra/launcher=slurm submits the sweep with sbatch")
        assert not (tmp_path / "outputs").exists()


# in a fresh interpreter: each mistake stops before torch (the models) or the data is imported
FRESH = """
import json, sys
from hydra.core.global_hydra import GlobalHydra
from cscore.cli.main import main
out = []
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit as stop:
        out.append(stop.code)
    GlobalHydra.instance().clear()
print(json.dumps({"codes": out, "torch": "torch" in sys.modules}))
"""


def test_the_mistakes_stop_before_torch_is_imported(tmp_path):
    cases = [["run", "+data.foo=1"], ["run", f"data.path={tmp_path / 'none.jsonl'}"],
             ["run", "method=baseline", "baseline=bartscore"]]
    env = {"PATH": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "CSCORE_CACHE": str(tmp_path / "a_file" / "c"),
           **{k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME")}}
    (tmp_path / "a_file").write_text("")
    cases.append(["run"])  # the default pair converts its GGUF model into $CSCORE_CACHE: under a file
    res = subprocess.run([sys.executable, "-c", FRESH, json.dumps(cases)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"codes": [2, 2, 2, 2], "torch": False}
    assert res.stderr.count("cscore: error: ") == 4 and "Traceback" not in res.stderr


def test_every_loader_has_its_options_for_the_up_front_check():
    from cscore.data import registry

    for name in registry.LOADERS:
        registry.check_config({"name": name})  # no KeyError for any dataset, a known one passes
