"""Sharded runs around the work: the sharding settings checked before anything loads, ``runtime.devices``
resolved, a multirun's one job per shard and one run directory per sweep point (coordination: ``run/workers.py``)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from cscore import rundir
from cscore.config.run import RunConfig, Runtime
from cscore.errors import ConfigError
from cscore.files import file_lock, folder_problem, write_atomic
from cscore.run import workers
from cscore.scorers.store.cache import default_root
from cscore.scorers.store.checkpoint import LOCK_DIR


def devices_of(value) -> list[str] | None:
    """``runtime.devices`` as a list (``all``: every CUDA device torch sees; none there: [])."""
    if value is None:
        return None
    if value == "all":
        import torch

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return [f"cuda:{i}" for i in range(n)]
    return [str(d) for d in value]


def resolve_devices(rt: Runtime) -> Runtime:
    """``runtime.devices`` resolved: N devices are N shards, this process on the first; one device runs here.
    Settings that do not go together stay as given, for ``check_settings`` to name."""
    devices = devices_of(rt.devices)
    if devices is None or sharding_problem(rt, devices) is not None:
        return rt
    if len(devices) == 1:
        return replace(rt, devices=None, device=devices[0])
    return replace(rt, shards=len(devices), devices=devices, device=devices[0])


def check(run: RunConfig, kind) -> None:
    """The sharding settings checked before anything loads (a ConfigError)."""
    check_settings(run)
    if run.runtime.shards > 1:
        check_kind(run, kind)


def check_settings(run: RunConfig) -> None:
    """The checks that need no method kind."""
    why = sharding_problem(run.runtime, devices_of(run.runtime.devices))
    if why is not None:
        raise ConfigError(why)


def sharding_problem(rt: Runtime, devices: list[str] | None) -> str | None:
    """The line naming the first sharding settings that do not go together, or None."""
    shards = rt.shards
    if devices is not None:
        if not devices:
            return "runtime.devices=all but torch sees no CUDA device here; give a list, e.g. [cpu,cpu]"
        if shards not in (1, len(devices)):
            return (f"runtime.shards={shards} but runtime.devices lists {len(devices)} devices: one shard "
                    "per device (leave runtime.shards out)")
        if len({d.split(':')[0] for d in devices}) > 1:
            return (f"runtime.devices={devices} mixes device types: the shards of a pass must compute alike "
                    "(one device type, one dtype)")
        if rt.shard is not None:
            return ("runtime.shard is the one shard this process computes; runtime.devices runs them all: "
                    "give one of the two")
        shards = len(devices)
    if shards == 1:
        if rt.shard is not None:
            return f"runtime.shard={rt.shard} but runtime.shards=1: give runtime.shards=N as well"
        return None
    if rt.shard is not None and rt.shard >= shards:
        return f"runtime.shard={rt.shard} but runtime.shards={shards}: shards are 0 .. {shards - 1}"
    return None


def check_kind(run: RunConfig, kind) -> None:
    """A sharded run: whether its kind shards and where its shards meet."""
    if not kind.splits:
        raise ConfigError(f"method={run.method.name} ({kind.name} kind) cannot shard its passes; run it with "
                          "runtime.shards=1 (the default)")
    if not getattr(kind, "meets_in_cache", True):  # cscore cdm generate's shards meet in its output directory
        return
    if not run.cache.enabled:
        raise ConfigError("runtime.shards needs the statistics cache (cache.enabled=true): the shards meet there")
    check_writable(run)
    if run.runtime.devices is None and workers.array_task():  # not runtime.devices' workers: one node
        check_shared(run)


def check_writable(run: RunConfig) -> None:
    """A statistics cache this process cannot write in is refused (a probe file: root sees read-only mounts)."""
    root = Path(run.cache.dir).expanduser() if run.cache.dir else default_root()
    problem = folder_problem(root)
    if problem is None:
        probe = next(p for p in (root / LOCK_DIR, root, *root.parents) if p.exists())
        try:
            fd, name = tempfile.mkstemp(prefix=".cscore-probe-", dir=probe)
            os.close(fd)
            os.unlink(name)
        except OSError as err:
            problem = f"cannot write in {probe} ({err.strerror or err})"
    if problem is not None:
        raise ConfigError(f"sharding (runtime.shards / runtime.devices) needs a writable statistics cache shared "
                          f"by every shard: the shards meet in {root}, but {problem}; give cache.dir=<a writable "
                          "folder> (or CSCORE_CACHE)")


NODE_LOCAL = ("tmpfs", "ramfs")  # file systems no other node sees


def check_shared(run: RunConfig) -> None:
    """A SLURM job array's statistics cache on a node-local file system (tmpfs) is refused."""
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
    """``cscore run -m ... runtime.shards=N`` without ``runtime.shard`` / ``runtime.devices``: one job per shard."""
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


# -- one run directory per sweep point of a sharded multirun ------------------------------------

POINT_FILE = "point-{}.json"  # under <sweep dir>/.shards/: the run directory a point's job wrote


def sweep_point(hc) -> Path | None:
    """For a job of a sharded multirun, the record its sweep point's jobs share; None for any other run."""
    from hydra.types import RunMode

    task = list(hc.overrides.task)
    own = sorted(o for o in task if o.lstrip("+~").split("=", 1)[0] != "runtime.shard")
    if hc.mode != RunMode.MULTIRUN or len(own) == len(task):
        return None
    digest = hashlib.sha256("\n".join(own).encode()).hexdigest()[:16]
    return Path(hc.sweep.dir).absolute() / rundir.SHARDS / POINT_FILE.format(digest)


@contextmanager
def one_run_directory(point: Path | None, out_dir: Path):
    """Around writing a run directory: the first job of a sweep point writes it; a later one is given the
    directory written (else None) and writes nothing. The record is written once the directory is complete."""
    if point is None:
        yield None
        return
    with file_lock(point.with_suffix(".lock")):
        try:
            written = Path(json.loads(point.read_text())["run_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            written = None
        if written is not None and written != out_dir and rundir.is_complete(written):
            yield written
            return
        yield None
        write_atomic(point, json.dumps({"run_dir": str(out_dir)}) + "\n")
