"""Sharded runs from the command line (``runtime.shards`` / ``runtime.shard`` / ``runtime.devices``,
``scorers/store/runner.py``): the checks made before anything loads, the coordinator of this
process (``coordinator``: the one place the environment is read for sharding), the worker
processes of ``runtime.devices`` (the parent computes shard 0 on the first device itself, one
worker per other device computes its shard; the parent, ``LocalDevices``, waits for their marks
and merges), and the one line a run whose shards are not all done ends with.

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from cscore.config.run import RunConfig, Runtime
from cscore.errors import ConfigError, CscoreError, ShardsPending
from cscore.scorers.store.coordinator import ArrayTask, InProcess, wait_for

if TYPE_CHECKING:
    from cscore.run.kinds.base import RunState

log = logging.getLogger("cscore")

OWN_KEYS = ("runtime.shards", "runtime.shard", "runtime.devices", "runtime.device")  # set per worker
WORKER_DIR = ".shards"  # under the parent's run directory: the workers' own run directories and logs
WORKER_ENV = "CSCORE_SHARD_WORKER"  # set for the worker processes of runtime.devices: the parent merges


def coordinator(runtime) -> InProcess:
    """Who computes, waits and merges in this process (``scorers/store/coordinator.py``): a worker
    of ``runtime.devices`` (WORKER_ENV) computes its shard and leaves the merge to its parent; a
    SLURM job's shard (SLURM_JOB_ID) is a task of a job array; any other run computes its shard
    (``runtime.shard``) or every shard in this process. The one place the environment is read for
    sharding (the parent of runtime.devices has ``Workers.coordinator``, ``LocalDevices``). Built
    once per job and handed to the stages beside the typed config, never stored in it."""
    count, index = int(runtime.shards), None if runtime.shard is None else int(runtime.shard)
    if os.environ.get(WORKER_ENV):
        return ArrayTask(count, index, merge=False)
    if os.environ.get("SLURM_JOB_ID"):
        return ArrayTask(count, index)
    return InProcess(count, index)


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
    if run.runtime.devices is None and os.environ.get("SLURM_JOB_ID") and in_cache:
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


def worker_overrides(overrides: list[str], index: int, count: int, device: str, out: Path | None) -> list[str]:
    """The parent's overrides with this worker's shard and device, its run directory under ``out``
    (None: a stage command, ``cscore cdm``, which has no run directory)."""
    own = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in OWN_KEYS]
    run_dir = [] if out is None else [f"hydra.run.dir={out / f'shard-{index}'}"]
    return [*own, f"runtime.shards={count}", f"runtime.shard={index}", f"runtime.device={device}", *run_dir]


def run_workers(run: RunConfig, overrides: list[str], out_dir: Path, command: tuple) -> None:
    """A stage command's ``runtime.devices`` (``command``, e.g. ``("cdm", "train")``): one worker
    per device computes its shard, every shard in a worker; this process merges once they all
    ended (raises CscoreError naming a shard that failed and the command that finishes it)."""
    start = time.perf_counter()
    workers = Workers(run, overrides, out_dir, command=command, first=0)
    workers.finish()
    workers.emit(f"statistics: every shard done in {time.perf_counter() - start:.1f}s")


class Workers:
    """The worker processes of ``runtime.devices``: shard K (1 .. N-1) on device K, one ``cscore run``
    each, side by side, their lines relayed as ``shard K: ...`` (and kept in ``.shards/shard-K.log``).
    Shard 0 is the parent's own, computed in-process on the first device. ``wait`` is how the
    parent's coordinator (``LocalDevices``) waits for the workers before it merges."""

    POLL = 0.05  # seconds between two looks at the marks

    def __init__(self, run: RunConfig, overrides: list[str], out_dir: Path, emit=None, command: tuple = ("run",),
                 first: int = 1):
        devices = run.runtime.devices
        assert isinstance(devices, list)
        self.devices, self.out, self.command, self.overrides = devices, out_dir / WORKER_DIR, command, overrides
        self.emit = emit or (lambda line: print(line, flush=True))
        self.failed = False
        self.out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, WORKER_ENV: "1"}
        self.procs: dict[int, subprocess.Popen] = {}
        self.relays: list[threading.Thread] = []
        run_dir = self.out if command == ("run",) else None  # a stage command (cscore cdm) has no run directory
        for k in range(first, len(devices)):
            args = [sys.executable, "-m", "cscore.cli.main", *command,
                    *worker_overrides(overrides, k, len(devices), devices[k], run_dir)]
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            self.procs[k] = proc
            t = threading.Thread(target=_relay, args=(proc, k, self.out / f"shard-{k}.log", self.emit), daemon=True)
            t.start()
            self.relays.append(t)
        self.emit(f"statistics: {len(devices)} shards on {', '.join(devices)} (shard 0 in this process, "
                  f"one worker process each for the others)" if first else
                  f"statistics: {len(devices)} shards on {', '.join(devices)} (one worker process each)")

    def coordinator(self) -> InProcess:
        """The parent's: shard 0 of every pass, then ``wait`` for the workers' shards, then the merge."""
        return LocalDevices(len(self.devices), 0, workers=self)

    def wait(self, pending, label: str) -> None:
        """Until ``pending()`` (the pass's shards not done yet) is empty (``coordinator.wait_for``).
        A missing shard whose worker ended before the marks were read will not come: a failed one
        stops the run (``fail``); one that ended well, or shard 0, lost a partial the merge re-runs here."""
        wait_for(pending, self.look, poll=self.POLL)

    def look(self):
        """The workers as they are now (looked at before the marks: a worker marks, then ends): the
        wait goes on while every missing shard's worker is alive."""
        ended = {k: p.poll() for k, p in self.procs.items()}

        def alive(missing: list[int]) -> bool:
            dead = [(k, code) for k in missing if (code := ended.get(k)) not in (None, 0)]
            if dead:
                self.fail(*dead[0])
            return not any(ended.get(k, 0) is not None for k in missing)

        return alive

    def fail(self, k: int, code: int) -> None:
        """Shard ``k``'s worker failed: the other workers end their shards (kept), then one line."""
        self.failed = True
        for p in self.procs.values():
            p.wait()
        self.join()
        n = len(self.devices)
        raise CscoreError(f"shard {k} of {n} (runtime.device={self.devices[k]}) failed with exit code {code} "
                          f"(its log: {self.out / f'shard-{k}.log'}); the run is incomplete; the shards done are "
                          f"kept: {self.again()} finishes it")

    def again(self) -> str:
        """The command that finishes the run."""
        return finish_command() if self.command == ("run",) else stage_line(self.command, self.overrides)

    def finish(self) -> None:
        """After the parent's passes: the workers end; their run directories hold nothing the run
        needs (their logs stay)."""
        codes = {k: p.wait() for k, p in self.procs.items()}
        self.join()
        failed = [k for k, c in codes.items() if c != 0]
        if failed:
            self.fail(failed[0], codes[failed[0]])
        for k in self.procs:
            shutil.rmtree(self.out / f"shard-{k}", ignore_errors=True)

    def stop(self) -> None:
        """The parent failed or was stopped: its workers are stopped too (SIGTERM: each keeps the
        batches it completed), and waited for."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            p.wait()
        self.join()

    def join(self) -> None:
        for t in self.relays:
            t.join()


@dataclass(frozen=True)
class LocalDevices(InProcess):
    """The coordinator of the parent of ``runtime.devices``: it computes shard 0, then waits for its
    workers' shards (``Workers.wait``: one line naming a worker that failed), then merges; a shard
    a worker lost it computes itself."""

    workers: Workers | None = field(default=None, compare=False)
    supervises: ClassVar[bool] = True

    def supervise(self, pending, label: str) -> None:
        assert self.workers is not None
        self.workers.wait(pending, label)


@contextmanager
def sharded(run: RunConfig, overrides: list[str], out_dir: Path, state: RunState):
    """Yield the job's coordinator, which the stages are handed beside the typed config.
    ``runtime.devices``: start the workers of shards 1 .. N-1 and yield the parent's (shard 0 here,
    ``LocalDevices``); the workers end (or are stopped) when the block does. Without
    ``runtime.devices``: ``coordinator``, read from the settings and the environment."""
    if run.runtime.devices is None:
        yield coordinator(run.runtime)
        return
    workers = Workers(run, overrides, out_dir)
    try:
        yield workers.coordinator()
        workers.finish()
    except BaseException:
        if workers.failed:  # the run directory keeps the workers' logs the line names
            state["stage"] = "workers"
        workers.stop()
        raise


def _relay(proc, k: int, log_path: Path, emit) -> None:
    with open(log_path, "w") as log_file:
        for line in proc.stdout:
            log_file.write(line)
            text = line.rstrip()
            if text:
                emit(f"shard {k}: {text}")


def finish_command(extra: str = "", args: list[str] | None = None) -> str:
    """The command this process was started with (plus ``extra``), to run again. ``args``: the
    job's own overrides, where ``sys.argv`` is not the command (a SLURM job's is submitit's)."""
    if args is None:
        args = sys.argv[1:] if sys.argv and sys.argv[0].startswith("cscore") else sys.argv
    drop = ("run", "runtime.shard") if extra else ("run",)
    line = "cscore run " + " ".join(shlex.quote(a) for a in args if a.lstrip("+~").split("=", 1)[0] not in drop)
    return f"`{line}{' ' + extra if extra else ''}`"


def stage_line(command: tuple, overrides: list[str], extra: str = "") -> str:
    """A stage command (``cscore cdm train ...``) with its overrides (and ``extra``), to run again."""
    args = [o for o in overrides if not extra or o.lstrip("+~").split("=", 1)[0] != "runtime.shard"]
    return "`" + " ".join(["cscore", *command, *(shlex.quote(a) for a in args), *([extra] if extra else [])]) + "`"


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
    from cscore import rundir
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
