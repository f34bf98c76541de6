"""The other points of this job's multirun, for kinds that can do their work alongside this job's
(``RunConfig.sweep_others``; the decoding judge methods decode their λ / t siblings in one tree).

Only under Hydra's basic launcher, which runs the jobs one after another in this process: a
launcher that runs them in parallel (SLURM arrays) gets nothing, so no job does another's work."""

from __future__ import annotations

from pathlib import Path


def sweep_others(hc) -> tuple[dict[str, str], ...]:
    """For each other job of the multirun ``hc`` (``HydraConfig.get()``) belongs to, the overrides in
    which it differs from this job ({key: value as written}); () for a single run, another
    launcher, or a sweep whose jobs cannot be listed (``metaeval.runs.expected_jobs``)."""
    from hydra.types import RunMode

    from cscore.metaeval.runs import expected_jobs, sweep_axes

    if hc.mode != RunMode.MULTIRUN or not str(hc.launcher.get("_target_", "")).endswith(".BasicLauncher"):
        return ()
    jobs = expected_jobs(Path(hc.sweep.dir))
    own = sweep_axes(list(hc.overrides.task))
    if not jobs or own is None:
        return ()
    mine = {k: v[0][1] for k, v in own.items()}
    if mine not in jobs:  # written otherwise than Hydra's job list: share nothing
        return ()
    return tuple({k: v for k, v in job.items() if v != mine[k]} for job in jobs
                 if job != mine and set(job) == set(mine))
