"""The judge kinds sharded end to end (runtime.shards, runtime.devices; scorers/judge/partials.py):
the run directory of a sharded cd_judge / cd_judge_released run equals the unsharded one's bit for
bit, as array tasks one after another in this process (2 and 3 shards) and with a CPU worker
process (slow tier). The passes themselves (bit-identical first-step pass and decodes, a damaged
partial, a resumed shard, a sibling that comes or not) are tests/unit/scorers/store/test_shards_judge.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cscore import rundir
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.cli import assert_same_scores

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- end to end: the run directory of a sharded judge run equals the unsharded one's ---------------

def judge_args(judge_dirs, rows, out: Path, cache: Path, *more: str) -> list[str]:
    return ["run", f"data.path={rows}", f"pair.expert.path={judge_dirs['expert']}",
            f"pair.amateur.path={judge_dirs['amateur']}", "pair.amateur.early_exit=null", "pair.name=tiny",
            "runtime.progress=false", "runtime.threads=1", "runtime.dtype=float32", "runtime.token_budget=128",
            "method.max_new_tokens=4", f"hydra.run.dir={out}", f"cache.dir={cache}", *more]


SCORED = (rundir.SCORE, rundir.OUTPUT, rundir.PARSE)  # the columns compared bit for bit


@pytest.fixture(scope="module")
def rows(demo_rows):
    return demo_rows(3)


@pytest.mark.parametrize("method", [["method=cd_judge", "method.decode=greedy"], ["method=cd_judge_released"],
                                    pytest.param(["method=cd_judge", "method.decode=first_token"],
                                                 marks=pytest.mark.slow),
                                    pytest.param(["method=cd_judge", "method.decode=values"], marks=pytest.mark.slow)])
def test_array_tasks_one_shard_each_equal_the_unsharded_run(judge_dirs, rows, tmp_path, cscore_main, method, request):
    """runtime.shards=N runtime.shard=K, one after another (a job array whose tasks run apart): every
    task but the last ends pending; the last merges and writes the run directory (2 and 3 shards).
    cd_judge_released reads the paper's released prompt from the shared data folder (skips without it)."""
    if "method=cd_judge_released" in method:
        request.getfixturevalue("shared")
    one = cscore_main(*judge_args(judge_dirs, rows, tmp_path / "one", tmp_path / "c1", *method), cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    for count in (2, 3):
        out, cache = tmp_path / f"many{count}", tmp_path / f"c{count}"
        for k in range(count):
            res = cscore_main(*judge_args(judge_dirs, rows, out, cache, *method, f"runtime.shards={count}",
                                          f"runtime.shard={k}"), cwd=tmp_path)
            assert res.returncode == 0, res.stderr[-2000:]
            assert (out / rundir.METRICS).exists() == (k == count - 1)
        assert_same_scores(tmp_path / "one", out, SCORED, more_than=4)
        assert StatsCache(cache).keys() == StatsCache(tmp_path / "c1").keys()
        assert not list(cache.glob(".partial/*/*"))
        speed = json.loads((out / rundir.METRICS).read_text())["speed"]
        assert speed["shards"] == count and speed["merge_seconds"] >= 0
        decodes = [rep for name, rep in speed["passes"].items() if name.startswith("decode")]
        assert all(rep["shards"] == count and len(rep["shard_seconds"]) == count for rep in decodes)


@pytest.mark.slow
def test_cpu_workers_equal_the_unsharded_run(judge_dirs, rows, tmp_path, cscore_cli, cscore_main):
    """One worker process (the decode pass's relay and merge); the other decodes and shard counts:
    the array tasks above. The unsharded reference runs in this process."""
    method, count = ["method=cd_judge", "method.decode=greedy"], 2
    one = cscore_main(*judge_args(judge_dirs, rows, tmp_path / "one", tmp_path / "c1", *method), cwd=tmp_path)
    assert one.returncode == 0, one.stderr[-2000:]
    devices = ",".join(["cpu"] * count)
    many = cscore_cli(*judge_args(judge_dirs, rows, tmp_path / "many", tmp_path / "cN", *method,
                                  f"runtime.devices=[{devices}]"), cwd=tmp_path)
    assert many.returncode == 0, many.stderr[-3000:]
    assert "shard 1: " in many.stdout + many.stderr  # a worker's lines, relayed
    assert_same_scores(tmp_path / "one", tmp_path / "many", SCORED, more_than=4)
    assert StatsCache(tmp_path / "cN").keys() == StatsCache(tmp_path / "c1").keys()
    assert not list((tmp_path / "cN").glob(".partial/*/*"))
    speed = json.loads((tmp_path / "many" / rundir.METRICS).read_text())["speed"]
    assert speed["shards"] == count
    decodes = [rep for name, rep in speed["passes"].items() if name.startswith("decode")]
    assert decodes and all(rep["shards"] == count for rep in decodes)
