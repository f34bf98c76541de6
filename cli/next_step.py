"""After a multirun, the command that comes next (``cscore report <its directory>``) with how many runs
finished and failed: the Hydra callback ``hydra.callbacks.next_step`` in conf/config.yaml."""

from __future__ import annotations

import shlex
from contextlib import suppress
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from cscore import rundir


def next_line(sweep_dir: str) -> str:
    """``next: cscore report <dir>   (N runs finished[, K failed])``, the folder as the user can type it from where
    they ran the sweep (relative when inside it)."""
    folder = shown = Path(sweep_dir)
    with suppress(ValueError):  # a relative path, or one outside
        shown = folder.relative_to(Path.cwd())
    jobs = [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []
    done = sum((p / rundir.METRICS).is_file() for p in jobs)
    failed = sum((p / rundir.FAILED).is_file() for p in jobs)
    counts = f"{done} run{'s' * (done != 1)} finished" + (f", {failed} failed" if failed else "")
    return f"next: cscore report {shlex.quote(str(shown))}   ({counts}: tables, significance and plots)"


class NextStep(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        print(next_line(str(config.hydra.sweep.dir)), flush=True)
