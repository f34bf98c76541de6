"""The sharded-pass cases of `scripts/reliability.py` (issue 32, item 5): `cscore run` with
`runtime.devices=[cpu,cpu]` (this process computes shard 0, one worker process shard 1) on the
bench's tiny model and table, checked against the bench's uninterrupted, unsharded run:

- **kill one shard**: SIGKILL shard 1's worker once it has kept k batches (`cache.checkpoint_seconds=0`:
  every batch a partial); the run must stop with one line naming the shard; the same command then
  runs shard 1 alone (shard 0 is not run again), resumes it from its own partials and ends identical;
- **damage one partial**: shard 1 runs alone (`runtime.shards=2 runtime.shard=1`), one of its
  partials gets a flipped byte; the devices run must never merge it and re-run only the items that
  file held (the others are read back from shard 1's remaining partials) and end identical;
- **two sharded runs at once**: the same devices run twice, started together, on one cache (two run
  directories): every shard's batches computed once in all, both runs identical.

A shard that computes announces its work (`runtime.progress=true`): `expert+amateur: N items, ...
to run (shard K of 2: ...)`; a shard that finds its mark done is said kept. Loaded by
reliability.py; it imports only reliability_checks.py (what the two share)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
from reliability_checks import Job, Tally, entry_states, same_scores, score_frame

DEVICES = "runtime.devices=[cpu,cpu]"
WORK = re.compile(r"items, .* to run \(shard (\d+) of 2: ")  # progress detail: 0-based, as runtime.shard
RESUMED = re.compile(r"shard (\d) of 2 resumed (\d+) items from its partials")


def args_of(bench, d: Path, cache: Path, run: str = "run", *more: str) -> list[str]:
    base = [a if a != "runtime.progress=false" else "runtime.progress=true" for a in bench.base()]
    return ["run", *base, f"hydra.run.dir={d / run}", f"cache.dir={cache}", *more]


def computed(job: Job) -> list[int]:
    """The shards (0-based) this command computed, one entry per pass of a shard that ran."""
    return [int(m.group(1)) for m in WORK.finditer(job.output)]


def resumed(job: Job) -> dict[int, int]:
    return {int(m.group(1)): int(m.group(2)) for m in RESUMED.finditer(job.output)}


def partials(cache: Path, k: int) -> list[Path]:
    return sorted(cache.glob(f".partial/*/s{k:03d}-*.npz"))


def check_final(tally: Tally, bench, job: Job, runs: list[Path], cache: Path, what: str) -> None:
    if job.wait() != 0:
        tally.add(f"{what}: exit {job.proc.returncode}: {job.output[-300:]}")
        return
    _, bad = entry_states(cache)
    tally.bad_read += bad
    if any(partials(cache, k) for k in (0, 1)):
        tally.add(f"{what}: partials left after the merge")
    for run in runs:
        if not same_scores(score_frame(run), bench.run_ref):
            tally.unequal += 1
            tally.add(f"{what}: {run.name}: final scores differ from the uninterrupted run")


def worker_pid(parent: int, shard: int) -> int | None:
    kids = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
    for pid in kids:
        try:
            if f"runtime.shard={shard}" in Path(f"/proc/{pid}/cmdline").read_text():
                return int(pid)
        except OSError:
            continue
    return None


def kill_one_shard(bench, tally: Tally) -> None:
    """SIGKILL shard 1's worker once it kept k batches; the same command resumes it alone."""
    d = bench.fresh("shard-kill")
    cache = d / "cache"
    args = args_of(bench, d, cache, "run", DEVICES)
    k = bench.rng.randint(1, 2)
    job = Job(args, d)
    tally.iterations += 1
    killed = False
    while job.proc.poll() is None and not killed:
        pid = worker_pid(job.proc.pid, 1) if len(partials(cache, 1)) >= k else None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:  # it ended meanwhile
                pass
        time.sleep(0.002)
    rc = job.wait()
    if not killed:
        tally.states["finished before the signal"] += 1
    else:
        tally.signals += 1
        lines = [x for x in job.output.splitlines() if "shard 1 of 2" in x and "failed" in x and "finishes it" in x]
        kept = len(partials(cache, 1))
        tally.states[f"exit {rc}, {'one line' if len(lines) == 1 else f'{len(lines)} lines'}, shard 1 kept "
                     f"{'≥1' if kept else '0'} partials"] += 1
        if rc != 1 or len(lines) != 1:
            tally.add(f"shard kill: exit {rc}, {len(lines)} lines naming shard 1: {job.output[-300:]}")
        again = Job(args, d)
        check_final(tally, bench, again, [d / "run"], cache, "shard kill, resumed")
        ran = computed(again)
        tally.recomputed += ran.count(0)  # shard 0 was done: its mark says so
        got = resumed(again).get(1, 0)
        tally.resumed += got
        if kept and not got:
            tally.lost += 1
            tally.add(f"shard kill: shard 1 kept {kept} partials, nothing resumed from them")
    shutil.rmtree(d, ignore_errors=True)


