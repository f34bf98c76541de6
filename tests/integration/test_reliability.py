"""Killed runs: a run directory is complete only when it holds a finished run of the very config
asked for. A real `cscore run` killed with SIGKILL in the middle of a re-run with another config
must not leave the old metrics.json marking the directory complete (it did: the old scores were
then skipped over as the new config's). A run killed inside its forward pass resumes from the
pass's checkpoint with the same command, bit for bit; Ctrl-C at any moment is one line and exit 130.
scripts/reliability.py does this at scale."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cscore import rundir
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support import REPO

pytestmark = pytest.mark.slow  # the fast tier (-m 'not slow') leaves these out

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


def test_sigkill_during_a_rerun_with_another_config_is_not_complete(tiny_dirs, tmp_path, cscore_main):
    """The killed run is a process of its own; the runs before and after it run in this one."""
    data, out, cache = small_table(tmp_path / "t.csv"), tmp_path / "run", tmp_path / "cache"
    first = cscore_main(*run_args(tiny_dirs, data, out, cache, 0.1), cwd=tmp_path)
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
    again = cscore_main(*run_args(tiny_dirs, data, out, cache, 0.5), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "is complete" not in again.stderr  # it was not skipped
    new = pd.read_parquet(out / rundir.SCORES)["score.contrast"]
    fresh = cscore_main(*run_args(tiny_dirs, data, tmp_path / "fresh", cache, 0.5), cwd=tmp_path)  # the reference
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
        # it loses at least its last non-blank byte (a dropped trailing newline leaves a whole file)
        f.write_bytes(data[:where % len(data.rstrip())])
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
    assert not (d / rundir.FAILED).exists()  # nor is it taken for a failed run


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


# --- a pass killed inside, Ctrl-C at any moment ---------------------------------------------------


def pass_args(tiny_dirs, data: Path, out: Path, cache: Path) -> list[str]:
    """A run whose pass has many batches (a small token budget), each flushed to the checkpoint."""
    return [*run_args(tiny_dirs, data, out, cache, 0.1), "runtime.token_budget=256", "cache.checkpoint_seconds=0"]


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}  # one thread: the same sums every run
    return subprocess.Popen([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_checkpoint(proc: subprocess.Popen, cache: Path, files: int = 2) -> None:
    deadline = time.time() + 240
    while len(list(cache.glob(".partial/*/*.npz"))) < files:
        assert proc.poll() is None and time.time() < deadline, "the pass ended before its checkpoint was seen"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def long_pass(tiny_dirs, tmp_path_factory):
    """A 120-row table and its uninterrupted run's scores (a cache of its own)."""
    root = tmp_path_factory.mktemp("long_pass")
    data = small_table(root / "t.csv", n=120)
    proc = start(pass_args(tiny_dirs, data, root / "run", root / "cache"), root)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    return SimpleNamespace(data=data, scores=pd.read_parquet(root / "run" / rundir.SCORES))


def test_sigkill_inside_a_pass_then_the_same_command_resumes(tiny_dirs, tmp_path, long_pass):
    args = [a if a != "runtime.progress=false" else "runtime.progress=1000"  # the work lines, no others
            for a in pass_args(tiny_dirs, long_pass.data, tmp_path / "run", tmp_path / "cache")]
    proc = start(args, tmp_path)
    wait_for_checkpoint(proc, tmp_path / "cache")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert StatsCache(tmp_path / "cache").keys() == []  # killed inside the pass
    again = start(args, tmp_path)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-2000:]
    said = re.search(r"statistics \(expert\+amateur\): resumed (\d+) of 120 items from a checkpoint", out + err)
    assert said and 0 < int(said.group(1)) < 120
    assert f"scored {120 - int(said.group(1))} items in " in out
    # issue 47, item 10: this command's work only, the kept items named apart; one speed of that work
    kept = int(said.group(1))
    work = re.findall(r"^expert\+amateur: (\d+) items, [\d,]+ tokens to run \(.*; (\d+) more items done before "
                      r"this command, kept\)$", out, re.M)
    assert work == [(str(120 - kept), str(kept))], out[-3000:]
    assert re.search(rf"^speed: {120 - kept} items scored in [\d.]+s, [\d.]+ samples/s$", out, re.M)
    got = pd.read_parquet(tmp_path / "run" / rundir.SCORES)
    cols = [c for c in got.columns if c.startswith((rundir.SCORE, rundir.MEAN_LOGP))]
    assert cols and list(got["id"]) == list(long_pass.scores["id"])
    for c in cols:
        assert np.array_equal(got[c].to_numpy(), long_pass.scores[c].to_numpy()), c  # bit for bit
    assert list((tmp_path / "cache").glob(".partial/*/*")) == []  # the entry holds it all now


