"""`cscore run` end to end through Hydra, with tiny random models loaded by path.

A released preset's multirun goes through a subprocess (``cscore_cli``: a fresh process, its exit
status; every point is a fresh job that keeps nothing in memory; statistics pass between points
only through the on-disk cache). The default run the file's tests read (``contrast_run``), further
runs whose test compares what they write, and commands that stop before scoring run in this
process (``run_main`` / ``cscore_main``: no interpreter start-up and imports per run; its models
are let go after each call)."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from cscore import ModelPair
from cscore.data import load_examples
from cscore.data.prompts import build
from cscore.tests.support.cli import run_main, tiny_args


@pytest.fixture(scope="module")
def contrast_run(tiny_dirs, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r1"
    # Its own statistics cache: the tests read what a run that computes writes (its speed too).
    cache = tmp_path_factory.mktemp("contrast_run_cache")
    res = run_main("run", *tiny_args(tiny_dirs), f"hydra.run.dir={out}", f"cache.dir={cache}", cwd=out.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    return out, res


def test_run_directory_contents(contrast_run):
    out, res = contrast_run
    for name in ("config.yaml", "scores.parquet", "metrics.json", "correlations.md", "correlations.csv", "run.log"):
        assert (out / name).is_file(), name
    scores = pd.read_parquet(out / "scores.parquet")
    assert len(scores) == 160
    for col in ("id", "system", "group", "prompt", "hypothesis", "human.overall", "prompt_tokens",
                "hypothesis_tokens", "truncated", "score.expert", "score.amateur", "score.ensemble", "score.contrast"):
        assert col in scores.columns, col
    assert scores["prompt"].iloc[0].startswith("Write an accurate, relevant, and coherent summary")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_items"] == 160 and metrics["n_truncated"] == 0
    assert {c["metric"] for c in metrics["correlations"]} == {"expert", "amateur", "ensemble", "contrast"}
    assert metrics["speed"]["samples_per_second"] > 0
    assert "Pearson" in (out / "correlations.md").read_text()
    assert "contrast - pearson" in res.stdout


# The score columns of a default run and the method each comes from (baselines at T = 1).
COLUMNS = {"score.expert": ("single", {}), "score.amateur": ("single", {"model": "amateur"}),
           "score.ensemble": ("ensemble", {}), "score.contrast": ("contrast", {})}


@pytest.fixture(scope="module")
def api_stats(tiny_dirs):
    """The default run's items through the Python API (float32, in this process): the reference
    scores, and the statistics the float32 tolerances are computed from."""
    examples, _ = load_examples("demo")
    prompts, spans = build(examples)
    pair = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur)
    return prompts, pair.statistics(prompts, list(examples["hypothesis"]), source_spans=spans)


def test_run_scores_equal_the_python_api(contrast_run, api_stats, f32):
    out, _ = contrast_run
    scores = pd.read_parquet(out / "scores.parquet")
    prompts, st = api_stats
    assert list(scores["prompt"]) == prompts
    # float32 passes in two processes may differ in the last bits: equal within the float32
    # tolerance (conftest.f32_tol), which includes Eq. 5's amplification where p_exp ~ gamma p_ama
    for col, (method, params) in COLUMNS.items():
        f32.assert_close(scores[col], st.score(method, **params), st, method, **params)
    corr = pd.read_csv(out / "correlations.csv")
    from scipy.stats import pearsonr
    want = pearsonr(scores["score.contrast"], scores["human.overall"])[0]
    got = corr.query("metric == 'contrast' and target == 'overall' and correlation == 'pearson'")["value"].item()
    assert got == pytest.approx(want)


@pytest.mark.slow
def test_same_config_same_scores(contrast_run, tiny_dirs, api_stats, cscore_main, f32):
    out, _ = contrast_run
    again = out.parent / "r2"
    res = cscore_main("run", *tiny_args(tiny_dirs), f"hydra.run.dir={again}", "runtime.padding_side=left",
                     "runtime.token_budget=777", cwd=out.parent)
    assert res.returncode == 0, res.stderr
    a = pd.read_parquet(out / "scores.parquet")
    b = pd.read_parquet(again / "scores.parquet")
    # Another batch shape sums the float32 dot products in another order: equal within the float32
    # tolerance (conftest.f32_tol: scales with the tokens summed, and with Eq. 5's amplification
    # p/(p - gamma q) where p_exp ~ gamma p_ama; README "Numerics"). Exact invariance in float64
    # is tested in test_engine.py.
    _, st = api_stats
    for col, (method, params) in COLUMNS.items():
        f32.assert_close(b[col], a[col], st, method, **params)
    # The same config again reads the same statistics from the cache: bit-identical scores. Tested
    # where no extra run is needed: test_sweep_points_read_the_statistics_cache (a cached point
    # against a run without the cache) and test_cli_user.py::test_a_cache_hit_gives_the_same_scores.


@pytest.mark.slow
def test_single_method_uses_only_the_expert(tiny_dirs, tmp_path, cscore_main):
    res = cscore_main("run", *tiny_args(tiny_dirs), "method=single", "method.norm=mean",
                     f"hydra.run.dir={tmp_path}/s", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    scores = pd.read_parquet(tmp_path / "s" / "scores.parquet")
    assert [c for c in scores.columns if c.startswith("score.")] == ["score.expert"]


@pytest.mark.slow
def test_released_preset_and_multirun(tiny_dirs, tmp_path, cscore_main):
    res = cscore_main("run", "-m", *tiny_args(tiny_dirs), "method=contrast_released", "method.gamma=0.1,0.5",
                      f"hydra.sweep.dir={tmp_path}/sweep", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = sorted((tmp_path / "sweep").glob("*/scores.parquet"))
    assert len(runs) == 2
    a, b = (pd.read_parquet(r) for r in runs)
    # gamma does not touch the baselines: the same statistics, bit for bit
    np.testing.assert_array_equal(a["score.expert"].to_numpy(), b["score.expert"].to_numpy())
    assert not np.allclose(a["score.contrast_released"], b["score.contrast_released"])  # labelled as the preset
    cfg = (runs[1].parent / "config.yaml").read_text()
    assert "gamma: 0.5" in cfg and "clamp: -20.0" in cfg and "skip_first: true" in cfg
    # the signature tells this preset (and this gamma) from the paper's contrast
    from cscore.metaeval.signature import Signature

    sig = Signature.parse(json.loads((runs[1].parent / "metrics.json").read_text())["signature"]).fields
    assert sig["method"] == "contrast" and sig["variant"] == "contrast_released" and sig["params"] == (
        "gamma=0.5,t_exp=1.0,t_ama=1.0,floor=1e-10,clamp=-20.0,norm=sqrt,skip_first=true,weight=none,t_weight=1.0")


def test_bad_input_exits_nonzero_with_a_clear_message(tiny_dirs, tmp_path, cscore_main):
    res = cscore_main("run", *tiny_args(tiny_dirs), "data.path=/nonexistent/file.jsonl",
                      f"hydra.run.dir={tmp_path}/x", cwd=tmp_path)
    assert res.returncode != 0
    assert "cscore: error:" in res.stderr and "/nonexistent/file.jsonl" in res.stderr
    res = cscore_main("run", *tiny_args(tiny_dirs), "+method.beta=1", f"hydra.run.dir={tmp_path}/y", cwd=tmp_path)
    assert res.returncode == 2 and "has no parameter method.beta" in res.stderr


def test_cross_family_pair_refuses_a_method_without_units_before_scoring(tiny_dirs, tmp_path, cscore_main):
    """Different tokenizers: the methods on aligned units run (tests/unit/scorers/engine/test_align.py); any other
    method is refused by the precheck (exit 2) with one line, before any weights load
    (tests/unit/scorers/engine/test_cross_family.py: cd_judge)."""
    res = cscore_main("run", *tiny_args(tiny_dirs), f"pair.amateur.path={tiny_dirs.other}", "method=cdm_classifier",
                      f"hydra.run.dir={tmp_path}/v", cwd=tmp_path)
    assert res.returncode == 2 and "needs expert and amateur to share a tokenizer" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "v").exists()


def test_help_and_unknown_command(tmp_path, cscore_main):
    res = cscore_main("--help", cwd=tmp_path)
    assert res.returncode == 0 and "cscore run" in res.stdout
    assert cscore_main("frobnicate", cwd=tmp_path).returncode == 2


@pytest.mark.slow
def test_rerun_of_a_sweep_skips_complete_runs_and_redoes_incomplete_ones(tiny_sweep, tmp_path, cscore_main):
    # a finished two-point sweep (conftest: the `cscore run -m` of tiny_sweep.args succeeded), copied
    # because it is shared; re-run the same command on the copy
    sweep = tmp_path / "sw"
    shutil.copytree(tiny_sweep.dir, sweep)
    args = [*tiny_sweep.args, f"hydra.sweep.dir={sweep}"]
    first, second = sorted(sweep.glob("*/scores.parquet"))
    stamp = first.stat().st_mtime_ns
    (second.parent / "metrics.json").unlink()  # as if that job had been killed before finishing
    res = cscore_main(*args, cwd=tmp_path)
    assert res.returncode == 0
    assert first.stat().st_mtime_ns == stamp  # complete: skipped
    assert (second.parent / "metrics.json").is_file()  # incomplete: redone
    assert "is complete" in res.stdout + res.stderr


@pytest.mark.slow
def test_sweep_points_read_the_statistics_cache(tiny_dirs, tmp_path, cscore_cli, cscore_main):
    cache = tmp_path / "stats"
    # One multirun, four jobs, the first override varying slowest: t_exp=0.5 (the default) with
    # gamma 0.2 then 0.6, and t_exp=0.7 with gamma 0.2 then 0.6. Each job loads the models afresh
    # and keeps nothing in memory: a later job gets statistics only from the on-disk cache.
    res = cscore_cli("run", "-m", *tiny_args(tiny_dirs), f"cache.dir={cache}", "method.t_exp=0.5,0.7",
                     "method.gamma=0.2,0.6", f"hydra.sweep.dir={tmp_path}/sw", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    g02, g06, t07 = (tmp_path / "sw" / str(job) for job in range(3))
    for run, t_exp, gamma in ((g02, 0.5, 0.2), (g06, 0.5, 0.6), (t07, 0.7, 0.2)):
        cfg = (run / "config.yaml").read_text()
        assert f"t_exp: {t_exp}" in cfg and f"gamma: {gamma}" in cfg, (run, cfg)
    first = json.loads((g02 / "metrics.json").read_text())["speed"]["passes"]
    second = json.loads((g06 / "metrics.json").read_text())["speed"]["passes"]
    assert not any(p["from_cache"] for p in first.values())
    assert all(p["from_cache"] for p in second.values())
    assert second["expert"]["score_seconds"] == first["expert"]["score_seconds"]  # the computing run's time
    # a cached sweep point gives bit-for-bit the scores of a direct run without the cache
    res = cscore_main("run", *tiny_args(tiny_dirs), "cache.enabled=false", "method.gamma=0.6",
                     f"hydra.run.dir={tmp_path}/direct", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(g06 / "scores.parquet"),
                                  pd.read_parquet(tmp_path / "direct" / "scores.parquet"), check_exact=True)
    # a forward-pass parameter (a temperature not in the cached set) recomputes
    passes = json.loads((t07 / "metrics.json").read_text())["speed"]["passes"]
    assert not any(p["from_cache"] for p in passes.values())
    listing = cscore_main("cache", "ls", "--root", str(cache), cwd=tmp_path)
    assert listing.returncode == 0 and listing.stdout.count("tiny") + listing.stdout.count("expert") >= 2
