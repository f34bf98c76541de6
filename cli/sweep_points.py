"""The other points of this job's multirun (``RunConfig.sweep_others``), for kinds that do their work
alongside this job's; only under Hydra's basic launcher, which runs the jobs in this process."""

from __future__ import annotations

from pathlib import Path


def sweep_others(hc) -> tuple[dict[str, str], ...]:
    """For each other job of the multirun of ``hc`` (``HydraConfig.get()``), the overrides in which it
    differs from this job ({key: value as written}); () where there are none or they cannot be listed."""
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
