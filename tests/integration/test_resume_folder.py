"""The same command after a Ctrl-C (or a failure) resumes in the folder it left (cli/resume.py),
so an interrupted run that was finished later does not read as failed; `cscore report` counts
interrupted runs apart from failed ones, and a stopped run whose very config finished later in
another folder as "finished later" (metaeval/runs.py ``run_status``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cscore import rundir
from cscore.cli.resume import earlier_dir
from cscore.metaeval.runs import run_status
from cscore.rundir import find_runs

INTERRUPTED = {"error": "KeyboardInterrupt", "stage": "models", "time": "2026-11-27T10:00:00"}


def fake_run(folder: Path, overrides: list[str], failure: dict | None) -> Path:
    """A run directory as Hydra and a stopped `cscore run` leave it (no scores)."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (folder / rundir.CONFIG).write_text("data: {name: demo}\npair: {name: tiny}\nmethod: {name: contrast}\n")
    if failure is not None:
        (folder / rundir.FAILED).write_text(json.dumps(failure))
    return folder


def test_an_unfinished_run_of_the_same_command_is_resumed_in_its_folder(tmp_path):
    out = tmp_path / "outputs"
    args = ["method.gamma=0.2", "runtime.threads=1"]
    fake_run(out / "2026-11-26" / "09-00-00_demo_tiny_contrast", args, INTERRUPTED)
    latest = fake_run(out / "2026-11-27" / "10-00-00_demo_tiny_contrast", args, INTERRUPTED)
    fake_run(out / "2026-11-27" / "11-00-00_demo_tiny_contrast", ["method.gamma=0.3", "runtime.threads=1"],
             INTERRUPTED)  # another command
    fake_run(out / "2026-11-27" / "12-00-00_demo_tiny_contrast", args, None)  # no failure: may be running
    assert earlier_dir(args, out) == [*args, f"hydra.run.dir='{latest}'"]
    failed = {"error": "OutOfMemory: even one item does not fit", "stage": "models"}
    (latest / rundir.FAILED).write_text(json.dumps(failed))  # any failure, not only Ctrl-C
    assert earlier_dir(args, out)[-1] == f"hydra.run.dir='{latest}'"
    for given in (["resume=false"], [f"hydra.run.dir={tmp_path / 'mine'}"], ["--cfg", "job"]):
        assert earlier_dir([*args, *given], out) == [*args, *given]  # a new folder, or the one named
    assert earlier_dir(["method.gamma=0.9"], out) == ["method.gamma=0.9"]


def test_an_unfinished_multirun_of_the_same_command_is_resumed_in_its_folder(tmp_path):
    out = tmp_path / "outputs"
    sweep = out / "multirun" / "2026-11-27" / "10-00-00_demo_tiny_contrast"
    fake_run(sweep / "0", ["method.gamma=0.1"], None)
    fake_run(sweep / "1", ["method.gamma=0.4"], INTERRUPTED)
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["method.gamma=0.1,0.4"]}}}))
    assert earlier_dir(["-m", "method.gamma=0.1,0.4"], out) == ["-m", "method.gamma=0.1,0.4",
                                                                f"hydra.sweep.dir='{sweep}'"]
    assert earlier_dir(["-m", "method.gamma=0.1,0.5"], out) == ["-m", "method.gamma=0.1,0.5"]
    (sweep / "1" / rundir.FAILED).unlink()  # no job stopped by a failure: left alone
    assert earlier_dir(["-m", "method.gamma=0.1,0.4"], out) == ["-m", "method.gamma=0.1,0.4"]


# --- end to end -------------------------------------------------------------------------------


