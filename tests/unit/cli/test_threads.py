"""runtime.threads: checked with the other runtime keys, applied at the start of the job, recorded
in metrics.json (speed.threads); ``auto`` follows the CPU affinity mask of the process."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from cscore.scorers.engine import threads


@pytest.mark.parametrize("value", ["0", "-2", "many", "true", "1.5"])
def test_bad_thread_counts_are_one_line(value, tmp_path, cscore_main):
    res = cscore_main("run", f"runtime.threads={value}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [res.stderr.strip()]
    assert "runtime.threads must be an integer >= 1, auto or null, got" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "outputs").exists()


def test_apply_sets_auto_and_gives_torch_default_back():
    import torch

    before = torch.get_num_threads()
    try:
        assert threads.apply(1) == torch.get_num_threads() == 1
        assert threads.apply("auto") == len(os.sched_getaffinity(0))
        assert threads.apply(None) == before  # torch's own count, not the previous job's
    finally:
        torch.set_num_threads(before)


def run_args(tiny_dirs, tmp_path, value):
    return ["run", f"pair.expert.path={tiny_dirs.expert}", "pair.amateur.path=null", "pair.amateur.early_exit=2",
            "pair.name=tiny", "runtime.progress=false", "cache.enabled=false", "split.use=dev",
            f"runtime.threads={value}", f"hydra.run.dir={tmp_path}/r"]


@pytest.mark.slow
def test_a_run_uses_and_records_its_threads(tiny_dirs, tmp_path, cscore_cli):
    # torch's own count in the run is 2 (the suite's default is 1: conftest): the 1 is runtime.threads's
    res = cscore_cli(*run_args(tiny_dirs, tmp_path, 1), cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["speed"]["threads"] == 1


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and two usable cores")
@pytest.mark.slow
def test_auto_follows_the_affinity_mask(tiny_dirs, tmp_path):
    core = min(os.sched_getaffinity(0))
    res = subprocess.run(["taskset", "-c", str(core), sys.executable, "-m", "cscore.cli.main",
                          *run_args(tiny_dirs, tmp_path, "auto")], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "2"})  # torch's own count 2, auto's 1
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["speed"]["threads"] == 1
