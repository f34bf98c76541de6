"""Is SLURM reachable from here? Asked before a sweep is handed to submitit (the Hydra callback
``SlurmCheck``), so that a missing or down cluster is one clear line, not a traceback."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import traceback
from contextlib import contextmanager

from hydra.experimental.callback import Callback

from cscore.cli.exits import fail
from cscore.errors import CscoreError, SlurmUnavailable

HINT = ("hydra/launcher=slurm submits the sweep with sbatch: run it on a SLURM submit host, "
        "or start a local one-node cluster with `bash scripts/slurm-local.sh start --allow-system-changes` "
        "(root, Debian: it installs packages, writes /etc/slurm and starts daemons)")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def check_slurm_tools() -> None:
    """SlurmUnavailable when ``sbatch`` or ``squeue`` is not on PATH."""
    for tool in ("sbatch", "squeue"):
        if shutil.which(tool) is None:
            raise SlurmUnavailable(f"SLURM is not reachable: `{tool}` is not on PATH. {HINT}")


def check_slurm_available(timeout_s: float = 60.0) -> None:
    """SlurmUnavailable, with a one-line reason, unless ``sbatch`` is on PATH and ``squeue`` answers."""
    check_slurm_tools()
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry (containers): any user works for a liveness query
        user = str(os.getuid())
    cmd = ["squeue", "--noheader", "--format=%i", f"--user={user}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"SLURM is not reachable: `{' '.join(cmd)}` did not answer in {timeout_s:.0f}s. "
                               f"{HINT}") from None
    except OSError as err:
        raise SlurmUnavailable(f"SLURM is not reachable: cannot run squeue ({err}). {HINT}") from None
    if res.returncode != 0:
        why = _first_line(res.stderr) or _first_line(res.stdout) or f"exit status {res.returncode}"
        raise SlurmUnavailable(f"SLURM is not reachable: `squeue` failed: {why}. {HINT}")


@contextmanager
def exit_on_error(what: str):
    """For a Hydra callback: any error exits 1 (a CscoreError with its one line, a bug with its traceback),
    so the sweep stops instead of Hydra logging a warning and going on."""
    try:
        yield
    except CscoreError as err:
        if os.environ.get("CSCORE_DEBUG"):
            traceback.print_exc()
        fail(str(err), 1)
    except Exception:
        traceback.print_exc()
        fail(f"{what} failed (traceback above)", 1)


class SlurmCheck(Callback):
    """``hydra.callbacks.slurm_check`` in conf/hydra/launcher/slurm.yaml, run before the sweep is submitted."""

    def on_multirun_start(self, config, **kwargs) -> None:
        with exit_on_error("the SLURM check"):
            check_slurm_available()
