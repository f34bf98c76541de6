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
        auto = threads.apply("auto")  # the machine's load moves: its count is pinned by the next test
        assert 1 <= auto <= len(os.sched_getaffinity(0)) and (auto == 1 or os.cpu_count() > threads.SMALL)
        assert threads.apply(None) == before  # torch's own count, not the previous job's
    finally:
        torch.set_num_threads(before)


def test_auto_takes_what_the_machine_has_free():
    """Issue 39: 16 cores with a load of 5.4: round(10.6) = 11 threads; all 8 this process may use
    when the other 8 are idle enough; at most OMP_NUM_THREADS; at least 1 under a load past the
    cores; 1 on a 2-core machine whatever its load."""
    assert threads.free_cores(cores=16, load=5.4, allowed=16, env={}) == 11
    assert threads.free_cores(cores=16, load=5.4, allowed=8, env={}) == 8
    assert threads.free_cores(cores=16, load=5.4, allowed=16, env={"OMP_NUM_THREADS": "4"}) == 4
    assert threads.free_cores(cores=16, load=40.0, allowed=16, env={}) == 1
    assert threads.free_cores(cores=2, load=0.0, allowed=2, env={}) == 1
    assert threads.free_cores(cores=4, load=0.3, allowed=4, env={"OMP_NUM_THREADS": "x"}) == 4


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


@pytest.mark.slow
def test_the_default_is_auto(tiny_dirs, tmp_path, cscore_cli):
    """A run without runtime.threads records auto's count: on a 2-core machine 1, where torch's own
    default is 2 (OMP_NUM_THREADS=2, which auto also takes as its cap)."""
    args = [a for a in run_args(tiny_dirs, tmp_path, "x") if not a.startswith("runtime.threads=")]
    res = cscore_cli(*args, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert res.returncode == 0, res.stderr
    recorded = json.loads((tmp_path / "r" / "metrics.json").read_text())["speed"]["threads"]
    assert 1 <= recorded <= min(2, len(os.sched_getaffinity(0)))  # auto's count (the load moves meanwhile)
    if (os.cpu_count() or 1) <= threads.SMALL:
        assert recorded == 1


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