@pytest.mark.parametrize("moment", ["pass", "end", "end+0.1", "end+0.3"])
def test_sigint_at_any_moment_is_one_line_and_exit_130(tiny_dirs, tmp_path, long_pass, moment):
    """Ctrl-C inside the pass: exit 130, one line that says what the checkpoint kept. Around the end
    of the run (the summary printed; the interpreter shutting down): one line and 130, or the run
    had finished (0); never a traceback or a death by the signal (it was: exit -2)."""
    proc = start(pass_args(tiny_dirs, long_pass.data, tmp_path / "run", tmp_path / "cache"), tmp_path)
    if moment == "pass":
        wait_for_checkpoint(proc, tmp_path / "cache")
    else:
        for line in proc.stdout:
            if line.startswith("run directory:"):
                break
        time.sleep(float(moment.partition("+")[2] or 0))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert "Traceback" not in out + err and proc.returncode in (0, 130), (proc.returncode, err[-2000:])
    if proc.returncode == 130:
        last = err.strip().splitlines()[-1]
        assert last.startswith("cscore: error: interrupted; ") and last.endswith("checkpoint of an unfinished pass "
                                                                               "are kept)")
        assert sum(line.startswith("cscore: error:") for line in err.splitlines()) == 1
    if moment == "pass":
        assert proc.returncode == 130
        assert re.search(r"interrupted; statistics \(expert\+amateur\): \d+ of 120 items kept in a checkpoint; ", err)


# the quick script's cases no other test here runs: SIGKILL while an entry is written and between
# multirun jobs, SIGINT at a random moment; SIGKILL inside a pass and SIGINT during it are the tests
# above, a killed shard worker tests/system/test_shards_cli.py's, the fuzz targets test_fuzz_*.py's
# (a few inputs each here: the script's fuzz step itself)
QUICK_SUBSET = {"run, SIGKILL at cache_write", "multirun, SIGKILL at between_jobs", "run, SIGINT at random"}


def test_the_quick_reliability_script_finds_nothing(tmp_path):
    """`scripts/reliability.py --quick --only ...` (the CI-sized sweep: the cases above, 5 fuzz inputs
    per target) exits 0 and its JSON says no run lost, recomputed, corrupt or different, and no finding."""
    script = REPO / "scripts" / "reliability.py"
    details = tmp_path / "reliability.json"
    only = "cache_write,between_jobs,at random,fuzz"
    done = subprocess.run([sys.executable, str(script), "--quick", "--only", only, "--fuzz-examples", "5",
                           "--work", str(tmp_path / "work"), "--json", str(details)],
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(details.read_text())
    assert {row["case"] for row in report["rows"]} == QUICK_SUBSET
    for row in report["rows"]:
        assert row["iterations"] > 0 and not row["findings"], row
        assert row["lost"] == row["recomputed"] == row["corrupt_read_as_complete"] == row["final_differs"] == 0, row
    assert report["fuzz"] and all(0 < f["examples"] and not f["findings"] for f in report["fuzz"]), report["fuzz"]
    assert "lost/recomputed/corrupt/differing: 0; findings: 0" in done.stdout
