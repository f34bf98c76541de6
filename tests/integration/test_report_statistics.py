"""The statistics `cscore report` reports per paper (issue 34 items 3-5, issue 30 item 7): pooled
Kendall-like (WMT20 seg-k), tie-calibrated acc23 (WMT23), the --paper presets, the all-datasets
table with ContrastScore Table 1's AVG, several folders in one report. Each value is checked
against a brute-force re-derivation of mt-metrics-eval's definition in plain Python."""

import itertools
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from cscore.errors import ConfigError
from cscore.metaeval import tables
from cscore.metaeval.kendall import acc_23
from cscore.metaeval.levels import Grouping, KendallOptions, correlate_at
from cscore.metaeval.pairwise import TieCalibratedStat
from cscore.metaeval.signature import Signature
from cscore.metaeval.statistic import LevelStat
from cscore.rundir import find_runs

MICRO, LIKE25 = Grouping(average="micro"), KendallOptions(thresh=25)

# item x system cells: (group, system, metric, human); g3 has one human tie and one metric tie
CELLS = [("g1", "A", 0.9, 80), ("g1", "B", 0.2, 30), ("g1", "C", 0.5, 70),
         ("g2", "A", 0.1, 90), ("g2", "B", 0.3, 40),
         ("g3", "A", 0.4, 50), ("g3", "B", 0.4, 20), ("g3", "C", 0.8, 50), ("g3", "D", 0.6, 10)]


def cells_frame(cells=CELLS) -> pd.DataFrame:
    return pd.DataFrame(cells, columns=["group", "system", "m", "h"])


def like_counts(cells, thresh):
    """WMT20 DARR by hand: pairs of one group whose human scores differ by >= thresh; concordant
    when the metric orders them strictly the same way, otherwise (metric tie too) discordant."""
    con = dis = 0
    for (g1, _, m1, h1), (g2, _, m2, h2) in itertools.combinations(cells, 2):
        if g1 != g2 or abs(h1 - h2) < thresh:
            continue
        if (h1 > h2 and m1 > m2) or (h1 < h2 and m1 < m2):
            con += 1
        else:
            dis += 1
    return con, dis


def test_pooled_kendall_like_is_wmt20_seg_k_over_all_segments_pairs():
    # g1: pairs (A,B) 50 con, (A,C) 10 < 25 skipped, (B,C) 40 con -> 2/0; g2: (A,B) 50 dis -> 0/1;
    # g3: (A,B) 30 metric tie -> dis, (A,C) human tie skipped, (A,D) 40 dis, (B,C) 30 con, (B,D) 10 skipped,
    # (C,D) 40 con -> 2/2. Pooled: (4 - 3) / 7; per-group mean: (1 - 1 + 0) / 3 = 0.
    con, dis = like_counts(CELLS, 25)
    assert (con, dis) == (4, 3)
    df = cells_frame()
    pooled = correlate_at(df, "m", "h", "item", "kendall", "like", MICRO, LIKE25)["value"]
    assert pooled == pytest.approx((con - dis) / (con + dis)) == pytest.approx(1 / 7)
    assert correlate_at(df, "m", "h", "item", "kendall", "like", options=LIKE25)["value"] == pytest.approx(0.0)
    assert LevelStat("h", "item", "kendall", "like", grouping=MICRO, options=LIKE25)(df, "m") == pytest.approx(1 / 7)
    spec = tables.Spec("item", "kendall", "like", 0, 0, threshold=25, average="micro")
    assert tables.statistic(spec, "h")(df, "m") == pytest.approx(1 / 7)
    assert spec.fields()["average"] == "micro" and "average" not in tables.Spec().fields()


