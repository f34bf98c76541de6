"""Sharded runs from the command line (``runtime.shards`` / ``runtime.shard`` / ``runtime.devices``,
``scorers/store/shards.py``): the checks made before anything loads, one worker process per device (each
computes its shard, the parent merges), and the one line a run whose shards are not all done ends with.

A worker is ``cscore run`` with the same overrides and ``runtime.shard=K runtime.device=<its device>``,
its run directory under the parent's ``.shards/``; its lines are relayed with ``shard K:`` in front."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from cscore.errors import ConfigError, CscoreError, ShardsPending
from cscore.scorers.config.run import RunConfig
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.store.shards import WORKER_ENV

log = logging.getLogger("cscore")

OWN_KEYS = ("runtime.shards", "runtime.shard", "runtime.devices", "runtime.device")  # set per worker
WORKER_DIR = ".shards"  # under the parent's run directory: the workers' own run directories and logs


def devices_of(value) -> list[str] | None:
    """``runtime.devices`` as a list (``all``: every CUDA device torch sees)."""
    if value is None:
        return None
    if value == "all":
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not n:
            raise ConfigError("runtime.devices=all but torch sees no CUDA device here; give a list, e.g. [cpu,cpu]")
        return [f"cuda:{i}" for i in range(n)]
    return [str(d) for d in value]


def check(run: RunConfig, kind) -> RunConfig:
    """The sharding settings checked before anything loads; returns the run with ``runtime.shards``
    set from ``runtime.devices`` (and the device the merge keys its entries by)."""
    rt = run.runtime
    devices = devices_of(rt.devices)
    shards = rt.shards
    if devices is not None:
        if shards not in (1, len(devices)):
            raise ConfigError(f"runtime.shards={shards} but runtime.devices lists {len(devices)} devices: one shard "
                              "per device (leave runtime.shards out)")
        if len({d.split(':')[0] for d in devices}) > 1:
            raise ConfigError(f"runtime.devices={devices} mixes device types: the shards of a pass must compute alike "
                              "(one device type, one dtype)")
        if rt.shard is not None:
            raise ConfigError("runtime.shard is the one shard this process computes; runtime.devices runs them all: "
                              "give one of the two")
        shards = len(devices)
    if shards == 1:
        if rt.shard is not None:
            raise ConfigError(f"runtime.shard={rt.shard} but runtime.shards=1: give runtime.shards=N as well")
        return run
    if rt.shard is not None and rt.shard >= shards:
        raise ConfigError(f"runtime.shard={rt.shard} but runtime.shards={shards}: shards are 0 .. {shards - 1}")
    if not kind.shards:
        raise ConfigError(f"method={run.method.name} ({kind.name} kind) cannot shard its passes; run it with "
                          "runtime.shards=1 (the default)")
    if not run.cache.enabled:
        raise ConfigError("runtime.shards needs the statistics cache (cache.enabled=true): the shards meet there")
    if devices is None and os.environ.get("SLURM_JOB_ID"):
        check_shared(run)
    device = devices[0] if devices else rt.device
    runtime = replace(rt, shards=shards, devices=devices, device=device)
    return replace(run, runtime=runtime, passes=PassOptions.of(runtime))  # the passes read the settings checked here


NODE_LOCAL = ("tmpfs", "ramfs")  # file systems no other node sees


def check_shared(run: RunConfig) -> None:
    """Shards of a SLURM job array meet in the statistics cache: a node-local one (tmpfs, e.g.
    /dev/shm) is refused in one line. (A local disk cannot be told from a shared one here: the
    docs say the cache must be on a file system every node sees.)"""
    from cscore.scorers.store.cache import default_root

    root = Path(run.cache.dir).expanduser() if run.cache.dir else default_root()
    kind = file_system(root)
    if kind in NODE_LOCAL:
        raise ConfigError(f"runtime.shards on SLURM: the statistics cache {root} is on {kind}, which no other "
                          "node sees; the shards meet there: give cache.dir=<a folder on a shared file system>")


def file_system(path: Path) -> str | None:
    """The type of the file system ``path`` is on (/proc/mounts; None where unknown)."""
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return None
    path = path.resolve()
    best = max((m for m in mounts if len(m) == 2 and path.is_relative_to(m[0])), key=lambda m: len(m[0]),
               default=None)
    return best[1] if best else None


def array_shards(rest: list[str]) -> list[str]:
    """``cscore run -m ... runtime.shards=N`` without ``runtime.shard`` / ``runtime.devices``: one
    job per shard (``runtime.shard=range(0,N)``), so a launcher submits them as one job array."""
    if not any(a in ("-m", "--multirun") for a in rest):
        return rest
    given = {a.lstrip("+~").split("=", 1)[0]: a.split("=", 1)[1] for a in rest if "=" in a and not a.startswith("-")}
    if "runtime.shard" in given or "runtime.devices" in given:
        return rest
    try:
        n = int(given.get("runtime.shards", "1"))
    except ValueError:  # a sweep over runtime.shards: as given
        return rest
    return [*rest, f"runtime.shard=range(0,{n})"] if n > 1 else rest


def worker_overrides(overrides: list[str], index: int, count: int, device: str, out: Path) -> list[str]:
    """The parent's overrides with this worker's shard and device, its run directory under ``out``."""
    own = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in OWN_KEYS]
    return [*own, f"runtime.shards={count}", f"runtime.shard={index}", f"runtime.device={device}",
            f"hydra.run.dir={out / f'shard-{index}'}"]


def run_workers(run: RunConfig, overrides: list[str], out_dir: Path, emit=None) -> dict:
    """One ``cscore run`` worker per device, each computing its shard of every pass, side by side;
    their lines relayed as ``shard K: ...``. Returns {"shard_seconds": [...], "seconds": wall};
    raises CscoreError naming a shard that failed and the command that finishes the run."""
    devices = run.runtime.devices
    assert isinstance(devices, list)
    emit = emit or (lambda line: print(line, flush=True))
    out = out_dir / WORKER_DIR
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, WORKER_ENV: "1"}
    start = time.perf_counter()
    procs, threads, seconds = [], [], [0.0] * len(devices)
    for k, device in enumerate(devices):
        args = [sys.executable, "-m", "cscore.cli.main", "run",
                *worker_overrides(overrides, k, len(devices), device, out)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        procs.append(proc)
        t = threading.Thread(target=_relay, args=(proc, k, out / f"shard-{k}.log", emit, seconds, start), daemon=True)
        t.start()
        threads.append(t)
    emit(f"statistics: {len(devices)} shards on {', '.join(devices)} (one worker process each)")
    codes = [p.wait() for p in procs]
    for t in threads:
        t.join()
    failed = [(k, c) for k, c in enumerate(codes) if c != 0]
    if failed:
        k, code = failed[0]
        raise CscoreError(f"shard {k} of {len(devices)} (runtime.device={devices[k]}) failed with exit code {code} "
                          f"(its log: {out / f'shard-{k}.log'}); the run is incomplete; the shards done are kept: "
                          f"{finish_command()} finishes it")
    for k in range(len(devices)):  # the workers' run directories hold nothing the run needs (their logs stay)
        shutil.rmtree(out / f"shard-{k}", ignore_errors=True)
    wall = time.perf_counter() - start
    emit(f"statistics: every shard done in {wall:.1f}s ({', '.join(f'{s:.1f}s' for s in seconds)} per shard)")
    return {"shard_seconds": [round(s, 3) for s in seconds], "seconds": round(wall, 3)}


def _relay(proc, k: int, log_path: Path, emit, seconds: list, start: float) -> None:
    with open(log_path, "w") as log_file:
        for line in proc.stdout:
            log_file.write(line)
            text = line.rstrip()
            if text:
                emit(f"shard {k}: {text}")
    seconds[k] = time.perf_counter() - start


def finish_command(extra: str = "", args: list[str] | None = None) -> str:
    """The command this process was started with (plus ``extra``), to run again. ``args``: the
    job's own overrides, where ``sys.argv`` is not the command (a SLURM job's is submitit's)."""
    if args is None:
        args = sys.argv[1:] if sys.argv and sys.argv[0].startswith("cscore") else sys.argv
    drop = ("run", "runtime.shard") if extra else ("run",)
    line = "cscore run " + " ".join(shlex.quote(a) for a in args if a.lstrip("+~").split("=", 1)[0] not in drop)
    return f"`{line}{' ' + extra if extra else ''}`"