def items_in(file: Path, offsets: np.ndarray) -> int:
    with np.load(file, allow_pickle=False) as z:
        return int(np.unique(np.searchsorted(offsets, z["dest"], side="right") - 1).size)


def damage_one_partial(bench, tally: Tally) -> None:
    """Shard 1 alone, one of its partials damaged, then the devices run: never merged, only its items re-run."""
    from cscore.cli.cache_cmd import payload_of
    from cscore.scorers.store.cache import StatsCache

    d = bench.fresh("shard-damage")
    cache = d / "cache"
    first = Job(args_of(bench, d, cache, "one", "runtime.shards=2", "runtime.shard=1"), d)
    tally.iterations += 1
    if first.wait() != 0 or len(files := partials(cache, 1)) < 2:
        tally.add(f"shard damage: shard 1 alone exited {first.proc.returncode} with {len(partials(cache, 1))} "
                  "partials")
        shutil.rmtree(d, ignore_errors=True)
        return
    copies = d / "copies"
    copies.mkdir()
    for f in files:
        shutil.copy(f, copies / f.name)
    victim = files[bench.rng.randrange(len(files))]
    data = bytearray(victim.read_bytes())
    data[bench.rng.randrange(len(data))] ^= 0xFF
    victim.write_bytes(bytes(data))
    job = Job(args_of(bench, d, cache, "run", DEVICES), d)
    check_final(tally, bench, job, [d / "run"], cache, "shard damage")
    if job.proc.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        return
    store = StatsCache(cache)
    (key,) = store.keys()
    offsets = next(iter(store.read(key, payload_of(store.meta(key))).stats.values())).offsets
    lost = items_in(copies / victim.name, offsets)
    shard1 = sum(items_in(copies / f.name, offsets) for f in files)
    got = resumed(job).get(1, 0)
    tally.resumed += got
    rerun = shard1 - got
    said = "damaged" in job.output and "lost partials" in job.output
    tally.states[f"damage {'reported' if said else 'silent'}, {rerun} of {shard1} items of shard 1 re-run "
                 f"({lost} lost)"] += 1
    tally.recomputed += max(0, rerun - lost)
    tally.lost += max(0, lost - rerun)  # fewer re-run than lost: something damaged was read
    if not said:
        tally.add("shard damage: no line says a partial was damaged and re-run")
    shutil.rmtree(d, ignore_errors=True)


def two_at_once(bench, tally: Tally) -> None:
    """The same devices run twice at once on one cache: each shard computed once, both identical."""
    d = bench.fresh("shard-two")
    cache = d / "cache"
    jobs = [Job(args_of(bench, d, cache, "a", DEVICES), d)]
    time.sleep(bench.rng.uniform(0.0, 2.0))
    jobs.append(Job(args_of(bench, d, cache, "b", DEVICES), d))
    tally.iterations += 1
    for job, run in zip(jobs, ("a", "b")):
        check_final(tally, bench, job, [d / run], cache, f"two at once ({run})")
    ran = [k for job in jobs for k in computed(job)]
    tally.states[f"shards computed {len(ran)} of 2"] += 1
    tally.recomputed += max(0, len(ran) - 2)
    if sorted(set(ran)) != [0, 1]:
        tally.add(f"two at once: shards computed {ran}")
    shutil.rmtree(d, ignore_errors=True)


def cases(bench, n: int, quick: bool) -> list[tuple]:
    """(name, function, iterations, arguments) as reliability.plan lists them."""
    every = [("shards: SIGKILL one shard's worker mid-pass (runtime.devices=[cpu,cpu])",
              lambda t: kill_one_shard(bench, t), n, ())]
    if quick:
        return every
    return every + [("shards: one partial damaged, then runtime.devices=[cpu,cpu]",
                     lambda t: damage_one_partial(bench, t), n, ()),
                    ("shards: two runtime.devices=[cpu,cpu] runs of one pass at once, one cache",
                     lambda t: two_at_once(bench, t), n, ())]
