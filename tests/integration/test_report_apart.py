"""What `cscore report`, the speed rows and `cscore cache ls / info` tell a researcher (issue 39,
items 2, 7, 8): a cached sweep point's own time and no borrowed speed, a baseline run's own time and
no pair; reports of different statistics in their own folders, the statistic printed, one line
per dataset over many datasets, the cluster numbers explained, speed rows named by their sweep
point; cache entries listed in 80 columns with their data, method, payload, size and date."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from cscore.metaeval.resampling import bootstrap_ci
from cscore.metaeval.statistic import LevelStat
from cscore.run.tracking import speed_metrics

pytestmark = pytest.mark.slow


@pytest.fixture
def sweep(tiny_sweep, tmp_path):
    """A copy of the session's two-point sweep (method.gamma=0.1,0.4), without its reports."""
    copy = tmp_path / "sw"
    shutil.copytree(tiny_sweep.dir, copy, ignore=shutil.ignore_patterns("report*"))
    return copy


def metrics(run) -> dict:
    return json.loads((run / "metrics.json").read_text())


def test_a_cached_sweep_point_reports_its_own_time_and_no_speed(sweep, tmp_path, cscore_main):
    cached = metrics(sweep / "1")["speed"]  # gamma=0.4: the statistics of gamma=0.1's pass, from the cache
    assert all(p["from_cache"] for p in cached["passes"].values())
    assert cached["samples_per_second"] is None and cached["mfu"] is None
    assert cached["score_seconds"] == pytest.approx(cached["statistics_seconds_this_run"])
    # the per-pass figures stay the computing run's, and MLflow gets only what this run spent
    logged = speed_metrics(cached)
    assert "speed/samples_per_second" not in logged
    assert {k for k in logged if k.startswith("speed/passes/")} == {
        f"speed/passes/{name}/{key}" for name in cached["passes"]
        for key in ("from_cache", "seconds_this_run", "fetch_seconds")}
    res = cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    speed = pd.read_csv(sweep / "report" / "speed.csv").set_index("run")
    assert list(speed.index) == ["method.gamma=0.1", "method.gamma=0.4"]  # the sweep point, not "0" / "1"
    row = speed.loc["method.gamma=0.4"]
    assert bool(row["from_cache"]) and np.isnan(row["samples_per_second"]) and np.isnan(row["tokens_per_second"])
    assert row["score_seconds"] == pytest.approx(round(cached["score_seconds"], 3))
    assert "| method.gamma=0.4 |" in (sweep / "report" / "speed.md").read_text()


def test_the_console_prints_the_speed_tables_samples_per_second(tiny_sweep, sweep, tmp_path, cscore_main):
    """One samples/s (issue 47, item 3): the console's figure of the computed sweep point is its
    metrics.json's and the speed table's; the cached point has none; the table's run names are short."""
    from cscore.progress import rate_text

    said = re.findall(r"^speed: (\d+) items scored in ([\d.]+)s, ([\d.]+) samples/s$", tiny_sweep.stdout, re.M)
    computed = metrics(sweep / "0")["speed"]
    assert said == [(str(computed["items_scored"]), f"{computed['score_seconds']:.1f}",
                     rate_text(computed["samples_per_second"]))]
    res = cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(sweep / "report" / "speed.csv").set_index("run")
    assert table.loc["method.gamma=0.1", "samples_per_second"] == pytest.approx(computed["samples_per_second"],
                                                                                abs=5e-4)  # as rounded there
    assert computed["items_scored"] == metrics(sweep / "0")["n_items"]  # nothing kept from before
    assert max(len(name) for name in table.index) <= len("method.gamma=0.1")