def job_args(hc) -> list[str] | None:
    """A multirun job's own overrides (its command line is the multirun's, or submitit's in a SLURM
    job); None for a single run (its command line is the command)."""
    from hydra.types import RunMode

    return list(hc.overrides.task) if hc.mode == RunMode.MULTIRUN else None


def pending_line(err: ShardsPending, args: list[str] | None = None) -> str:
    """The one line a shard that did its part ends with: what is missing and the commands that finish it
    (``args``: the job's overrides, see ``finish_command``)."""
    if not err.missing:
        return str(err)
    commands = " and ".join(finish_command(f"runtime.shard={k}", args) for k in err.missing)
    return f"{err}; the run is incomplete: {commands} (the last shard to finish merges and writes the run directory)"


# -- one run directory per sweep point of a sharded multirun ------------------------------------

POINT_FILE = "point-{}.json"  # under <sweep dir>/.shards/: the run directory a point's job wrote


def sweep_point(hc) -> Path | None:
    """For a job of a sharded multirun (``runtime.shard`` among its task overrides: one job per
    shard, ``array_shards``), the record its sweep point's jobs share: the overrides without
    ``runtime.shard`` name the point. None for any other run."""
    from hydra.types import RunMode

    task = list(hc.overrides.task)
    own = sorted(o for o in task if o.lstrip("+~").split("=", 1)[0] != "runtime.shard")
    if hc.mode != RunMode.MULTIRUN or len(own) == len(task):
        return None
    digest = hashlib.sha256("\n".join(own).encode()).hexdigest()[:16]
    return Path(hc.sweep.dir).absolute() / WORKER_DIR / POINT_FILE.format(digest)


@contextmanager
def one_run_directory(point: Path | None, out_dir: Path, count: int):
    """Around the writing of a run directory: of the jobs of one sweep point (``point``:
    ``sweep_point``'s record; None: nothing to share) that have the statistics, the first writes
    its run directory, under the point's lock; a later one raises ShardsPending naming it. Two
    shard jobs that end together both have the merged entry (one merged, the other read it); a
    point's jobs that started after another point's job merged the pass all read it. The record
    is written once the directory is complete: a job killed while writing leaves the point to the
    next."""
    if point is None:
        yield
        return
    from cscore import rundir
    from cscore.files import file_lock, write_atomic

    with file_lock(point.with_suffix(".lock")):
        try:
            written = Path(json.loads(point.read_text())["run_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            written = None
        if written is not None and written != out_dir and rundir.is_complete(written):
            raise ShardsPending(f"statistics merged; this sweep point's run directory is {written} (another "
                                "shard's job wrote it)", [], count)
        yield
        write_atomic(point, json.dumps({"run_dir": str(out_dir)}) + "\n")