def test_pooled_kendall_like_on_random_tables_matches_the_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(5):
        cells = [(f"g{g}", f"s{s}", float(rng.integers(0, 4)), float(rng.integers(0, 100)))
                 for g in range(6) for s in range(rng.integers(2, 6))]
        con, dis = like_counts(cells, 25)
        got = correlate_at(cells_frame(cells), "m", "h", "item", "kendall", "like", MICRO)["value"]
        assert got == pytest.approx((con - dis) / (con + dis))


def acc23_calibrated(cells, key):
    """mt-metrics-eval's KendallWithTiesOpt('acc23', sample_rate=1) by brute force: for every candidate
    epsilon (0 and every |metric difference| of a pair), the mean over groups of (pairs both order alike
    or both tie) / pairs, metric tie = |difference| <= epsilon; the best value, at the smallest epsilon."""
    groups = {}
    for cell in cells:
        groups.setdefault(key(cell), []).append(cell)
    pairs = {g: list(itertools.combinations(c, 2)) for g, c in groups.items() if len(c) > 1}
    candidates = sorted({0.0} | {abs(a[2] - b[2]) for ps in pairs.values() for a, b in ps})
    best = (-1.0, None)
    for eps in candidates:
        accs = []
        for ps in pairs.values():
            right = 0
            for a, b in ps:
                dm, dh = a[2] - b[2], a[3] - b[3]
                tie_m, tie_h = abs(dm) <= eps, dh == 0
                right += (tie_m and tie_h) or (not tie_m and not tie_h and (dm > 0) == (dh > 0))
            accs.append(right / len(ps))
        value = sum(accs) / len(accs)
        if value > best[0] + 1e-12:
            best = (value, eps)
    return best


@pytest.mark.parametrize("level, key", [("item", lambda c: c[0]), ("system_grouped", lambda c: c[1]),
                                        ("segment", lambda c: 0)])
def test_tie_calibrated_acc23_is_the_best_epsilons_value(level, key):
    stat = TieCalibratedStat("h", level)
    value, eps = acc23_calibrated(CELLS, key)
    got = stat.calibration(cells_frame(), "m")
    assert got.value == pytest.approx(value) and got.epsilon == pytest.approx(eps)


def test_tie_calibrated_acc23_on_random_tables_and_at_the_system_level():
    rng = np.random.default_rng(5)
    for level, key in [("item", lambda c: c[0]), ("segment", lambda c: 0)]:
        cells = [(f"g{g}", f"s{s}", float(rng.integers(0, 5)) / 4, float(rng.integers(1, 4)))
                 for g in range(5) for s in range(4)]
        assert TieCalibratedStat("h", level)(cells_frame(cells), "m") == pytest.approx(
            acc23_calibrated(cells, key)[0])
    # system level: the systems' mean scores, all pairs of systems
    df = cells_frame()
    means = df.groupby("system")[["m", "h"]].mean()
    sys_cells = [(0, s, r.m, r.h) for s, r in means.iterrows()]
    assert TieCalibratedStat("h", "system")(df, "m") == pytest.approx(acc23_calibrated(sys_cells, lambda c: 0)[0])


def test_acc23_in_the_quality_tables_is_calibrated_unless_ties_exact():
    # g4: A and B tied by the humans, 0.01 apart by the metric: epsilon 0.01 gets that pair right
    cells = CELLS + [("g4", "A", 0.50, 60), ("g4", "B", 0.51, 60), ("g4", "C", 0.9, 20)]
    df = cells_frame(cells).rename(columns={"m": "score.m", "h": "human.h"})
    ds = tables.Dataset("key", df, ["human.h"], None, {"m": {"run": None, "variant": "m", "params": {}, "main": True}})
    spec = tables.Spec("item", "kendall", "acc23", bootstrap=0, permutations=0)
    assert spec.calibrated and spec.fields()["ties"] == "calibrated"
    long = tables.quality(ds, spec).set_index("target")
    value, eps = acc23_calibrated(cells, lambda c: c[0])
    assert eps == pytest.approx(0.01)
    assert long.loc["h", "value"] == pytest.approx(value) and long.loc["h", "epsilon"] == pytest.approx(eps)
    exact = tables.Spec("item", "kendall", "acc23", bootstrap=0, permutations=0, ties="exact")
    assert not exact.calibrated and exact.fields()["ties"] == "exact"
    per_item = [acc_23(g["m"], g["h"]) for _, g in cells_frame(cells).groupby("group")]
    assert tables.quality(ds, exact).set_index("target").loc["h", "value"] == pytest.approx(np.mean(per_item))
    assert value > np.mean(per_item)  # the calibration finds a better threshold than 0 here
    # tau23 keeps epsilon 0 unless asked (its earlier output); calibrated on request
    assert not tables.Spec(kind="kendall", variant="23").calibrated
    assert tables.Spec(kind="kendall", variant="23", ties="calibrated").calibrated
    assert "ties" not in tables.Spec(kind="kendall", variant="23").fields()


