"""The command line's coordinators (the protocol: ``scorers/store/runner.py``): ``coordinator``
reads the settings and environment; ``runtime.devices`` starts a ``cscore run`` worker per device
but the first (``Workers``), the parent (``LocalDevices``) computing shard 0 and merging."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.errors import CscoreError, ShardsPending
from cscore.scorers.store.runner import ArrayTask, InProcess, wait_for

if TYPE_CHECKING:
    from cscore.run.kinds.base import RunState

log = logging.getLogger("cscore")

OWN_KEYS = ("runtime.shards", "runtime.shard", "runtime.devices", "runtime.device")  # set per worker
WORKER_ENV = "CSCORE_SHARD_WORKER"  # a worker of runtime.devices: set to its parent's start; the parent merges


def coordinator(runtime) -> InProcess:
    """This process's coordinator: a worker of ``runtime.devices`` (WORKER_ENV) leaves the merge to
    its parent; a SLURM job is a task of a job array; else ``runtime.shard`` or every shard here.
    The one place sharding reads the environment."""
    count, index = int(runtime.shards), None if runtime.shard is None else int(runtime.shard)
    if os.environ.get(WORKER_ENV):  # its value: the parent's start (time.time()), this command's
        return ArrayTask(count, index, merge=False, since=float(os.environ[WORKER_ENV]))
    if array_task():
        return ArrayTask(count, index)
    return InProcess(count, index)


def array_task() -> bool:
    """Whether this process is a task of a SLURM job array (not a worker of runtime.devices)."""
    return bool(os.environ.get("SLURM_JOB_ID")) and not os.environ.get(WORKER_ENV)


def worker_overrides(overrides: list[str], index: int, count: int, device: str, out: Path | None) -> list[str]:
    """The parent's overrides with this worker's shard, device and run directory (``out`` None: none)."""
    own = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in OWN_KEYS]
    run_dir = [] if out is None else [f"hydra.run.dir={out / f'shard-{index}'}"]
    return [*own, f"runtime.shards={count}", f"runtime.shard={index}", f"runtime.device={device}", *run_dir]


def run_workers(run: RunConfig, overrides: list[str], out_dir: Path, command: tuple) -> None:
    """A stage command's ``runtime.devices`` (e.g. ``("cdm", "train")``): a worker per device, then
    this process merges (CscoreError names a shard that failed)."""
    start = time.perf_counter()
    workers = Workers(run, overrides, out_dir, command=command, first=0)
    workers.finish()
    workers.emit(f"statistics: every shard done in {time.perf_counter() - start:.1f}s")


class Workers:
    """The worker processes of ``runtime.devices``: shard K on device K, their lines relayed as
    ``shard K: ...`` and kept in ``.shards/shard-K.log``; shard 0 is the parent's own."""

    POLL = 0.05  # seconds between two looks at the marks

    def __init__(self, run: RunConfig, overrides: list[str], out_dir: Path, emit=None, command: tuple = ("run",),
                 first: int = 1):
        devices = run.runtime.devices
        assert isinstance(devices, list)
        self.devices, self.out, self.command, self.overrides = devices, out_dir / rundir.SHARDS, command, overrides
        self.emit = emit or (lambda line: print(line, flush=True))
        self.failed, self.since = False, time.time()  # the command's start: its workers' shards are this command's
        self.out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, WORKER_ENV: repr(self.since)}
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

    def wait(self, pending, label: str) -> None:
        """Until ``pending()`` is empty or a missing shard's worker ended (a failed one: ``fail``)."""
        wait_for(pending, self.look, poll=self.POLL)

    def look(self):
        """The workers now (before the marks: a worker marks, then ends): go on while all missing are alive."""
        ended = {k: p.poll() for k, p in self.procs.items()}

        def alive(missing: list[int]) -> bool:
            dead = [(k, code) for k in missing if (code := ended.get(k)) not in (None, 0)]
            if dead:
                self.fail(*dead[0])
            return not any(ended.get(k, 0) is not None for k in missing)

        return alive

    def fail(self, k: int, code: int) -> None:
        """Shard ``k``'s worker failed: the others end their shards (kept), then one line."""
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
        """Wait for the workers and remove their run directories (their logs stay)."""
        codes = {k: p.wait() for k, p in self.procs.items()}
        self.join()
        failed = [k for k, c in codes.items() if c != 0]
        if failed:
            self.fail(failed[0], codes[failed[0]])
        for k in self.procs:
            shutil.rmtree(self.out / f"shard-{k}", ignore_errors=True)

    def stop(self) -> None:
        """Stop the workers (SIGTERM: each keeps its completed batches) and wait for them."""
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
    """The parent of ``runtime.devices``: shard 0, a wait for the workers, the merge; a lost shard redone here."""

    workers: Workers | None = field(default=None, compare=False)
    supervises: ClassVar[bool] = True

    def supervise(self, pending, label: str) -> None:
        assert self.workers is not None
        self.workers.wait(pending, label)


@contextmanager
def sharded(run: RunConfig, overrides: list[str], out_dir: Path, state: RunState):
    """Yield the job's coordinator; with ``runtime.devices``, start the workers of shards 1 .. N-1
    first and end (or stop) them with the block."""
    if run.runtime.devices is None:
        yield coordinator(run.runtime)
        return
    workers = Workers(run, overrides, out_dir)
    try:  # the parent: shard 0, then wait for the workers, then merge
        yield LocalDevices(len(workers.devices), 0, since=workers.since, workers=workers)
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
    """This process's command (plus ``extra``), to run again; ``args``: the job's overrides where
    ``sys.argv`` is not the command (submitit's)."""
    if args is None:
        args = sys.argv[1:] if sys.argv and sys.argv[0].startswith("cscore") else sys.argv
    drop = ("run", "runtime.shard") if extra else ("run",)
    line = "cscore run " + " ".join(shlex.quote(a) for a in args if a.lstrip("+~").split("=", 1)[0] not in drop)
    return f"`{line}{' ' + extra if extra else ''}`"


def stage_line(command: tuple, overrides: list[str], extra: str = "") -> str:
    """A stage command with its overrides (and ``extra``), to run again."""
    args = [o for o in overrides if not extra or o.lstrip("+~").split("=", 1)[0] != "runtime.shard"]
    return "`" + " ".join(["cscore", *command, *(shlex.quote(a) for a in args), *([extra] if extra else [])]) + "`"


def job_args(hc) -> list[str] | None:
    """A multirun job's own overrides; None for a single run."""
    from hydra.types import RunMode

    return list(hc.overrides.task) if hc.mode == RunMode.MULTIRUN else None


def pending_line(err: ShardsPending, args: list[str] | None = None) -> str:
    """The line a shard that did its part ends with: what is missing and the commands that finish it."""
    if not err.missing:
        return str(err)
    commands = " and ".join(finish_command(f"runtime.shard={k}", args) for k in err.missing)
    return f"{err}; the run is incomplete: {commands} (the last shard to finish merges and writes the run directory)"
