"""``hydra/launcher=slurm_warm``: before the sweep's job array, run its first point alone as one SLURM
job and wait for it, so that it fills the statistics cache the array jobs then read. A Hydra callback,
since Hydra only instantiates launchers that live in the ``hydra_plugins`` namespace package."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from cscore.cli.compose import plain
from cscore.cli.slurm_check import exit_on_error
from cscore.errors import SlurmError

WARM_DIR = "warm"  # <hydra.sweep.dir>/warm: the warm-up job's run dir (a complete run of point 0)


def sweep_points(config: DictConfig) -> list[list[str]]:
    """The task overrides of every job of the sweep, in the basic sweeper's job order."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.sweeper.get("params") or {}
    arguments = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    parsed = OverridesParser.create().parse_overrides(arguments)
    return BasicSweeper.split_arguments(parsed, None)[0]


def make_executor(config: DictConfig):
    """A submitit SLURM executor with the sweep's launcher settings, for the job ``<name>_warm``."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    launcher = plain(config.hydra.launcher)
    launcher.pop("_target_", None)
    folder = launcher.pop("submitit_folder")
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm",
                                     slurm_max_num_timeout=launcher.pop("max_num_timeout", 0))
    launcher["name"] = f"{launcher.get('name') or 'cscore'}_warm"
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in launcher.items()})
    return executor


class WarmFirstPoint(Callback):
    """``hydra.callbacks.slurm_warm`` in conf/hydra/launcher/slurm_warm.yaml."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        with exit_on_error("the SLURM warm-up job"):
            warm_up(config)


def warm_up(config: DictConfig) -> None:
    """Submit the sweep's first point as one job and wait for it; SlurmError if it fails."""
    from submitit.core.utils import CommandFunction, FailedSubmissionError, UncompletedJobError

    points = sweep_points(config)
    if len(points) < 2:
        return  # one job: nothing to share
    run_dir = Path(str(config.hydra.sweep.dir)).absolute() / WARM_DIR
    cmd = [sys.executable, "-m", "cscore.cli.main", "run", *points[0], f"hydra.run.dir={run_dir}"]
    try:
        job = make_executor(config).submit(CommandFunction(cmd, verbose=True, cwd=os.getcwd()))
    except (FailedSubmissionError, ValueError, OSError) as err:  # sbatch, a launcher setting, the submitit folder
        raise SlurmError(f"could not submit the warm-up job: {_reason(err)}") from err
    print(f"[cscore] warm-up job {job.job_id}: {' '.join(points[0])} -> {run_dir}", file=sys.stderr, flush=True)
    try:
        job.result()
    except UncompletedJobError as err:  # failed, killed or timed out
        raise SlurmError(f"warm-up job {job.job_id} failed: {_reason(err)} (log: {job.paths.stderr})") from err


def _reason(err: Exception) -> str:
    """The gist of a failure: cscore's own error line, else the trace's last `SomeError: ...` line, else its last."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    ours = [line.split("cscore: error: ", 1)[1] for line in lines if "cscore: error: " in line]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*: ", line)]
    return (ours or errors or lines or [type(err).__name__])[-1]
