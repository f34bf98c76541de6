"""Killed runs: a run directory is complete only when it holds a finished run of the very config
asked for. A real `cscore run` killed with SIGKILL in the middle of a re-run with another config
must not leave the old metrics.json marking the directory complete (it did: the old scores were
then skipped over as the new config's). scripts/reliability.py does this at scale."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st

from cscore import rundir

FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def run_args(tiny_dirs, data: Path, out: Path, cache: Path, gamma: float) -> list[str]:
    return ["run", f"pair.expert.path={tiny_dirs.expert}", "pair.amateur.path=null", "pair.amateur.early_exit=2",
            "pair.name=tiny", "runtime.progress=false", "data=table", f"data.path={data}", "data.task=summarization",
            "data.columns.human=[q]", f"method.gamma={gamma}", f"hydra.run.dir={out}", f"cache.dir={cache}"]


def small_table(path: Path, n: int = 12) -> Path:
    words = ["bridge", "river", "council", "vaccine", "match", "goal", "library", "storm"]
    rows = [{"source": f"The {words[i % 8]} story number {i} was reported on Monday.",
             "hypothesis": f"A {words[(i * 3) % 8]} story {i}.", "q": i % 5} for i in range(n)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_sigkill_during_a_rerun_with_another_config_is_not_complete(tiny_dirs, tmp_path, cscore_cli):
    data, out, cache = small_table(tmp_path / "t.csv"), tmp_path / "run", tmp_path / "cache"
    first = cscore_cli(*run_args(tiny_dirs, data, out, cache, 0.1), cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    old = pd.read_parquet(out / rundir.SCORES)["score.contrast"]
    # the same directory, another gamma: killed once its config.yaml is written, before it finishes
    proc = subprocess.Popen([sys.executable, "-m", "cscore.cli.main", *run_args(tiny_dirs, data, out, cache, 0.5)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and "gamma: 0.5" not in (out / rundir.CONFIG).read_text(errors="replace"):
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert "gamma: 0.5" in (out / rundir.CONFIG).read_text()
    assert not rundir.is_complete(out)  # the old metrics.json is gone
    again = cscore_cli(*run_args(tiny_dirs, data, out, cache, 0.5), cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "is complete" not in again.stderr  # it was not skipped
    new = pd.read_parquet(out / rundir.SCORES)["score.contrast"]
    fresh = cscore_cli(*run_args(tiny_dirs, data, tmp_path / "fresh", cache, 0.5), cwd=tmp_path, timeout=300)
    assert fresh.returncode == 0
    assert new.tolist() == pd.read_parquet(tmp_path / "fresh" / rundir.SCORES)["score.contrast"].tolist()
    assert new.tolist() != old.tolist()


COMPLETE = {k: 0 for k in rundir.METRICS_KEYS}


@FAST
@given(st.sampled_from([rundir.METRICS, rundir.CONFIG, rundir.SCORES]),
       st.sampled_from(["truncate", "delete", "garbage", "nested", "not_utf8", "drop_key"]), st.integers(0, 10 ** 6))
def test_damaged_run_directories_are_never_complete(tmp_path_factory, name, kind, where):
    d = tmp_path_factory.mktemp("run")
    config = "method:\n  gamma: 0.1\n"
    (d / rundir.CONFIG).write_text(config)
    pd.DataFrame({"id": ["a"], "score.x": [1.0]}).to_parquet(d / rundir.SCORES)
    rundir.write_metrics(d, dict(COMPLETE))
    assert rundir.is_complete(d, config)
    f = d / name
    data = f.read_bytes()
    if kind == "truncate":
        f.write_bytes(data[:where % len(data)])  # (shorter: never the same file)
    elif kind == "delete":
        f.unlink()
    elif kind == "garbage":
        f.write_bytes(os.urandom(1 + where % 64))
    elif kind == "nested":
        f.write_text("[" * 100000)
    elif kind == "not_utf8":
        f.write_bytes(b"\xff\xfe" + data)
    else:
        f.write_text(json.dumps({k: 0 for k in rundir.METRICS_KEYS[:-1]}))
    assert not rundir.is_complete(d, config)  # never raises
    assert rundir.read_failure(d) is None


def test_two_sweeps_at_once_share_one_cache_and_sweep_dir(tiny_dirs, tmp_path):
    """The SLURM case: the same sweep submitted twice, both running at once on one statistics cache
    and one sweep directory. The forward pass runs once in all; every job directory ends complete
    (its scores.parquet matching the checksum in its metrics.json: no torn write) with one answer."""
    data, cache, sweep = small_table(tmp_path / "t.csv"), tmp_path / "cache", tmp_path / "sweep"
    args = run_args(tiny_dirs, data, tmp_path / "unused", cache, 0.1)
    args = [a for a in args if not a.startswith(("method.gamma=", "hydra.run.dir="))]
    cmd = [sys.executable, "-m", "cscore.cli.main", "run", "-m", *args[1:], "method.gamma=0.1,0.3,0.5",
           f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum(o.count(" items in ") for o in outs) == 1  # "scored N items in": one forward pass in all
    jobs = sorted(p for p in sweep.iterdir() if p.name.isdigit())
    assert [j.name for j in jobs] == ["0", "1", "2"] and all(rundir.is_complete(j) for j in jobs)
    scores = [pd.read_parquet(j / rundir.SCORES)["score.contrast"].tolist() for j in jobs]
    assert len({tuple(s) for s in scores}) == 3  # three gammas, three answers
