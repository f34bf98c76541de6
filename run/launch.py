"""Sharded runs from the command line, before and around the work (``runtime.shards`` /
``runtime.shard`` / ``runtime.devices``): the settings checked before anything loads
(``check``, ``check_settings``, ``check_kind``, ``check_writable``, ``check_shared``),
``runtime.devices`` resolved (``resolve_devices``), a sharded multirun's one job per shard
(``array_shards``) and one run directory per sweep point (``sweep_point``,
``one_run_directory``). The coordination itself is ``run/workers.py``'s."""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from cscore import rundir
from cscore.config.run import RunConfig, Runtime
from cscore.errors import ConfigError
from cscore.run import workers


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
    """The runtime settings with ``runtime.devices`` resolved, once, where the typed run is built
    (``run/typed.py``: its ``PassOptions`` are built from these, the coordinator too): N devices are N
    shards, this process computing on the first; one device runs the pass here, no worker.
    Settings that do not go together stay as given, for ``check_settings`` to name."""
    devices = devices_of(rt.devices)
    if devices is None or sharding_problem(rt, devices) is not None:
        return rt
    if len(devices) == 1:
        return replace(rt, devices=None, device=devices[0])
    return replace(rt, shards=len(devices), devices=devices, device=devices[0])


def check(run: RunConfig, kind) -> None:
    """The sharding settings checked before anything loads (a ConfigError; ``runtime.devices`` was
    resolved when the run was typed: ``resolve_devices``)."""
    check_settings(run)
    if run.runtime.shards > 1:
        check_kind(run, kind)


def check_settings(run: RunConfig) -> None:
    """The checks that need no method kind (nothing imported: the precheck runs them first)."""
    why = sharding_problem(run.runtime, devices_of(run.runtime.devices))
    if why is not None:
        raise ConfigError(why)


def sharding_problem(rt: Runtime, devices: list[str] | None) -> str | None:
    """The one line naming the first sharding settings that do not go together, or None
    (``devices``: ``runtime.devices`` as a list, ``devices_of``)."""
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
    """A sharded run (``check_settings`` passed): whether its kind shards and where its shards meet."""
    if not kind.splits:
        raise ConfigError(f"method={run.method.name} ({kind.name} kind) cannot shard its passes; run it with "
                          "runtime.shards=1 (the default)")
    in_cache = getattr(kind, "meets_in_cache", True)  # cscore cdm generate's shards meet in its output directory
    if not run.cache.enabled and in_cache:
        raise ConfigError("runtime.shards needs the statistics cache (cache.enabled=true): the shards meet there")
    if in_cache:
        check_writable(run)
    if run.runtime.devices is None and in_cache and workers.array_task():  # not runtime.devices' workers: one node
        check_shared(run)


def check_writable(run: RunConfig) -> None:
    """The shards meet in the statistics cache (their locks, partials and the merge are written
    there): a cache folder this process cannot write in is refused in one line, before anything
    loads. Asked by making (and removing) a file, so a read-only mount is seen even by root."""
    import tempfile

    from cscore.files import folder_problem
    from cscore.scorers.store.cache import default_root
    from cscore.scorers.store.checkpoint import LOCK_DIR

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
    return Path(hc.sweep.dir).absolute() / rundir.SHARDS / POINT_FILE.format(digest)


@contextmanager
def one_run_directory(point: Path | None, out_dir: Path):
    """Around the writing of a run directory: of the jobs of one sweep point (``point``:
    ``sweep_point``'s record; None: nothing to share) that have the statistics, the first writes
    its run directory, under the point's lock; a later one is given the directory written (else
    None) and ends there, writing nothing (``cli/run.py``: ShardsPending naming it). Two
    shard jobs that end together both have the merged entry (one merged, the other read it); a
    point's jobs that started after another point's job merged the pass all read it. The record
    is written once the directory is complete: a job killed while writing leaves the point to the
    next."""
    if point is None:
        yield None
        return
    from cscore.files import file_lock, write_atomic

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