@pytest.mark.parametrize("kwargs, message", [
    ({"average": "micro"}, "--average micro applies to --level item or system_grouped"),
    ({"average": "pooled", "level": "item"}, "--average must be one of macro, micro"),
    ({"ties": "calibrated"}, "--ties applies to --kendall acc23 or 23 only"),
    ({"ties": "loose", "kind": "kendall", "variant": "acc23"}, "--ties must be one of calibrated, exact"),
])
def test_bad_average_or_ties_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        tables.Spec(**kwargs)


def test_the_combined_table_averages_every_column_of_every_dataset():
    # ContrastScore Table 1, ROUGE-1: QAGS-XSum 0.055, SummEval 0.238 0.079 0.071 0.330 -> AVG 0.1546
    qags = pd.DataFrame({"label": ["rouge1", "rouge1"], "target": ["fact", "AVG"], "value": [0.055, 0.055]})
    summ = pd.DataFrame({"label": ["rouge1"] * 5 + ["only_here"] * 5,
                         "target": ["coherence", "consistency", "fluency", "relevance", "AVG"] * 2,
                         "value": [0.238, 0.079, 0.071, 0.330, 0.1795, 0.1, 0.2, 0.3, 0.4, 0.25]})
    long = tables.combined([("qags_xsum", qags), ("summeval", summ)]).set_index(["label", "target"])["value"]
    assert long[("rouge1", "AVG")] == pytest.approx((0.055 + 0.238 + 0.079 + 0.071 + 0.330) / 5)
    assert long[("rouge1", "summeval:fluency")] == 0.071 and np.isnan(long[("only_here", "AVG")])
    assert list(long.loc["rouge1"].index) == ["qags_xsum:fact", "summeval:coherence", "summeval:consistency",
                                              "summeval:fluency", "summeval:relevance", "AVG"]


@pytest.fixture
def preset_spec(monkeypatch, tmp_path):
    """spec(*argv): the Spec that ``cscore report <dir> *argv`` hands to ``report`` (no run read;
    report_cmd imports ``report`` once the folder is known to be there)."""
    from cscore.cli import report_cmd
    from cscore.metaeval import assemble

    seen = {}
    monkeypatch.setattr(assemble, "report", lambda path, spec, *args, **kwargs: seen.update(spec=spec))

    def spec(*argv) -> tables.Spec:
        report_cmd.main([str(tmp_path), *argv])
        return seen["spec"]

    return spec


