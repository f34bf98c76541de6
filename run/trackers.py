"""The trackers behind ``tracking=`` (run/tracking.py hands them a finished run's ``Record``); MLflow and W&B
are optional extras, imported only when a run asks for them."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Literal, cast, get_args

from cscore.errors import ConfigError

MLFLOW_KEY_CHARS = re.compile(r"[^\w.\- /]")
MLFLOW_PARAM_VALUE_MAX = 6000  # MLflow refuses longer parameter values
MLFLOW_KEY_MAX = 250
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "60"}  # unless set


WandbMode = Literal["online", "offline", "disabled", "shared"]


def wandb_mode(given: str) -> WandbMode:
    """``tracking.mode`` (or $WANDB_MODE) as one of the modes ``wandb.init`` takes."""
    if given not in get_args(WandbMode):
        raise ConfigError(f"tracking.mode: one of {', '.join(get_args(WandbMode))}, got {given!r}")
    return cast(WandbMode, given)


def outputs_dir() -> Path:
    """The default home of the trackers' local stores: ./outputs, beside the run directories."""
    return Path.cwd() / "outputs"


def flat_params(config: dict, prefix: str = "") -> dict[str, str]:
    """``{"method.gamma": "0.1", ...}``: every leaf of the config, lists as JSON."""
    out = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_params(value, name + "."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, default=str)
    return out


def make(settings: dict):
    return {"mlflow": MLflowTracker, "wandb": WandbTracker}[settings["name"]](settings)


class MLflowTracker:
    """Runs in one MLflow experiment; a multirun is a parent run, its jobs child runs
    (tag ``mlflow.parentRunId``) found again by the parent's tag ``cscore.sweep_dir``."""

    def __init__(self, settings: dict):
        uri = settings.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") \
            or (outputs_dir() / "mlruns").as_uri()
        if "://" not in uri or uri.startswith("file:"):
            # MLflow 3 keeps its file store only on request (its SQL store needs a pyarrow that would replace ours)
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        else:  # MLflow's own defaults retry an unreachable server for minutes (4 measured), per run
            for name, value in HTTP_DEFAULTS.items():
                os.environ.setdefault(name, value)
        from mlflow.tracking import MlflowClient

        self.settings = settings
        self.client = MlflowClient(tracking_uri=uri)

    def experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        name = self.settings["experiment"]
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except MlflowException:  # another job of the sweep created it first
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def start_parent(self, sweep_dir: str, overrides) -> str:
        tags = {"cscore.role": "multirun", "cscore.sweep_dir": sweep_dir, "cscore.overrides": " ".join(overrides)}
        run = self.client.create_run(self.experiment_id(), run_name=f"multirun {Path(sweep_dir).name}", tags=tags)
        return run.info.run_id

    def end_parent(self, run_id: str) -> None:
        self.client.set_terminated(run_id, "FINISHED")

    def find_parent(self, experiment: str, sweep_dir: str) -> str | None:
        """The parent run of a multirun started in another process (a SLURM job of the sweep)."""
        if "'" in sweep_dir:
            return None
        runs = self.client.search_runs([experiment], max_results=1, order_by=["attributes.start_time DESC"],
                                       filter_string=f"tags.`cscore.sweep_dir` = '{sweep_dir}' "
                                                     "and tags.`cscore.role` = 'multirun'")
        return runs[0].info.run_id if runs else None

    def log_run(self, record, parent: str | None) -> None:
        from mlflow.entities import Metric, Param

        experiment = self.experiment_id()
        if record.group and parent is None:
            parent = self.find_parent(experiment, record.group)
        tags = {"signature": record.signature, "cscore.run_dir": str(record.run_dir), **record.tags}
        if parent:
            tags["mlflow.parentRunId"] = parent
        run_id = self.client.create_run(experiment, run_name=record.name, tags=tags).info.run_id
        now = int(time.time() * 1000)
        try:
            params = [Param(MLFLOW_KEY_CHARS.sub("_", k)[:MLFLOW_KEY_MAX], v[:MLFLOW_PARAM_VALUE_MAX])
                      for k, v in flat_params(record.config).items()]
            metrics = [Metric(k, v, now, 0) for k, v in record.metrics.items()]
            self.client.log_batch(run_id, metrics=metrics, params=params)
            if self.settings.get("artifacts", True):
                self.client.log_artifacts(run_id, str(record.run_dir), "run_dir")
        except Exception:
            self.client.set_terminated(run_id, "FAILED")
            raise
        self.client.set_terminated(run_id, "FINISHED")


class WandbTracker:
    """One W&B run per run; the jobs of a multirun share a group named by its sweep directory.
    Offline unless ``tracking.mode=online`` or ``WANDB_MODE`` says otherwise."""

    def __init__(self, settings: dict):
        import wandb

        self.wandb = wandb
        self.settings = settings

    def log_run(self, record, parent: str | None) -> None:
        s = self.settings
        root = Path(s.get("dir") or outputs_dir())
        root.mkdir(parents=True, exist_ok=True)
        config = {**record.config, "signature": record.signature,
                  "cscore": {"run_dir": str(record.run_dir), **record.tags}}
        quiet = self.wandb.Settings(silent=True, console="off", x_disable_stats=True)
        run = self.wandb.init(project=s.get("project"), entity=s.get("entity"), dir=str(root),
                              mode=wandb_mode(s.get("mode") or os.environ.get("WANDB_MODE") or "offline"),
                              group=record.group, job_type="multirun" if record.group else "run",
                              name=record.name, config=config, settings=quiet, reinit="create_new")
        try:
            run.log(record.metrics)
            if s.get("artifacts", True):
                files = Path(run.dir) / "run_dir"
                shutil.copytree(record.run_dir, files, dirs_exist_ok=True)
                run.save(str(files / "**" / "*"), base_path=run.dir, policy="end")
        except Exception:
            run.finish(exit_code=1)
            raise
        run.finish()
