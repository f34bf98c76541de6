"""Partly finished multiruns: the jobs a sweep was asked for (Hydra's multirun.yaml), those that left no
run directory, and each run's outcome (``run_status``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cscore.errors import ConfigError
from cscore.rundir import CONFIG, METRICS, Run


def expected_jobs(sweep_dir: Path) -> list[dict] | None:
    """The jobs a multirun was asked for, in Hydra's order (None: no multirun.yaml, or a sweep not enumerated)."""
    file = Path(sweep_dir) / "multirun.yaml"
    if not file.is_file():
        return None
    hydra_cfg = (yaml.safe_load(file.read_text()) or {}).get("hydra", {}) or {}
    task = (hydra_cfg.get("overrides", {}) or {}).get("task", []) or []
    params = (hydra_cfg.get("sweeper", {}) or {}).get("params") or {}
    # the basic sweeper: the config's sweeper params first, then the command line
    axes = sweep_axes([f"{k}={v}" for k, v in params.items()] + list(task))
    return None if axes is None else [dict(combo) for combo in itertools.product(*axes.values())]


def sweep_axes(overrides: list[str]) -> dict[str, list[tuple[str, str]]] | None:
    """{key: [(key, value), ...]} as Hydra's basic sweeper splits ``overrides`` (None: one that does not
    parse or is no list of values)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return None
    axes: dict[str, list[tuple[str, str]]] = {}
    for o in parsed:
        key = o.get_key_element()
        if not o.is_sweep_override():
            axes[key] = [(key, o.get_value_element_as_str())]
        elif o.is_discrete_sweep():
            axes[key] = [(key, v) for v in o.sweep_string_iterator()]
        else:  # an interval: only an optimising sweeper draws from it
            return None
    return axes


SHARD_KEY = "runtime.shard"  # the jobs of a sharded multirun's sweep point differ in it only; one writes the run dir


def missing_jobs(sweep_dir: Path, runs: list[Run]) -> list[str]:
    """The jobs that left no run directory; the shard jobs of one sweep point (``runtime.shard``) share one."""
    jobs = expected_jobs(sweep_dir)
    if jobs is None:
        return []
    done = {r.path.relative_to(sweep_dir).parts[0] for r in runs if r.path != Path(sweep_dir)}
    swept = [k for k in (jobs[0] if jobs else {}) if len({j[k] for j in jobs}) > 1]
    points = [tuple((k, v) for k, v in overrides.items() if k != SHARD_KEY) for overrides in jobs]
    written = {point for num, point in enumerate(points) if str(num) in done}
    return [f"job {num} ({' '.join(f'{k}={jobs[num][k]}' for k in swept)})"
            for num, point in enumerate(points) if point not in written]


def check_folder(root: Path) -> None:
    """A ConfigError unless ``root`` is a folder."""
    if not root.is_dir():
        raise ConfigError(f"{root} {'is a file' if root.exists() else 'does not exist'}: cscore report reads a run "
                          "directory, a multirun directory or a folder holding runs")


def runs_under(roots: list[Path]) -> tuple[list[Run], list[list[Run]], list[Path]]:
    """(every run directory under ``roots`` once, those under each root, those found under several roots)."""
    from cscore.rundir import find_runs

    per_root = [find_runs(root) for root in roots]
    first: dict[Path, Run] = {}
    repeated: list[Path] = []
    for run in itertools.chain(*per_root):
        key = run.path.resolve()
        if key in first and key not in repeated:
            repeated.append(key)
        first.setdefault(key, run)
    return list(first.values()), per_root, repeated


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


@dataclass
class Status:
    """The runs by outcome; ``superseded``: not complete, its config finished later elsewhere (``finished_by``)."""
    complete: list[Run] = field(default_factory=list)
    failed: list[Run] = field(default_factory=list)
    interrupted: list[Run] = field(default_factory=list)
    incomplete: list[Run] = field(default_factory=list)
    superseded: list[Run] = field(default_factory=list)
    finished_by: dict[Path, Path] = field(default_factory=dict)

    def line(self, not_started: int) -> str:
        text = (f"runs: {len(self.complete)} complete, {len(self.failed)} failed, {len(self.interrupted)} interrupted, "
                f"{len(self.incomplete)} incomplete, {not_started} not started")
        if self.superseded:
            text += f"; {len(self.superseded)} stopped earlier and finished by a later run of the same config"
        return text

    def lines(self) -> list[str]:
        """report.md's list of the runs that are not complete."""
        out = [f"- failed: {r.path} ({(r.failure or {}).get('stage')}: {(r.failure or {}).get('error')})"
               for r in self.failed]
        out += [f"- interrupted: {r.path} ({(r.failure or {}).get('stage')})" for r in self.interrupted]
        out += [f"- incomplete: {r.path}" for r in self.incomplete]
        return out + [f"- finished later: {r.path} (by {self.finished_by[r.path]})" for r in self.superseded]


def run_status(runs: list[Run]) -> Status:
    """Each run's outcome; a complete run of the same config with a later metrics.json supersedes a run."""
    status = Status(complete=[r for r in runs if r.complete])
    for r in runs:
        if r.complete:
            continue
        started = _mtime(r.path / CONFIG)
        later = [d for d in status.complete if d.config == r.config and _mtime(d.path / METRICS) >= started]
        if later:
            status.superseded.append(r)
            status.finished_by[r.path] = max(later, key=lambda d: _mtime(d.path / METRICS)).path
        elif r.failure is None:
            status.incomplete.append(r)
        elif str((r.failure or {}).get("error", "")).startswith("KeyboardInterrupt"):  # stopped by Ctrl-C
            status.interrupted.append(r)
        else:
            status.failed.append(r)
    return status