def test_a_paper_preset_fills_in_what_the_command_line_leaves_out(preset_spec):
    t5 = preset_spec("--paper", "t5score")
    assert (t5.level, t5.kind, t5.variant, t5.average, t5.like_threshold) == ("item", "kendall", "like", "micro", 25)
    assert preset_spec("--paper", "t5score", "--kendall-threshold", "1").like_threshold == 1
    system = preset_spec("--paper", "t5score", "--level", "system")  # no pooling there: the plain mean
    assert (system.level, system.variant, system.average) == ("system", "like", "macro")
    pearson = preset_spec("--paper", "t5score", "--correlation", "pearson")  # the correlation as a whole
    assert (pearson.kind, pearson.variant, pearson.level, pearson.average) == ("pearson", None, "item", "macro")
    cdm = preset_spec("--paper", "cdm")
    assert (cdm.kind, cdm.level, cdm.resample) == ("spearman", "segment", "groups")
    judge = preset_spec("--paper", "cdjudge")
    assert (judge.kind, judge.resample) == ("spearman", "items")
    assert preset_spec("--paper", "cdjudge", "--resample", "groups").resample == "groups"
    default = preset_spec()
    assert (default.kind, default.level, default.resample, default.average) == ("pearson", "segment", "groups",
                                                                                "macro")
    assert preset_spec("--paper", "contrastscore").fields() == default.fields()


def test_several_folders_without_a_common_folder_need_out(tmp_path):
    from cscore.metaeval.assemble import default_out

    assert default_out([tmp_path / "a"]) == tmp_path / "a" / "report"
    assert default_out([tmp_path / "x" / "a", tmp_path / "x" / "b" / "c"]) == (tmp_path / "x" / "report").resolve()
    with pytest.raises(ConfigError, match="give the report's folder with --out"):
        default_out([Path("/bin"), Path("/etc")])


# ---------------------------------------------------------------- the command, on a real tiny sweep

@pytest.fixture(scope="module")
def sweep(tiny_sweep):
    return tiny_sweep.dir


def signature(md_file) -> dict:
    return Signature.parse(md_file.read_text().split("\n")[2].strip("_").split(" — ")[0]).fields


def run_scores(sweep, gamma=0.4) -> pd.DataFrame:
    return next(r for r in find_runs(sweep) if r.config["method"]["gamma"] == gamma).scores()


def report_cells(sweep, out: Path, cscore_main, *options: str, human: str):
    """``cscore report`` of the sweep with ``options`` (no permutations) into ``out``: the gamma=0.4
    run's (group, system, score, ``human``) cells and the report's long table of the contrast row on
    ``human``."""
    res = cscore_main("report", str(sweep), *options, "--permutations", "0", "--out", str(out), cwd=out.parent)
    assert res.returncode == 0, res.stderr
    scores = run_scores(sweep)
    cells = list(zip(scores["group"], scores["system"], scores["score.contrast"], scores[f"human.{human}"]))
    long = pd.read_csv(out / "demo_quality_long.csv")
    return cells, long.query(f"label == 'tiny contrast gamma=0.4' and target == '{human}'")


