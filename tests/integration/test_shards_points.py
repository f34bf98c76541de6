"""Which shard job ends with the statistics and writes the run directory, in orders a SLURM job
array may run its tasks: the last shard job to end has every pass (one it did not merge itself is
read once its own passes are done), and of a sweep point's shard jobs the first with the merged
statistics writes the point's one run directory (run/launch.py ``sweep_point``,
``one_run_directory``), the others remove their empty ones. The sweeps run on Hydra's basic
launcher, one job after another; the real job array is tests/system/test_slurm.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cscore import rundir
from cscore.errors import ShardsPending
from cscore.metaeval.runs import missing_jobs
from cscore.rundir import find_runs
from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.runner import InProcess
from cscore.tests.support.texts import WORDS


def gamma_of(run: Path) -> str:
    return next(x.split(":", 1)[1].strip() for x in (run / rundir.CONFIG).read_text().splitlines()
                if x.strip().startswith("gamma:"))


def test_the_last_shard_job_to_end_has_every_pass(tiny_dirs, tmp_path, one_torch_thread):
    """Shard job 1 computes its part of the expert's pass (shard 0's is not there: the merge waits);
    while it computes its part of the amateur's, shard job 0 runs whole: it merges the expert's pass
    and ends waiting for the amateur's. Job 1, the last to end, merges the amateur's and reads the
    expert's entry: every pass, bit-identical to the unsharded pass."""
    rng = np.random.default_rng(3)
    prompts = [f"Summarize: {' '.join(rng.choice(WORDS, size=int(rng.integers(4, 16))))}" for _ in range(16)]
    hyps = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 9)))) for _ in range(16)]
    job0, job1 = [ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32") for _ in range(2)]
    inputs = job0.encode(prompts, hyps)
    settings = {"inputs": inputs, "temperatures": (1.0, 2.0), "token_budget": 160}
    cache = StatsCache(tmp_path / "cache", checkpoint_seconds=0)
    ended = []

    def job0_runs_meanwhile(name, n):
        if name == "amateur":
            with pytest.raises(ShardsPending) as err:
                job0.statistics(**settings, cache=cache, coordinator=InProcess(2, 0))
            ended.append(err.value)

    got = job1.statistics(**settings, cache=cache, coordinator=InProcess(2, 1), progress=job0_runs_meanwhile)
    assert len(ended) == 1 and ended[0].missing == [1], ended
    assert str(ended[0]).startswith("statistics (amateur): shard 1 of 2 not done yet")  # the expert's it merged
    assert {k: r.cached for k, r in got.reports.items()} == {"expert": True, "amateur": False}  # read; merged
    assert list(got.reports) == ["expert", "amateur"]  # in pass order, as an unsharded run's
    want = job0.statistics(**settings, cache=StatsCache(tmp_path / "one"))
    assert list(got.stats) == list(want.stats) == ["expert", "amateur"]
    for head in want.stats:
        for name in ("offsets", "token_ids", "logp", "logp_max"):
            assert np.array_equal(getattr(got.stats[head], name), getattr(want.stats[head], name)), (head, name)


@pytest.mark.slow
def test_every_point_of_a_sharded_sweep_gets_one_run_directory(tiny_dirs, demo_rows, tmp_path, cscore_main):
    """`runtime.shard` first: the jobs run shard 0 of both points, then shard 1, then shard 2. The
    first point's shard 2 merges the pass; the second point's shards 0 and 1 had ended before
    that, so its shard 2 (which reads the merged entry) writes its run directory."""
    base = ["run", "-m", "runtime.shard=0,1,2", f"pair.expert.path={tiny_dirs.expert}",
            f"pair.amateur.path={tiny_dirs.amateur}", "pair.amateur.early_exit=null", "pair.name=tiny",
            "runtime.progress=false", "runtime.threads=1", "runtime.token_budget=256", "runtime.shards=3",
            "data=demo", f"data.path={demo_rows(8)}", f"cache.dir={tmp_path / 'cache'}"]
    done = cscore_main(*base, "method.gamma=0.1,0.5", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert said.count("not done yet; the run is incomplete") == 4, said[-3000:]  # shards 0 and 1 of each point
    runs = sorted(p.parent for p in (tmp_path / "sweep").glob(f"*/{rundir.METRICS}"))
    assert sorted(gamma_of(r) for r in runs) == ["0.1", "0.5"]
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir() and not p.name.startswith(".")) == [
        r.name for r in runs]  # the jobs that wrote nothing removed their directories
    assert missing_jobs(tmp_path / "sweep", find_runs(tmp_path / "sweep")) == []  # every point has its directory
    from_cache = {gamma_of(r): json.loads((r / rundir.METRICS).read_text())["speed"]["from_cache"] for r in runs}
    assert from_cache == {"0.1": False, "0.5": True}  # the first point's job merged, the second read it
