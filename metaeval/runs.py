"""Finding and reading run directories (one `cscore run` each) under a folder, including
partly finished multiruns. What a run directory holds and when it is complete: ``cscore.rundir``."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from cscore import rundir


@dataclass
class Run:
    path: Path
    config: dict
    metrics: dict | None
    failure: dict | None = None  # failed.json of a run that failed once scoring had started

    @property
    def complete(self) -> bool:
        return self.metrics is not None and (self.path / rundir.SCORES).is_file()

    def scores(self) -> pd.DataFrame:
        return pd.read_parquet(self.path / rundir.SCORES)

    def done_metrics(self) -> dict:
        """metrics.json of a run that wrote it (check ``complete`` first)."""
        if self.metrics is None:
            raise ValueError(f"{self.path}: the run wrote no {rundir.METRICS}")
        return self.metrics


def find_runs(root: Path) -> list[Run]:
    """Every directory under ``root`` (itself included) that holds a cscore config.yaml."""
    runs = []
    for config in sorted(Path(root).rglob(rundir.CONFIG)):
        if config.parent.name == ".hydra":
            continue
        try:
            cfg = yaml.safe_load(config.read_text())
        except yaml.YAMLError:
            continue
        if not isinstance(cfg, dict) or not {"data", "pair", "method"} <= set(cfg):
            continue
        run_dir = config.parent
        metrics = rundir.read_metrics(run_dir) if rundir.is_complete(run_dir) else None
        runs.append(Run(run_dir, cfg, metrics, rundir.read_failure(run_dir)))
    return runs


def _values(expr: str) -> list[str]:
    """Values of a basic-sweeper override: a,b,c or range(start,stop[,step]) (others: unknown)."""
    m = re.match(r"^range\(([^)]*)\)$", str(expr).strip())
    if m:
        args = [float(a) for a in m.group(1).split(",")]
        start, stop, step = (args + [1.0])[:3] if len(args) > 1 else (0.0, args[0], 1.0)
        count = max(0, int(math.ceil((stop - start) / step - 1e-12)))
        return [repr(round(start + i * step, 10)) for i in range(count)]
    if re.match(r"^(choice|interval|glob|shuffle|sort|tag)\(", str(expr)):
        return []
    return [v for v in re.split(r",(?![^\[]*\])", str(expr)) if v != ""]


def expected_jobs(sweep_dir: Path) -> list[dict] | None:
    """The jobs a multirun was asked for, from Hydra's multirun.yaml (None if unknown)."""
    file = Path(sweep_dir) / "multirun.yaml"
    if not file.is_file():
        return None
    cfg = yaml.safe_load(file.read_text())
    hydra_cfg = cfg.get("hydra", {}) or {}
    task = (hydra_cfg.get("overrides", {}) or {}).get("task", []) or []
    params = dict((hydra_cfg.get("sweeper", {}) or {}).get("params") or {})
    for override in task:  # a command-line override replaces the config's sweep of that key
        params.pop(override.partition("=")[0], None)
    # Hydra's basic sweeper takes the config's sweeper params first, then the command line
    entries = list(params.items()) + [tuple(o.partition("=")[::2]) for o in task]
    axes = []
    for key, expr in entries:
        vals = _values(expr)
        if not vals:
            return None
        axes.append([(key, v) for v in vals])
    return [dict(combo) for combo in itertools.product(*axes)]


def missing_jobs(sweep_dir: Path, runs: list[Run]) -> list[str]:
    """Job numbers (Hydra's subdir index) with no complete run directory."""
    jobs = expected_jobs(sweep_dir)
    if jobs is None:
        return []
    done = {r.path.relative_to(sweep_dir).parts[0] for r in runs if r.complete and r.path != Path(sweep_dir)}
    swept = [k for k in (jobs[0] if jobs else {}) if len({j[k] for j in jobs}) > 1]
    out = []
    for num, overrides in enumerate(jobs):
        if str(num) not in done:
            out.append(f"job {num} ({' '.join(f'{k}={overrides[k]}' for k in swept)})")
    return out
