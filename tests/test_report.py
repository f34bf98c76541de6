"""`cscore report` on a real (tiny-model) sweep: tables, values, plots, missing runs."""

import shutil
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

from cscore.metaeval.runs import expected_jobs, find_runs, missing_jobs


def cscore(*args, cwd):
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def sweep(tiny_dirs, tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    res = cscore("run", "-m", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                 "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false",
                 "method.gamma=0.1,0.4", f"hydra.sweep.dir={root}/sw", cwd=root)
    assert res.returncode == 0, res.stderr
    return root / "sw"


def test_report_tables_match_independent_correlations(sweep, tmp_path):
    out = tmp_path / "rep"
    res = cscore("report", str(sweep), "--bootstrap", "50", "--permutations", "50", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name in ("report.md", "demo_all_quality.md", "demo_all_quality.csv", "demo_all_quality.tex",
                 "demo_all_bias.md", "speed.csv", "plots/demo_all_corr_vs_gamma.png",
                 "plots/demo_all_distributions.png", "plots/demo_all_speed_vs_quality.png"):
        assert (out / name).is_file(), name
    long = pd.read_csv(out / "demo_all_quality_long.csv")
    # rows: the shared comparison rows once, the contrast row once per gamma
    assert set(long["label"]) == {"tiny expert", "tiny amateur", "tiny ensemble", "tiny contrast gamma=0.1",
                                  "tiny contrast gamma=0.4"}
    run = next(r for r in find_runs(sweep) if r.config["method"]["gamma"] == 0.4)
    scores = run.scores()
    want = stats.pearsonr(scores["score.contrast"], scores["human.overall"])[0]
    got = long.query("label == 'tiny contrast gamma=0.4' and target == 'overall'")
    assert got["value"].item() == pytest.approx(want)
    assert got["low"].item() <= want <= got["high"].item()
    per_target = long[(long["label"] == "tiny expert") & (long["target"] != "AVG")]["value"].mean()
    assert long.query("label == 'tiny expert' and target == 'AVG'")["value"].item() == pytest.approx(per_target)
    assert long["rank"].min() == 1
    md = (out / "demo_all_quality.md").read_text()
    assert "level=segment" in md and "bootstrap=50" in md and "seed=0" in md and "cscore 0.1.0" in md
    assert "\\begin{tabular}" in (out / "demo_all_quality.tex").read_text()


def test_report_names_missing_and_incomplete_runs(sweep, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(sweep, partial)
    shutil.rmtree(partial / "1")  # job 1 never started
    assert [j["method.gamma"] for j in expected_jobs(partial)] == ["0.1", "0.4"]
    runs = find_runs(partial)
    assert missing_jobs(partial, runs) == ["job 1 (method.gamma=0.4)"]
    res = cscore("report", str(partial), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "missing: job 1 (method.gamma=0.4)" in res.stdout
    assert "1 not started" in (partial / "report" / "report.md").read_text()


def test_report_on_an_empty_folder_is_a_clear_error(tmp_path):
    res = cscore("report", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 1 and "no cscore run directories" in res.stderr
