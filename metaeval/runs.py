"""Partly finished multiruns: the jobs a sweep was asked for (Hydra's own multirun.yaml, read with
Hydra's own override parser) and those without a complete run directory; each run's outcome
(``run_status``: complete, failed, interrupted, incomplete, or finished later by a run of the same
config). What a run directory holds, when it is complete and how to find them (``Run``,
``find_runs``): ``cscore.rundir``."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cscore.errors import ConfigError
from cscore.rundir import CONFIG, METRICS, Run


def expected_jobs(sweep_dir: Path) -> list[dict] | None:
    """The jobs a multirun was asked for, in Hydra's job order, from its multirun.yaml (None when
    unknown: no file, or a sweep Hydra's basic sweeper does not enumerate)."""
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
    """{key: [(key, value), ...]} as Hydra's basic sweeper splits ``overrides``: a later override
    of a key replaces its values in the key's first place (None: one that does not parse or is
    no list of values)."""
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
    """Job numbers (Hydra's subdir index) that never started: no run directory at all (a job that
    started and failed or stopped is counted by ``run_status``, not again here). The shard jobs
    of one sweep point (``runtime.shard``) leave one run directory between them: they are missing
    only when none of them left one."""
    jobs = expected_jobs(sweep_dir)
    if jobs is None:
        return []
    done = {r.path.relative_to(sweep_dir).parts[0] for r in runs if r.path != Path(sweep_dir)}
    swept = [k for k in (jobs[0] if jobs else {}) if len({j[k] for j in jobs}) > 1]
    points: dict[tuple, list[int]] = {}
    for num, overrides in enumerate(jobs):
        points.setdefault(tuple((k, v) for k, v in overrides.items() if k != SHARD_KEY), []).append(num)
    written = {point for point, nums in points.items() if any(str(n) in done for n in nums)}
    out = []
    for num, overrides in enumerate(jobs):
        if tuple((k, v) for k, v in overrides.items() if k != SHARD_KEY) not in written:
            out.append(f"job {num} ({' '.join(f'{k}={overrides[k]}' for k in swept)})")
    return out


def check_folder(root: Path) -> None:
    """A ConfigError unless ``root`` is a folder (``cscore report`` asks before it loads the report's modules)."""
    if not root.exists():
        raise ConfigError(f"{root} does not exist: cscore report reads a run directory, a multirun directory or "
                          "a folder holding runs")
    if not root.is_dir():
        raise ConfigError(f"{root} is a file: cscore report reads a run directory, a multirun directory or a "
                          "folder holding runs")


def runs_under(roots: list[Path]) -> tuple[list[Run], list[list[Run]], list[Path]]:
    """The run directories under the folders ``roots`` (``find_runs``): all of them, each once, in
    the order found; those under each root (for ``missing_jobs``); and the run directories found
    under more than one root (a folder given twice, or one inside another), which the first list
    holds once and the caller names."""
    from cscore.rundir import find_runs

    runs: list[Run] = []
    per_root: list[list[Run]] = []
    seen: set[Path] = set()
    repeated: list[Path] = []
    for root in roots:
        found = find_runs(root)
        per_root.append(found)
        for run in found:
            key = run.path.resolve()
            if key not in seen:
                seen.add(key)
                runs.append(run)
            elif key not in repeated:
                repeated.append(key)
    return runs, per_root, repeated


def interrupted(run: Run) -> bool:
    """A run stopped by Ctrl-C (its failed.json names a KeyboardInterrupt)."""
    return str((run.failure or {}).get("error", "")).startswith("KeyboardInterrupt")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("-inf")


@dataclass
class Status:
    """The runs under a report's folder by outcome. ``superseded``: a failed, interrupted or
    unfinished run whose very config finished later in another directory (``finished_by``), as
    when the same command was re-run in a new folder; counted apart, not as failed."""
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
    """Each run's outcome (``Status``). A run is superseded by a complete run with the same
    config.yaml whose metrics.json was written after the run started (its config.yaml)."""
    status = Status()
    done = [r for r in runs if r.complete]
    status.complete = done
    for r in runs:
        if r.complete:
            continue
        started = _mtime(r.path / CONFIG)
        later = [d for d in done if d.config == r.config and _mtime(d.path / METRICS) >= started]
        if later:
            status.superseded.append(r)
            status.finished_by[r.path] = max(later, key=lambda d: _mtime(d.path / METRICS)).path
        elif r.failure is None:
            status.incomplete.append(r)
        elif interrupted(r):
            status.interrupted.append(r)
        else:
            status.failed.append(r)
    return status
