"""The Hydra callback that hands each finished run directory to MLflow or W&B (``tracking=``, conf/tracking/); a
tracker that is missing or fails costs one warning line, never the run."""

from __future__ import annotations

import logging
import math
import re
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.errors import ConfigError

log = logging.getLogger(__name__)

SETTINGS = {"none": {"name"},  # the backends, and the keys each one's conf/tracking/<name>.yaml has
            "mlflow": {"name", "tracking_uri", "experiment", "artifacts"},
            "wandb": {"name", "project", "entity", "mode", "dir", "artifacts"}}
WANDB_MODES = ("online", "offline")


def check_config(tracking: dict | None):
    """The tracking section as a ``config.groups.Tracking``; a ConfigError where it is not one of conf/tracking/."""
    from cscore.config.groups import Tracking
    from cscore.scorers.methods.params import Param, check_keys, check_section

    tracking = tracking or {"name": "none"}
    name = Param(str, choices=tuple(SETTINGS)).check("tracking.name", tracking.get("name"))
    check_keys("tracking", tracking, SETTINGS[name], owner=f"tracking={name}")
    checked = check_section(Tracking, tracking, "tracking")  # each value as the schema has it
    if checked.mode is not None:
        Param(str, choices=WANDB_MODES).check("tracking.mode", checked.mode)
    if name == "mlflow" and not str(checked.experiment or "").strip():
        raise ConfigError(f"tracking.experiment must name an MLflow experiment, got {checked.experiment!r}")
    return checked


@dataclass
class Record:
    """One finished run, as its run directory tells it."""

    run_dir: Path
    name: str
    config: dict  # the resolved config (config.yaml)
    signature: str
    metrics: dict[str, float]  # <row>/<aspect>/<statistic>, speed/..., n_items, n_truncated
    group: str | None = None  # the multirun it belongs to (its sweep directory)
    tags: dict = field(default_factory=dict)


def read_record(run_dir: Path, name: str) -> Record | None:
    """The run in ``run_dir``, or None when it holds no complete run."""
    metrics = rundir.read_metrics(run_dir)
    if metrics is None:
        return None
    config = yaml.safe_load((Path(run_dir) / rundir.CONFIG).read_text()) or {}
    values = {**correlation_metrics(metrics["correlations"]), **speed_metrics(metrics["speed"]),
              "n_items": float(metrics["n_items"]), "n_truncated": float(metrics["n_truncated"])}
    return Record(Path(run_dir), name, config, str(metrics["signature"]), values)


def metric_name(*parts) -> str:
    """``a/b/c`` from parts, each character trackers do not allow in a name as ``_``."""
    return "/".join(re.sub(r"[^\w.\- ]", "_", str(p)).strip(".") or "_" for p in parts)


def correlation_metrics(records: list[dict]) -> dict[str, float]:
    """A metric per row x aspect x statistic (``contrast/overall/pearson``), and per row the mean over aspects."""
    out: dict[str, float] = {}
    per_row: dict[tuple[str, str], list[float]] = {}
    for r in records:
        value = float(r["value"]) if r["value"] is not None else math.nan
        out[metric_name(r["metric"], r["target"], r["correlation"])] = value
        per_row.setdefault((r["metric"], r["correlation"]), []).append(value)
    for (row, kind), values in per_row.items():
        out[metric_name(row, "AVG", kind)] = sum(values) / len(values)
    return out


THIS_RUN = ("from_cache", "seconds_this_run", "fetch_seconds")  # a cached pass's own figures


def speed_metrics(speed: dict, path: tuple = ("speed",)) -> dict[str, float]:
    """The numbers of metrics.json's ``speed`` by their path; a pass read from the cache: what this run spent."""
    out = {}
    for key, value in speed.items():
        if speed.get("from_cache") is True and path[-2:-1] == ("passes",) and key not in THIS_RUN:
            continue
        if isinstance(value, dict):
            out.update(speed_metrics(value, (*path, key)))
        elif isinstance(value, (bool, int, float)):
            out[metric_name(*path, key)] = float(value)
    return out


