"""One run directory per sweep point of a sharded multirun (cli/workers.py ``sweep_point``,
``one_run_directory``), on Hydra's basic launcher, which runs the jobs one after another in the
order a SLURM array may end them: of a point's shard jobs, the first that has the merged
statistics writes the run directory; the others remove their empty ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cscore import rundir


def cscore(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)


def gamma_of(run: Path) -> str:
    return next(x.split(":", 1)[1].strip() for x in (run / rundir.CONFIG).read_text().splitlines()
                if x.strip().startswith("gamma:"))


@pytest.mark.slow
def test_every_point_of_a_sharded_sweep_gets_one_run_directory(tiny_dirs, demo_rows, tmp_path):
    """`runtime.shard` first: the jobs run shard 0 of both points, then shard 1, then shard 2. The
    first point's shard 2 merges the pass; the second point's shards 0 and 1 had ended before
    that, so its shard 2 (which reads the merged entry) writes its run directory."""
    base = ["run", "-m", "runtime.shard=0,1,2", f"pair.expert.path={tiny_dirs.expert}",
            f"pair.amateur.path={tiny_dirs.amateur}", "pair.amateur.early_exit=null", "pair.name=tiny",
            "runtime.progress=false", "runtime.threads=1", "runtime.token_budget=256", "runtime.shards=3",
            "data=demo", f"data.path={demo_rows(8)}", f"cache.dir={tmp_path / 'cache'}"]
    done = cscore([*base, "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path / 'sweep'}"], tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert said.count("not done yet; the run is incomplete") == 4, said[-3000:]  # shards 0 and 1 of each point
    runs = sorted(p.parent for p in (tmp_path / "sweep").glob(f"*/{rundir.METRICS}"))
    assert sorted(gamma_of(r) for r in runs) == ["0.1", "0.5"]
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if not p.name.startswith(".")) == [
        r.name for r in runs]  # the jobs that wrote nothing removed their directories
    from_cache = {gamma_of(r): json.loads((r / rundir.METRICS).read_text())["speed"]["from_cache"] for r in runs}
    assert from_cache == {"0.1": False, "0.5": True}  # the first point's job merged, the second read it
    # the same sweep again, every job with the entry: one job per point writes
    again = cscore([*base, "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path / 'again'}"], tmp_path)
    said = again.stdout + again.stderr
    assert again.returncode == 0, said[-3000:]
    assert said.count("this sweep point's run directory is ") == 4, said[-3000:]
    twice = sorted(p.parent for p in (tmp_path / "again").glob(f"*/{rundir.METRICS}"))
    assert sorted(gamma_of(r) for r in twice) == ["0.1", "0.5"]
    for a, b in zip(sorted(runs, key=gamma_of), sorted(twice, key=gamma_of)):
        x, y = pd.read_parquet(a / rundir.SCORES), pd.read_parquet(b / rundir.SCORES)
        assert np.array_equal(x["score.contrast"].to_numpy(), y["score.contrast"].to_numpy())
