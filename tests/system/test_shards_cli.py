"""Sharded runs end to end (runtime.devices / runtime.shards / runtime.shard, run/workers.py): CPU
worker processes, one per listed device, each compute their shard and the parent merges (one test:
3 shards, a two-model causal pair); array tasks one after another in this process (2 and 3 shards;
two models, a cross-family pair, an early-exit pair); the run directory's scores equal the
unsharded run's bit for bit. A killed worker (SIGKILL) leaves the run incomplete with
one line naming the shard; the same command then resumes it from its own partials and ends
identical. A kind that cannot shard says so before anything loads."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cscore import rundir
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.cli import assert_same_scores, run_main

WORDS = ["bridge", "river", "council", "vaccine", "match", "goal", "library", "storm"]


def table(path: Path, n: int) -> Path:
    rows = [{"source": f"The {WORDS[i % 8]} story number {i % 5} was reported on Monday.",
             "hypothesis": f"A {WORDS[(i * 3) % 8]} story {i} " + "and more " * (i % 4), "q": i % 5} for i in range(n)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def args(data: Path, expert: str, amateur: str | None, out: Path, cache: Path, *more: str) -> list[str]:
    pair = ([f"pair.amateur.path={amateur}", "pair.amateur.early_exit=null"] if amateur else
            ["pair.amateur.path=null", "pair.amateur.early_exit=2"])
    return ["run", f"pair.expert.path={expert}", *pair, "pair.name=tiny", "runtime.progress=false",
            "runtime.threads=1", "runtime.token_budget=256", "data=table", f"data.path={data}",
            "data.task=summarization", "data.columns.human=[q]", f"hydra.run.dir={out}", f"cache.dir={cache}", *more]


def env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def cscore(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *argv], cwd=cwd, capture_output=True, text=True,
                          env=env(), timeout=timeout)


SCORED = (rundir.SCORE, rundir.MEAN_LOGP, rundir.N_SCORED)  # the columns compared bit for bit


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return table(tmp_path_factory.mktemp("shards_data") / "t.csv", 24)


@pytest.fixture(scope="module")
def unsharded(tiny_dirs, data, tmp_path_factory):
    """unsharded(pair) -> the run directory of the unsharded run of that pair (run once, in this
    process: a fresh process is not what the sharded runs are compared for)."""
    runs: dict[str, Path] = {}

    def get(pair: str) -> Path:
        if pair not in runs:
            root = tmp_path_factory.mktemp(f"one_{pair}")
            amateur = {"two": tiny_dirs.amateur, "cross": tiny_dirs.other, "early": None}[pair]
            one = run_main(*args(data, tiny_dirs.expert, amateur, root / "one", root / "c1"), cwd=root)
            assert one.returncode == 0, one.stderr[-2000:]
            runs[pair] = root
        return runs[pair]

    return get


@pytest.mark.slow
def test_cpu_workers_merge_bit_identical_to_the_unsharded_run(tiny_dirs, data, tmp_path, unsharded):
    """Two worker processes (shards 1 and 2) and this one: their lines relayed, their logs kept, the
    merge bit-identical. The other pairs and shard counts: the in-process array tasks below."""
    pair, count = "two", 3
    expert, amateur = tiny_dirs.expert, tiny_dirs.amateur
    root = unsharded(pair)
    devices = ",".join(["cpu"] * count)
    many = cscore(args(data, expert, amateur, tmp_path / "many", tmp_path / "cN", f"runtime.devices=[{devices}]"),
                  tmp_path)
    assert many.returncode == 0, many.stderr[-3000:]
    out = many.stdout + many.stderr
    assert f"statistics: {count} shards on {', '.join(['cpu'] * count)} (shard 0 in this process" in out
    assert all(f"shard {k}: " in out for k in range(1, count))  # each worker's lines, relayed
    assert "shard 0: " not in out  # shard 0 is this process's own
    assert sorted(p.name for p in (tmp_path / "many" / ".shards").iterdir()) == [
        f"shard-{k}.log" for k in range(1, count)]  # one worker per other device, its log kept
    assert "every shard done in" in out
    assert_same_scores(root / "one", tmp_path / "many", SCORED, more_than=3)
    assert StatsCache(tmp_path / "cN").keys() == StatsCache(root / "c1").keys()  # the same entries, same keys
    speed = json.loads((tmp_path / "many" / rundir.METRICS).read_text())["speed"]
    assert speed["shards"] == count and speed["merge_seconds"] >= 0
    for name, seconds in speed["shard_seconds"].items():
        assert len(seconds) == count
        rep = speed["passes"][name]
        assert rep["shards"] == count
        # over the wall time: the seconds it implies are the recorded ones (rounded to the millisecond)
        assert rep["tokens"] / rep["tokens_per_second"] == pytest.approx(rep["score_seconds"], abs=5e-4 + 1e-9)
    assert speed["items_scored"] == 24 and 24 / speed["samples_per_second"] == pytest.approx(speed["score_seconds"])
    assert "shards" not in json.loads((root / "one" / rundir.METRICS).read_text())["speed"]
    assert not list((tmp_path / "cN").glob(".partial/*/*"))


@pytest.mark.slow
@pytest.mark.parametrize("pair,count", [("two", 2), ("cross", 2), ("early", 3)])
def test_array_tasks_one_shard_each_the_last_merges(tiny_dirs, data, tmp_path, unsharded, cscore_main, pair, count):
    """runtime.shards=N runtime.shard=K, one task after another in this process (a job array's tasks):
    every task but the last says which shard is missing; the last merges, bit-identical to the
    unsharded run (two models, a cross-family pair, an early-exit pair)."""
    amateur = {"two": tiny_dirs.amateur, "cross": tiny_dirs.other, "early": None}[pair]
    root = unsharded(pair)
    base = args(data, tiny_dirs.expert, amateur, tmp_path / "many", tmp_path / "cN", f"runtime.shards={count}")
    for k in range(count - 1, 0, -1):
        first = cscore_main(*base, f"runtime.shard={k}", cwd=tmp_path)
        assert first.returncode == 0, first.stderr[-2000:]
        said = first.stdout + first.stderr
        missing = ", ".join(str(j) for j in range(k))
        assert f"shard{'s' * (k > 1)} {missing} of {count} not done yet; the run is incomplete: `cscore run" in said, (
            said[-2000:])
        assert "runtime.shard=0`" in said
        assert not (tmp_path / "many" / rundir.METRICS).exists()
    last = cscore_main(*base, "runtime.shard=0", cwd=tmp_path)
    assert last.returncode == 0, last.stderr[-2000:]
    assert_same_scores(root / "one", tmp_path / "many", SCORED, more_than=3)
    assert StatsCache(tmp_path / "cN").keys() == StatsCache(root / "c1").keys()  # the same entries, same keys
    assert not list((tmp_path / "cN").glob(".partial/*/*"))
    speed = json.loads((tmp_path / "many" / rundir.METRICS).read_text())["speed"]
    assert speed["shards"] == count and all(len(s) == count for s in speed["shard_seconds"].values())


@pytest.mark.slow
def test_a_rerun_says_which_shards_it_kept_and_times_this_command_only(tiny_dirs, data, tmp_path, cscore_main):
    """Issue 39: shard 1 of 2 done by one command, then `runtime.shards=2` (every shard not done)
    keeps it and computes shard 0, and says so; each pass's summary line counts the items shard 0
    scored in this command's seconds, the rest as done before it; the work lines count shards from
    0 as the errors and runtime.shard do; the entry keeps the whole pass's time (both commands)."""
    base = args(data, tiny_dirs.expert, tiny_dirs.amateur, tmp_path / "many", tmp_path / "cN", "runtime.shards=2",
                "runtime.progress=1000")
    first = cscore_main(*base, "runtime.shard=1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    said = first.stdout + first.stderr
    assert "(shard 1 of 2: " in said and "shard 2 of 2" not in said  # the work line
    assert -1 < said.find("tokenizing 24 items (prompts and hypotheses)") < said.find("(shard 1 of 2: ")  # no silence
    done = {m.group(1): int(m.group(2)) for m in re.finditer(r"statistics \((\w+)\): shard 1 of 2 done: (\d+) items",
                                                                said)}
    assert "kept" not in said  # its own shard, not one done before it
    assert sorted(done) == ["amateur", "expert"] and all(0 < n < 24 for n in done.values())
    start = time.perf_counter()
    again = cscore_main(*base, cwd=tmp_path)
    took = time.perf_counter() - start
    assert again.returncode == 0, again.stderr[-2000:]
    said = again.stdout + again.stderr
    for name, n in done.items():
        assert (f"statistics ({name}): shard 1 of 2 done already (an earlier run or another job), kept; "
                f"shard 0 of 2 computed now") in said
        line = next(x for x in said.splitlines() if x.startswith(f"{name}: scored "))
        seconds = float(re.search(r"items in ([\d.]+)s", line).group(1))
        assert line.startswith(f"{name}: scored {24 - n} items in ")
        assert line.endswith(f"; {n} more done before this command (shard 1 of 2, kept))")
        assert seconds <= took
    speed = json.loads((tmp_path / "many" / rundir.METRICS).read_text())["speed"]["passes"]
    for name, n in done.items():
        assert speed[name]["score_seconds"] <= took
    entry = StatsCache(tmp_path / "cN")
    recorded = [(e.get("extra") or {}).get("report", {}) for e in (entry.meta(k) for k in entry.keys())]
    assert all(r["shards"] == 2 and r["seconds"] >= max(r["shard_seconds"]) for r in recorded)


@pytest.mark.slow
def test_a_killed_worker_leaves_one_line_and_the_same_command_resumes_identical(tiny_dirs, tmp_path):
    data = table(tmp_path / "t.csv", 300)  # shard 1's passes take ~0.5 s: the kill lands inside them, under load too
    argv = args(data, tiny_dirs.expert, tiny_dirs.amateur, tmp_path / "many", tmp_path / "cN",
                "runtime.devices=[cpu,cpu]", "cache.checkpoint_seconds=0")
    proc = subprocess.Popen([sys.executable, "-m", "cscore.cli.main", *argv], cwd=tmp_path, env=env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while not list((tmp_path / "cN").glob(".partial/*/s001-*.npz")):  # shard 1 has kept a batch
        assert proc.poll() is None and time.time() < deadline, "the pass ended before shard 1 kept a batch"
        time.sleep(0.005)
    workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    victim = next(int(p) for p in workers if "runtime.shard=1" in Path(f"/proc/{p}/cmdline").read_text())
    os.kill(victim, signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1
    line = [x for x in out.splitlines() if "shard 1 of 2" in x and "failed" in x]
    assert len(line) == 1 and "finishes it" in line[0] and "runtime.devices=[cpu,cpu]" in line[0], out[-2000:]
    assert not (tmp_path / "many" / rundir.METRICS).exists()
    kept = len(list((tmp_path / "cN").glob(".partial/*/s001-*.npz")))
    assert kept >= 1
    start = time.perf_counter()
    again = cscore(argv, tmp_path)
    took = time.perf_counter() - start
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    said = again.stdout + again.stderr
    assert "shard 1: " in said and "shard 1 of 2 resumed" in said  # from its own partials
    assert "shard 0 of 2 resumed" not in said  # shard 0 was done: not run again
    # issue 47, item 10: this command's time only (the killed pass's kept shard 0 named, not timed; the
    # pass after it all this command's), and the weights its worker loaded for the pass this process kept
    assert re.search(r"statistics \(expert\): every shard done; this command's shard 1 of 2 in [\d.]+s \([\d.]+s\); "
                     r"shard 0 of 2 done before it, kept", said), said[-3000:]
    spans = [float(x) for x in re.findall(r"every shard done(?:; this command's shard 1 of 2)? in ([\d.]+)s", said)]
    assert len(spans) == 2 and sum(spans) <= took, said[-4000:]
    weights = json.loads((tmp_path / "many" / rundir.METRICS).read_text())["speed"]["weights"]
    assert weights == {"expert": "loaded by workers", "amateur": "loaded"}
    assert "weights: expert loaded by workers, amateur loaded" in said
    one = cscore(args(data, tiny_dirs.expert, tiny_dirs.amateur, tmp_path / "one", tmp_path / "c1",
                      "cache.checkpoint_seconds=0"), tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    assert_same_scores(tmp_path / "one", tmp_path / "many", SCORED, more_than=3)


def test_a_slurm_shard_with_a_node_local_cache_is_one_line(tiny_dirs, tmp_path, cscore_main, monkeypatch):
    from cscore.run.launch import file_system

    if file_system(Path("/dev/shm")) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm here")
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "pair.name=tiny", "runtime.progress=false",
                      "runtime.shards=2", "runtime.shard=0", f"cache.dir=/dev/shm/cscore-test-{os.getpid()}",
                      f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    said = res.stdout + res.stderr
    assert res.returncode != 0 and "is on tmpfs, which no other node sees" in said, said[-2000:]
    assert "Traceback" not in said
    # runtime.devices inside one SLURM job: its workers are on this node, a node-local cache serves them
    cache = Path(f"/dev/shm/cscore-test-{os.getpid()}-devices")
    try:
        res = cscore_main(*args(table(tmp_path / "t.csv", 24), tiny_dirs.expert, None, tmp_path / "d", cache,
                                "runtime.devices=[cpu,cpu]"), cwd=tmp_path)
        said = res.stdout + res.stderr
        assert res.returncode == 0 and "every shard done in" in said, said[-2000:]
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@pytest.mark.parametrize("more,shown", [
    (["method=baseline", "baseline=bleu", "runtime.shards=2"],
     "method=baseline (baseline kind) cannot shard its passes"),
    (["runtime.shards=2", "runtime.shard=2"], "runtime.shard=2 but runtime.shards=2: shards are 0 .. 1"),
    (["runtime.shard=0"], "runtime.shard=0 but runtime.shards=1"),
    (["runtime.shards=2", "cache.enabled=false"], "runtime.shards needs the statistics cache"),
    (["runtime.devices=[cpu,cpu]", "runtime.shards=3"], "runtime.shards=3 but runtime.devices lists 2 devices"),
    (["runtime.devices=[auto]"], "runtime.devices lists each worker's device"),
    (["runtime.devices=cpu"], "runtime.devices must be null, all or a non-empty list"),
])
def test_sharding_settings_are_checked_before_anything_loads(tiny_dirs, tmp_path, cscore_main, more, shown):
    """Refused by the precheck (issue 39, item 6): one line, exit 2, no run folder."""
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "pair.name=tiny", "runtime.progress=false",
                      f"hydra.run.dir={tmp_path / 'r'}", *more, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and shown in res.stderr, res.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("more", [["runtime.devices=[cpu,cpu]"], ["runtime.shards=2", "runtime.shard=0"]])
def test_a_sharded_run_with_a_cache_it_cannot_write_is_refused_up_front(tiny_dirs, tmp_path, cscore_main, more):
    """The shards meet in the statistics cache: one that cannot be written is refused before the
    run starts, leaving no run folder and no worker folder. /sys refuses new files even to root
    (a chmod-ed folder does not: root writes in it), as a read-only mount does."""
    unwritable = Path("/sys/cscore-stats")
    try:
        os.close(os.open("/sys/cscore-probe", os.O_CREAT | os.O_WRONLY))
        os.unlink("/sys/cscore-probe")
        pytest.skip("/sys takes new files here")
    except OSError:
        pass
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "pair.name=tiny", "runtime.progress=false",
                      f"hydra.run.dir={tmp_path / 'r'}", f"cache.dir={unwritable}", *more, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        "cscore: error: sharding (runtime.shards / runtime.devices) needs a writable statistics cache shared by "
        "every shard: the shards meet in /sys/cscore-stats, but cannot write in /sys (Permission denied); give "
        "cache.dir=<a writable folder> (or CSCORE_CACHE)"]
    assert not (tmp_path / "r").exists() and not list(tmp_path.rglob(".shards"))


def test_a_shard_out_of_range_stops_before_torch_is_imported(tmp_path):
    """``runtime.shards=2 runtime.shard=5``: one line, exit 2, and the process never imported torch
    (a fresh interpreter reports what it imported as it exits)."""
    code = ("import atexit, sys; atexit.register(lambda: print('torch imported:', 'torch' in sys.modules)); "
            "from cscore.cli.main import main; main(sys.argv[1:])")
    res = subprocess.run([sys.executable, "-c", code, "run", "runtime.shards=2", "runtime.shard=5"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == ["cscore: error: runtime.shard=5 but runtime.shards=2: shards are 0 .. 1"]
    assert res.stdout.strip().splitlines()[-1] == "torch imported: False"
    assert not (tmp_path / "outputs").exists()


def test_a_multirun_with_shards_is_one_job_per_shard():
    from cscore.run.launch import array_shards

    assert array_shards(["-m", "runtime.shards=3", "method.gamma=0.1,0.2"]) == [
        "-m", "runtime.shards=3", "method.gamma=0.1,0.2", "runtime.shard=range(0,3)"]
    assert array_shards(["runtime.shards=3"]) == ["runtime.shards=3"]  # one run: every shard in this process
    assert array_shards(["-m", "runtime.shards=3", "runtime.shard=1"]) == ["-m", "runtime.shards=3", "runtime.shard=1"]
    assert array_shards(["-m", "runtime.shards=1"]) == ["-m", "runtime.shards=1"]
    assert array_shards(["-m", "runtime.shards=2", "runtime.devices=[cpu,cpu]"])[-1] == "runtime.devices=[cpu,cpu]"


@pytest.mark.slow
def test_a_sharded_multirun_leaves_one_run_directory_equal_to_the_unsharded_run(tiny_dirs, data, tmp_path, unsharded,
                                                                               cscore_main):
    """What `-m hydra/launcher=slurm runtime.shards=2` submits as one job array, on Hydra's basic
    launcher: one job per shard; the jobs that leave shards to others remove their empty run
    directories; the last one merges and writes the one run directory."""
    argv = [a for a in args(data, tiny_dirs.expert, tiny_dirs.amateur, tmp_path / "x", tmp_path / "cN")
            if not a.startswith("hydra.run.dir")]
    done = cscore_main(argv[0], "-m", *argv[1:], "runtime.shards=2", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [p.parent for p in (tmp_path / "sweep").rglob(rundir.METRICS)]
    assert len(runs) == 1 and sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()
                                     and not p.name.startswith(".")) == [runs[0].name]
    assert_same_scores(unsharded("two") / "one", runs[0], SCORED, more_than=3)


def test_devices_set_the_parents_sharding_and_one_device_runs_here():
    """runtime.devices=[cpu,cpu]: two shards on cpu (the workers then give this process shard 0 and
    their wait hook); one device: no worker, the pass on that device in this process."""
    from cscore.cli.compose import composed
    from cscore.run import kinds, launch, workers
    from cscore.run.typed import typed

    kind = kinds.of_method("contrast")
    one = typed(composed("config", ["runtime.devices=[cpu]"]))
    launch.check(one, kind)
    assert one.runtime.devices is None and one.runtime.device == one.passes.device == "cpu"
    assert not workers.coordinator(one.runtime).on  # the job's coordinator (workers.sharded: no worker)
    two = typed(composed("config", ["runtime.devices=[cpu,cpu]"]))
    launch.check(two, kind)
    assert two.runtime.shards == 2 and two.runtime.device == "cpu" and workers.coordinator(two.runtime).index is None