def first_line(err: BaseException) -> str:
    text = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def sweep_keys(config: DictConfig) -> list[str]:
    """The keys a multirun sweeps: command-line sweeps (``a=1,2``) and hydra.sweeper.params."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = list(config.hydra.overrides.task)
    keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(task) if o.is_sweep_override()]
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    return keys + [k for k in params if k not in keys]


class Tracking(Callback):
    """Logs every run that finishes (a run skipped as already complete was logged when it ran)."""

    def __init__(self) -> None:
        self.parent: str | None = None  # the MLflow parent run of this multirun
        self.swept: list[str] = []
        self.before: dict[str, tuple | None] = {}  # run dir -> metrics.json's (mtime, size) at job start
        self.state: dict = {}  # "missing": the tracker is not installed (warned once)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        settings = tracker_settings(config)
        if settings["name"] == "none":
            return
        with suppress(Exception):  # a name without the swept values is all that is lost
            self.swept = sweep_keys(config)
        if settings["name"] == "mlflow":
            self.parent = guarded(settings, "this multirun", lambda t: t.start_parent(
                sweep_dir(config), config.hydra.overrides.task), self.state)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        settings = tracker_settings(config)
        if settings["name"] == "mlflow" and self.parent:
            guarded(settings, "this multirun's end", lambda t: t.end_parent(self.parent), self.state)

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        out = config.hydra.runtime.output_dir
        self.before[out] = file_state(Path(out) / rundir.METRICS)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        settings = tracker_settings(config)
        out = Path(config.hydra.runtime.output_dir)
        if settings["name"] == "none" or getattr(job_return.status, "name", "") != "COMPLETED":
            return
        now = file_state(out / rundir.METRICS)
        if now is not None and now == self.before.pop(str(out), None):
            return  # skipped as complete: logged when it ran (its config, tracking included, is the same)
        multirun = config.hydra.mode == RunMode.MULTIRUN

        def log_run(tracker) -> None:
            record = read_record(out, job_name(config, out, multirun, self.swept))
            if record is None:
                return
            if multirun:
                record.group = sweep_dir(config)
                record.tags["cscore.job"] = str(config.hydra.job.num)
            tracker.log_run(record, self.parent)

        guarded(settings, f"run {out}", log_run, self.state)


def tracker_settings(config: DictConfig) -> dict:
    if "tracking" not in config:
        return {"name": "none"}
    settings = OmegaConf.to_container(config.tracking, resolve=True)
    assert isinstance(settings, dict), settings  # a config group: a mapping (cli.compose.plain's check; a cycle)
    return settings


def sweep_dir(config: DictConfig) -> str:
    return str(Path(config.hydra.sweep.dir).resolve())


def job_name(config: DictConfig, out: Path, multirun: bool, swept: list[str]) -> str:
    """The run directory's name; in a multirun ``<job number>: <its swept values>``."""
    if not multirun:
        return out.name
    values = [o for o in config.hydra.overrides.task if o.lstrip("+~").split("=", 1)[0] in swept]
    return f"{config.hydra.job.num}: {' '.join(values)}".strip().rstrip(":")


def file_state(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


QUIET_LOGGERS = ("urllib3", "mlflow", "wandb")  # their retries and notices: the warning below says it once


def guarded(settings: dict, what: str, action, state: dict):
    """``action(tracker)`` for the configured tracker; any failure costs one warning line."""
    from cscore.run import trackers

    if state.get("missing"):
        return None
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    try:
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        return action(trackers.make(settings))
    except Exception as err:  # the tracker's failure never fails the run: one line
        tracker = settings["name"]
        state["missing"] = isinstance(err, ModuleNotFoundError) and (err.name or "").split(".")[0] == tracker
        if state["missing"]:
            log.warning("tracking=%s: %s is not installed (pip install \"cscore[%s]\"); runs are not tracked",
                        tracker, tracker, tracker)
        else:
            log.warning("tracking=%s: %s not tracked (%s); the run itself is not affected", tracker, what,
                        first_line(err))
        return None
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