def test_paper_cdm_reports_spearman_and_an_own_option_wins(sweep, tmp_path, cscore_main):
    out = tmp_path / "cdm"
    cells, got = report_cells(sweep, out, cscore_main, "--paper", "cdm", "--bootstrap", "0", human="overall")
    _, _, score, human = zip(*cells)
    assert got["value"].item() == pytest.approx(stats.spearmanr(score, human)[0])
    assert signature(out / "demo_quality.md")["correlation"] == "spearman"
    assert "statistic: --paper cdm: CDM Tables 2 and 7: Spearman" in (out / "report.md").read_text()
    out = tmp_path / "cdm_pearson"
    res = cscore_main("report", str(sweep), "--paper", "cdm", "--correlation", "pearson", "--bootstrap", "0",
                      "--permutations", "0", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0 and signature(out / "demo_quality.md")["correlation"] == "pearson"


def test_paper_t5score_reports_the_pooled_kendall_like(sweep, tmp_path, cscore_main):
    out = tmp_path / "t5"
    cells, got = report_cells(sweep, out, cscore_main, "--paper", "t5score", "--kendall-threshold", "1",
                              "--bootstrap", "20", human="overall")
    con, dis = like_counts(cells, 1)
    assert got["value"].item() == pytest.approx((con - dis) / (con + dis))
    assert got["low"].item() <= got["value"].item() <= got["high"].item()
    sig = signature(out / "demo_quality.md")
    assert (sig["level"], sig["kendall"], sig["average"], sig["threshold"]) == ("item", "like", "micro", "1")


def test_kendall_acc23_in_the_report_is_tie_calibrated(sweep, tmp_path, cscore_main):
    out = tmp_path / "acc"
    cells, got = report_cells(sweep, out, cscore_main, "--kendall", "acc23", "--level", "item", "--bootstrap", "20",
                              human="consistency")
    value, eps = acc23_calibrated(cells, lambda c: c[0])
    assert got["value"].item() == pytest.approx(value) and got["epsilon"].item() == pytest.approx(eps)
    assert got["low"].item() <= value <= got["high"].item()
    assert signature(out / "demo_quality.md")["ties"] == "calibrated"


def test_several_folders_make_one_report_over_all_their_runs(sweep, tmp_path, cscore_main):
    whole = tmp_path / "whole"
    assert cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "0", "--out", str(whole),
                       cwd=tmp_path).returncode == 0
    both = tmp_path / "both"
    res = cscore_main("report", str(sweep / "0"), str(sweep / "1"), "--bootstrap", "0", "--permutations", "0",
                      "--out", str(both), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pd.testing.assert_frame_equal(pd.read_csv(both / "demo_quality_long.csv"),
                                  pd.read_csv(whole / "demo_quality_long.csv"))
    assert "runs: 2 complete" in (both / "report.md").read_text()
    res = cscore_main("report", str(sweep), str(tmp_path / "nope"), cwd=tmp_path)
    assert res.returncode == 2 and "nope does not exist" in res.stderr


def test_a_run_under_two_of_the_folders_counts_once_and_the_report_goes_to_their_parent(sweep, tmp_path,
                                                                                         cscore_main):
    copy = tmp_path / "copy"
    shutil.copytree(sweep, copy / "sw", ignore=shutil.ignore_patterns("report"))
    again = tmp_path / "again"
    res = cscore_main("report", str(copy / "sw"), str(copy / "sw" / "1"), "--bootstrap", "0", "--permutations", "0",
                      "--out", str(again), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    md = (again / "report.md").read_text()
    assert "runs: 2 complete" in md and "1 run directories lie under more than one of the folders given" in md
    assert f"count once: {(copy / 'sw' / '1').resolve()}" in md and "count once" in res.stdout
    long = pd.read_csv(again / "demo_quality_long.csv")
    assert len(long) == 5 * 5  # the five rows of the two runs, each once; four aspects and AVG
    # without --out: report/ in the folder that holds them all
    res = cscore_main("report", str(copy / "sw" / "0"), str(copy / "sw" / "1"), "--bootstrap", "0",
                      "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0 and (copy / "sw" / "report" / "report.md").is_file()
    assert "# cscore report: " in (copy / "sw" / "report" / "report.md").read_text()


def test_paper_contrastscore_adds_the_all_datasets_table(sweep, tmp_path, cscore_main):
    """Two datasets (the sweep's run 0, and the same run as data `demo2`): each one's columns and AVG
    over all of them, as ContrastScore Table 1 averages QAGS-XSum and SummEval."""
    other = tmp_path / "other"
    shutil.copytree(sweep / "0", other / "0", ignore=shutil.ignore_patterns("report"))
    config = other / "0" / "config.yaml"
    cfg = yaml.safe_load(config.read_text())
    cfg["data"]["name"] = "demo2"
    config.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "cs"
    res = cscore_main("report", str(sweep), str(other), "--paper", "contrastscore", "--bootstrap", "0",
                      "--permutations", "0", "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    demo = pd.read_csv(out / "demo_quality_long.csv")
    demo2 = pd.read_csv(out / "demo2_quality_long.csv")
    table = pd.read_csv(out / "all_summarization_quality.csv", index_col="label")
    humans = ["consistency", "fluency", "relevance", "overall"]
    assert list(table.columns) == [f"{d}:{h}" for d in ("demo", "demo2") for h in humans] + ["AVG"]
    long = pd.read_csv(out / "all_summarization_quality_long.csv").set_index(["label", "target"])["value"]
    expert = [d.query("label == 'tiny expert' and target == @h")["value"].item() for d in (demo, demo2)
              for h in humans]
    assert long[("tiny expert", "AVG")] == pytest.approx(np.mean(expert))
    assert long[("tiny expert", "demo2:overall")] == pytest.approx(expert[-1])
    assert np.isnan(long[("tiny contrast gamma=0.1", "AVG")])  # demo2 has no row of that name
    assert "Files `all_summarization_*`" in (out / "report.md").read_text()
    sig = signature(out / "all_summarization_quality.md")
    assert sig["datasets"] == "demo,demo2" and sig["correlation"] == "pearson"


@pytest.mark.parametrize("level", ["segment", "item", "system_grouped", "system"])
@pytest.mark.parametrize("resample", ["group", None])
def test_batched_resamples_of_the_calibrated_statistic_equal_the_per_resample_loop(level, resample):
    """``TieCalibratedStat.batch`` (weighted pairs, one sort) against the same statistic evaluated on
    every resampled table (resampling.PerVersion for a plain function): same draws, same values."""
    from cscore.metaeval.resampling import bootstrap_ci, permutation_test

    rng = np.random.default_rng(11)
    df = pd.DataFrame([(f"g{g}", f"s{s}", float(rng.integers(0, 6)) / 5, float(rng.integers(0, 6)) / 5,
                        float(rng.integers(1, 4)), "x" if g % 3 else "y") for g in range(7) for s in range(4)],
                      columns=["group", "system", "a", "b", "h", "part"])
    df.loc[3, "a"] = np.nan  # a non-finite cell is left out
    for subset in (None, ("part", "x")):
        stat = TieCalibratedStat("h", level, subset=subset)

        def plain(frame, col, stat=stat):
            return stat(frame, col)

        got = bootstrap_ci(df, stat, "a", resample=resample, n=25, seed=4)
        want = bootstrap_ci(df, plain, "a", resample=resample, n=25, seed=4)
        np.testing.assert_allclose(got.samples, want.samples, rtol=0, atol=1e-12)
        got = permutation_test(df, stat, "a", "b", n=25, seed=2)
        want = permutation_test(df, plain, "a", "b", n=25, seed=2)
        assert got["p_value"] == want["p_value"] and got["delta"] == pytest.approx(want["delta"])


def test_a_calibrated_cell_with_too_many_pairs_is_a_clear_error(monkeypatch):
    """Tie calibration holds all pairs of a cell in memory: the count is that of the level's groups
    (CELLS: 36 pairs pooled, 3 + 1 + 6 within items), and a table above the limit is refused."""
    df = cells_frame().rename(columns={"m": "score.m", "h": "human.h"})
    assert TieCalibratedStat("human.h", "segment").pairs_needed(df, "score.m") == 36
    assert TieCalibratedStat("human.h", "item").pairs_needed(df, "score.m") == 10
    assert TieCalibratedStat("human.h", "system").pairs_needed(df, "score.m") == 6
    ds = tables.Dataset("key", df, ["human.h"], None, {"m": {"run": None, "variant": "m", "params": {}, "main": True}})
    monkeypatch.setattr(tables, "MAX_CALIBRATED_PAIRS", 20)
    tables.quality(ds, tables.Spec("item", "kendall", "acc23", bootstrap=0, permutations=0))
    with pytest.raises(ConfigError, match="searches all 36 pairs of column h at once, more than 20: use --level item"):
        tables.quality(ds, tables.Spec("segment", "kendall", "acc23", bootstrap=0, permutations=0))
