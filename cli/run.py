"""``cscore run``: load -> plan -> score -> evaluate -> write; stages in ``run/stages.py``, plan and score
the method's kind's (``cscore.run.kinds``)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.cli import names
from cscore.cli.exits import fail
from cscore.cli.names import resolve_pair
from cscore.cli.sweep_points import sweep_others
from cscore.errors import CscoreError, ShardsPending
from cscore.scorers.store.runner import Pending

if TYPE_CHECKING:
    from cscore.run.kinds.base import RunState

# the stages, kinds and workers are imported where a job runs: `--help-all` and `--cfg job` load no torch

log = logging.getLogger(__name__)
row_log = logging.getLogger("cscore.rows")  # per-row details: run.log only, never the console
names.register()  # ${cscore.run_name:} in hydra.run.dir / hydra.sweep.dir (conf/config.yaml)


HYDRA_FILES = {".hydra", "run.log", "config.yaml"}  # what a run dir holds before any work is done


def run(cfg: DictConfig, out_dir: Path, state: RunState, others: tuple, overrides: tuple, point: Path | None) -> dict:
    """The whole run of ``cfg`` (as Hydra composed it); raises CscoreError for anything the user can fix.
    ``state["stage"]`` says how far it got; ``others``: the other jobs of its multirun; ``overrides``: the
    job's own; ``point``: the record its sweep point's shard jobs share (``launch.sweep_point``)."""
    from dataclasses import replace

    from cscore.progress import Progress, progress_bar
    from cscore.run import kinds, launch, stages, summary, workers
    from cscore.run.slice_hint import quick_slice
    from cscore.run.validate import validate
    from cscore.scorers.engine import threads

    state["stage"] = "validate"
    config = replace(validate(cfg), sweep_others=others)
    kind = kinds.of_method(config.method.name)
    launch.check(config, kind)  # runtime.shards / shard / devices, before anything loads
    threads.ask(config.runtime.threads)  # applied in torch only before work that computes
    console = summary.make_console()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / rundir.CONFIG).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    # runtime.devices: workers compute shards 1 .. N-1, this process shard 0, then merges
    with workers.sharded(config, list(overrides), out_dir, state) as shards:
        state["stage"] = "load"
        loaded = stages.load_stage(config)
        plan = kind.plan(config)
        state["stage"] = "models"
        scored = kind.kept(config, loaded, plan)  # every statistic in the cache, found without torch: none loads
        if scored is None:
            threads.apply(config.runtime.threads)
            groups = loaded.examples["group"].nunique() if "group" in loaded.examples else None
            progress = Progress(*progress_bar(console, config.runtime.progress, quick_slice(config, groups)))
            got = kind.score(config, loaded, plan, progress, state, shards)
            if isinstance(got, Pending):  # this process did its part of a sharded pass: the command ends here
                got.stop(shards)
            scored = got
    state["stage"] = "write"
    with launch.one_run_directory(point, out_dir) as other:
        if other is not None:
            Pending([]).stop(shards, f"statistics merged; this sweep point's run directory is "
                             f"{other} (another shard's job wrote it)")
        corr = stages.evaluate_stage(config, kind, scored, plan)
        metrics = stages.write_stage(config, kind, out_dir, loaded, plan, scored, corr)
    summary.print_summary(console, config, kind, out_dir, loaded, scored, corr, metrics)
    return metrics


def untouched(out_dir: Path) -> bool:
    """Nothing but what Hydra and the first lines of a run write: safe to remove after a failure."""
    return out_dir.is_dir() and {p.name for p in out_dir.iterdir()} <= HYDRA_FILES


def attach_row_log(out_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(out_dir / rundir.LOG)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    row_log.addHandler(handler)
    row_log.setLevel(logging.INFO)
    row_log.propagate = False
    return handler


@hydra.main(version_base="1.3", config_path="pkg://cscore.conf", config_name="config")
def hydra_entry(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from cscore.run import launch, workers

    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    fresh = untouched(out_dir)  # a new directory: a run that fails before any work removes it
    for note in resolve_pair(cfg, list(hc.overrides.task)):
        log.info(note)
    if cfg.get("resume", True) and rundir.is_complete(out_dir, OmegaConf.to_yaml(cfg, resolve=True)):
        log.info("%s is complete (same config, metrics.json present): skipped; resume=false re-runs it", out_dir)
        return
    (out_dir / rundir.FAILED).unlink(missing_ok=True)
    (out_dir / rundir.METRICS).unlink(missing_ok=True)  # an older config's: a kill must not leave it marking completion
    handler = attach_row_log(out_dir)
    start = time.perf_counter()
    state: RunState = {}  # how far the run got (its stage), for the failure record
    try:
        run(cfg, out_dir, state, sweep_others(hc), tuple(hc.overrides.task), launch.sweep_point(hc))
    except ShardsPending as err:  # this process did its shard; the run is complete once every shard is
        log.info(workers.pending_line(err, workers.job_args(hc)))
        if untouched(out_dir):  # the shard that merges writes the run directory: no empty one left
            shutil.rmtree(out_dir, ignore_errors=True)
        return
    except CscoreError as err:  # inside the job as before it: the error's exit_code (cli/exits.py)
        if os.environ.get("CSCORE_DEBUG"):
            raise
        log.debug("error", exc_info=True)
        fail_dir(out_dir, fresh and state.get("stage") in ("validate", "load", "models"), err, state)
        fail(str(err), err.exit_code or 1)
    except (KeyboardInterrupt, Exception) as err:
        fail_dir(out_dir, False, err, state)
        if isinstance(err, OSError) and err.errno in rundir.NO_ROOM:
            fail(f"cannot write to {err.filename or out_dir}: {err.strerror}", 1)
        raise
    finally:
        row_log.removeHandler(handler)
        handler.close()
    log.info("done in %.1fs", time.perf_counter() - start)


def fail_dir(out_dir: Path, remove: bool, err: BaseException, state: RunState) -> None:
    """A new run directory that failed before scoring is removed; any other gets a failed.json."""
    if remove:
        shutil.rmtree(out_dir, ignore_errors=True)  # run.log stays open; harmless on POSIX
        outputs = Path.cwd().resolve() / "outputs"  # the default layout's; folders elsewhere are the user's
        for parent in list(out_dir.resolve().parents)[:2]:  # outputs/<date>/ left empty by it
            if parent.is_relative_to(outputs) and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
    else:
        record = {"error": f"{type(err).__name__}: {err}".strip(), "stage": state.get("stage", "?"),
                  "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
        with suppress(OSError):
            rundir.write_atomic(out_dir / rundir.FAILED, json.dumps(record, indent=2) + "\n")