def table(path: Path, n: int) -> Path:
    words = ["bridge", "river", "council", "vaccine", "match", "goal", "library", "storm"]
    rows = [{"source": f"The {words[i % 8]} story number {i} was reported on Monday.",
             "hypothesis": f"A {words[(i * 3) % 8]} story {i}.", "q": i % 5} for i in range(n)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def early_exit_args(tiny_dirs, data: Path, cache: Path) -> list[str]:
    return [f"pair.expert.path={tiny_dirs.expert}", "pair.amateur.path=null", "pair.amateur.early_exit=2",
            "pair.name=tiny", "runtime.progress=false", "runtime.threads=1", "data=table", f"data.path={data}",
            "data.task=summarization", "data.columns.human=[q]", f"cache.dir={cache}"]


def report_status(folder: Path, cscore_main, cwd: Path) -> str:
    res = cscore_main("report", str(folder), "--bootstrap", "0", "--permutations", "0", "--out",
                      str(cwd / "report"), cwd=cwd)
    assert res.returncode == 0, res.stderr
    return (cwd / "report" / "report.md").read_text().splitlines()[2]


@pytest.mark.slow
def test_ctrl_c_then_the_same_command_finishes_in_the_same_folder(tiny_dirs, tmp_path, cscore_main):
    """A real SIGINT inside the forward pass (its checkpoint seen on disk), then the same command:
    one run folder, complete; the report of the day counts 1 complete, nothing failed."""
    args = [sys.executable, "-m", "cscore.cli.main", "run",
            *early_exit_args(tiny_dirs, table(tmp_path / "t.csv", 120), tmp_path / "cache"),
            "runtime.token_budget=256", "cache.checkpoint_seconds=0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while len(list((tmp_path / "cache").glob(".partial/*/*.npz"))) < 2:
        assert proc.poll() is None and time.time() < deadline, "the pass ended before its checkpoint was seen"
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    (day,) = (tmp_path / "outputs").iterdir()
    (folder,) = day.iterdir()
    assert json.loads((folder / rundir.FAILED).read_text())["error"].startswith("KeyboardInterrupt")
    assert report_status(day, cscore_main, tmp_path) == \
        "runs: 0 complete, 0 failed, 1 interrupted, 0 incomplete, 0 not started"

    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"cscore: resuming the unfinished run in outputs/{day.name}/{folder.name} " in again.stderr
    assert "resumed" in again.stdout + again.stderr  # the pass went on from its checkpoint
    assert [p.name for p in day.iterdir()] == [folder.name] and rundir.is_complete(folder)
    assert not (folder / rundir.FAILED).exists()
    assert report_status(day, cscore_main, tmp_path) == \
        "runs: 1 complete, 0 failed, 0 interrupted, 0 incomplete, 0 not started"


@pytest.mark.slow
def test_an_interrupted_multirun_job_is_finished_in_its_sweep_folder(tiny_dirs, tmp_path, cscore_cli, cscore_main):
    """The sweep folder of a multirun whose job 1 was stopped by Ctrl-C (its failed.json, its
    metrics.json not written yet): the same command skips job 0 and finishes job 1 there."""
    args = ["run", "-m", *early_exit_args(tiny_dirs, table(tmp_path / "t.csv", 12), tmp_path / "cache"),
            "method.gamma=0.1,0.4"]
    first = cscore_main(*args, cwd=tmp_path)  # in this process; the resume below is a fresh one
    assert first.returncode == 0, first.stderr[-2000:]
    (day,) = (tmp_path / "outputs" / "multirun").iterdir()
    (sweep,) = day.iterdir()
    (sweep / "1" / rundir.METRICS).unlink()  # what Ctrl-C in job 1 leaves
    (sweep / "1" / rundir.FAILED).write_text(json.dumps(INTERRUPTED))
    assert report_status(sweep, cscore_main, tmp_path) == \
        "runs: 1 complete, 0 failed, 1 interrupted, 0 incomplete, 0 not started"  # job 1 is not "not started"
    again = cscore_cli(*args, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"cscore: resuming the unfinished multirun in outputs/multirun/{day.name}/{sweep.name} " in again.stderr
    assert "is complete (same config, metrics.json present): skipped" in again.stdout + again.stderr
    assert [p.name for p in day.iterdir()] == [sweep.name]
    assert rundir.is_complete(sweep / "0") and rundir.is_complete(sweep / "1")
    assert report_status(sweep, cscore_main, tmp_path) == \
        "runs: 2 complete, 0 failed, 0 interrupted, 0 incomplete, 0 not started"


# --- the report's counts ----------------------------------------------------------------------


def test_a_stopped_run_finished_later_elsewhere_is_not_counted_as_failed(tiny_sweep, tmp_path, cscore_main):
    """Runs from before resuming in place (or a folder named by hand): job 1 of the tiny sweep,
    copied as an interrupted and as a failed run that started before it finished, and once as
    a run that failed after it (a later attempt that failed is a failure)."""
    day = tmp_path / "day"
    shutil.copytree(tiny_sweep.dir, day / "sweep")
    done = day / "sweep" / "1"
    stamp = (done / rundir.METRICS).stat().st_mtime
    for name, failure, when in [("a", INTERRUPTED, stamp - 60), ("b", {"error": "OSError: boom", "stage": "models"},
                                                                     stamp - 30), ("c", INTERRUPTED, stamp + 60)]:
        folder = day / name
        folder.mkdir()
        shutil.copy(done / rundir.CONFIG, folder / rundir.CONFIG)
        (folder / rundir.FAILED).write_text(json.dumps(failure))
        os.utime(folder / rundir.CONFIG, (when, when))
    status = run_status(find_runs(day))
    assert sorted(r.path.name for r in status.superseded) == ["a", "b"]
    assert status.finished_by == {day / "a": done, day / "b": done}
    assert [r.path.name for r in status.interrupted] == ["c"] and status.failed == [] and status.incomplete == []
    assert report_status(day, cscore_main, tmp_path) == (
        "runs: 2 complete, 0 failed, 1 interrupted, 0 incomplete, 0 not started; "
        "2 stopped earlier and finished by a later run of the same config")
    report_md = (tmp_path / "report" / "report.md").read_text()
    assert f"- finished later: {day / 'a'} (by {done})" in report_md
    assert f"- interrupted: {day / 'c'} (models)" in report_md