def test_a_baseline_run_reports_its_own_time_and_no_pair(tmp_path, cscore_main):
    run = tmp_path / "bl"
    res = cscore_main("run", "method=baseline", "baseline=[bleu,chrf]", "runtime.progress=false",
                      f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    m = metrics(run)
    own = m["baselines"]["bleu"]["seconds"] + m["baselines"]["chrf"]["seconds"]
    assert own > 0 and m["speed"]["score_seconds"] == pytest.approx(own)
    assert m["speed"]["samples_per_second"] == pytest.approx(m["n_items"] / own)
    res = cscore_main("report", str(run), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    speed = pd.read_csv(run / "report" / "speed.csv")
    assert speed["pair"].tolist() == ["none"] and speed["score_seconds"].item() == pytest.approx(own, abs=1e-3)


def test_reports_of_other_statistics_go_to_their_own_folders_and_say_so(sweep, tmp_path, cscore_main):
    plain = cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "20", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    out = sweep / "report"
    assert f"report written in {out} (report.md and the tables)" in plain.stdout
    md = (out / "report.md").read_text()
    assert "(k) = significance cluster per column, 1 = best" in md and "20 permutations" in md
    cdm = cscore_main("report", str(sweep), "--paper", "cdm", "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert cdm.returncode == 0, cdm.stderr
    assert "statistic: --paper cdm: CDM Tables 2 and 7: Spearman" in cdm.stdout
    assert f"report written in {sweep / 'report-cdm'}" in cdm.stdout
    assert "correlation:spearman" in (sweep / "report-cdm" / "demo_quality.md").read_text()
    assert "correlation:pearson" in (out / "demo_quality.md").read_text()  # the first report is still there
    assert "significance cluster" not in (sweep / "report-cdm" / "report.md").read_text()  # no permutations
    cs = cscore_main("report", str(sweep), "--paper", "contrastscore", "--bootstrap", "0", "--permutations", "0",
                     cwd=tmp_path)
    assert cs.returncode == 0, cs.stderr
    assert re.search(r"the only \S+ dataset here: no all_\S+_quality table", cs.stdout)
    assert "give cscore report the runs of every dataset" in (sweep / "report-contrastscore" / "report.md").read_text()
    again = cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert f"report replaced in {out}" in again.stdout


def test_a_report_over_many_datasets_prints_one_line_each(sweep, tmp_path, cscore_main):
    many = tmp_path / "many"
    for k in range(5):
        shutil.copytree(sweep / "0", many / f"d{k}")
        config = many / f"d{k}" / "config.yaml"
        cfg = yaml.safe_load(config.read_text())
        cfg["data"]["name"] = f"demo{k}"
        config.write_text(yaml.safe_dump(cfg))
    for k in range(12):  # runs that never finished (a config.yaml only): ten named, the rest counted
        (many / f"x{k}").mkdir()
        cfg["data"]["name"] = f"ghost{k}"
        (many / f"x{k}" / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = cscore_main("report", str(many), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert f"5 datasets: one line each here, their tables in {many / 'report'}" in lines
    assert sum(x.startswith("incomplete: ") for x in lines) == 10
    named = [x.removeprefix("incomplete: ") for x in lines if x.startswith("incomplete: ")]
    assert all((many / name).is_dir() and name.startswith(str(many)) for name in named)  # a path is never broken
    assert "... and 2 more runs not complete (report.md lists them)" in lines
    assert (many / "report" / "report.md").read_text().count("- incomplete: ") == 12
    for k in range(5):
        line = next(x for x in lines if x.startswith(f"demo{k}: "))
        assert re.fullmatch(rf"demo{k}: \d+ rows; best .+ \(AVG -?\d\.\d{{3}}\); table in demo{k}_quality\.md", line)
        assert (many / "report" / f"demo{k}_quality.md").is_file()
    assert len(lines) < 30 and "correlation with human judgements" not in res.stdout  # no table printed


def test_a_bootstrap_over_one_unit_gives_no_interval():
    frame = pd.DataFrame({"group": ["d"] * 6, "m": [1.0, 2, 3, 4, 6, 5], "h": [1.0, 2, 3, 4, 5, 6]})
    stat = LevelStat("h", "segment", "pearson")
    one = bootstrap_ci(frame, stat, "m", resample="group", n=50)
    assert one.point == pytest.approx(np.corrcoef(frame["m"], frame["h"])[0, 1])
    assert np.isnan(one.low) and np.isnan(one.high) and one.n_units == 1
    rows = bootstrap_ci(frame, stat, "m", resample=None, n=50)  # six rows to draw: an interval
    assert rows.low <= rows.point <= rows.high


def fits(line: str) -> bool:
    """At most 80 characters, or one word alone on its line (a path longer than the line)."""
    return len(line) <= 80 or len(line.split()) == 1


def test_cache_ls_and_info_fit_80_columns_and_say_what_an_entry_holds(tiny_dirs, tmp_path, cscore_main):
    cache = tmp_path / "stats"
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                      "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false",
                      f"cache.dir={cache}", f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    metas = [json.loads(p.read_text()) for p in sorted(cache.glob("*/meta.json"))]
    assert metas and all(m["about"] == {"data": "demo", "split": "all", "method": "contrast"} for m in metas)
    listing = cscore_main("cache", "ls", "--root", str(cache), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert all(map(fits, lines)), [x for x in lines if not fits(x)]
    for m in metas:
        head = next(x for x in lines if x.startswith(m["key"][:12] + "  "))
        assert re.fullmatch(rf"{m['key'][:12]}  \d{{4}}-\d\d-\d\d \d\d:\d\d  [\d.]+ (B|KiB|MiB)  token statistics",
                            head)
        at = lines.index(head)
        block = " ".join(lines[at:at + 5])
        assert "data demo, method contrast" in block
        assert f"{m['n_items']} items, {m['n_tokens']:,} tokens, temperatures" in block
        assert all(label in block for label in m["extra"]["models"])
    assert f"{len(metas)} entries, " in listing.stdout
    info = cscore_main("cache", "info", metas[0]["key"][:8], "--root", str(cache), cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    text = info.stdout
    assert "       holds  token statistics" in text and "computed for  data demo, method contrast" in text
    assert all(map(fits, text.splitlines()))
