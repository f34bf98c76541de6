"""Sharded runs from the command line (``runtime.shards`` / ``runtime.shard`` / ``runtime.devices``,
``scorers/store/shards.py``): the checks made before anything loads, one worker process per device (each
computes its shard, the parent merges), and the one line a run whose shards are not all done ends with.

A worker is ``cscore run`` with the same overrides and ``runtime.shard=K runtime.device=<its device>``,
its run directory under the parent's ``.shards/``; its lines are relayed with ``shard K:`` in front."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
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
    in_cache = getattr(kind, "meets_in_cache", True)  # cscore cdm generate's shards meet in its output directory
    if not run.cache.enabled and in_cache:
        raise ConfigError("runtime.shards needs the statistics cache (cache.enabled=true): the shards meet there")
    if devices is None and os.environ.get("SLURM_JOB_ID") and in_cache:
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
        raise ConfigError(f"runtime.shards in a SLURM job: the statistics cache {root} is on {kind}, which no other "
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


def worker_overrides(overrides: list[str], index: int, count: int, device: str, out: Path | None) -> list[str]:
    """The parent's overrides with this worker's shard and device, its run directory under ``out``
    (None: a stage command, ``cscore cdm``, which has no run directory)."""
    own = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in OWN_KEYS]
    run_dir = [] if out is None else [f"hydra.run.dir={out / f'shard-{index}'}"]
    return [*own, f"runtime.shards={count}", f"runtime.shard={index}", f"runtime.device={device}", *run_dir]


def run_workers(run: RunConfig, overrides: list[str], out_dir: Path, emit=None, command: tuple = ("run",)) -> dict:
    """One ``cscore run`` worker per device (``command``: another cscore command, e.g. ``("cdm",
    "train")``), each computing its shard of every pass, side by side; their lines relayed as
    ``shard K: ...``. Returns {"shard_seconds": [...], "seconds": wall}; raises CscoreError naming
    a shard that failed and the command that finishes the run."""
    devices = run.runtime.devices
    assert isinstance(devices, list)
    emit = emit or (lambda line: print(line, flush=True))
    out = out_dir / WORKER_DIR
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, WORKER_ENV: "1"}
    start = time.perf_counter()
    procs, threads, seconds = [], [], [0.0] * len(devices)
    for k, device in enumerate(devices):
        args = [sys.executable, "-m", "cscore.cli.main", *command,
                *worker_overrides(overrides, k, len(devices), device, out if command == ("run",) else None)]
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
                          f"{finish_command() if command == ('run',) else stage_line(command, overrides)} "
                          "finishes it")
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


def finish_command(extra: str = "") -> str:
    """The command this process was started with (plus ``extra``), to run again."""
    args = sys.argv[1:] if sys.argv and sys.argv[0].startswith("cscore") else sys.argv
    drop = ("run", "runtime.shard") if extra else ("run",)
    line = "cscore run " + " ".join(shlex.quote(a) for a in args if a.lstrip("+~").split("=", 1)[0] not in drop)
    return f"`{line}{' ' + extra if extra else ''}`"


def stage_line(command: tuple, overrides: list[str], extra: str = "") -> str:
    """A stage command (``cscore cdm train ...``) with its overrides (and ``extra``), to run again."""
    args = [o for o in overrides if not extra or o.lstrip("+~").split("=", 1)[0] != "runtime.shard"]
    return "`" + " ".join(["cscore", *command, *(shlex.quote(a) for a in args), *([extra] if extra else [])]) + "`"


def pending_line(err: ShardsPending) -> str:
    """The one line a shard that did its part ends with: what is missing and the commands that finish it."""
    if not err.missing:
        return str(err)
    commands = " and ".join(finish_command(f"runtime.shard={k}") for k in err.missing)
    return f"{err}; the run is incomplete: {commands} (the last shard to finish merges and writes the run directory)"
