"""`cscore report` on a real (tiny-model) sweep: tables, values, plots, missing runs. The sweep
(conftest's ``tiny_sweep``) and `cscore report` (no models) run in this process."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from cscore import __version__
from cscore.metaeval import (  # plots selects the Agg backend before pyplot loads
    plots,
    render,
    report,
    report_plots,
    sections,
    side_tables,
    tables,
)
from cscore.metaeval.correlation import correlation_table
from cscore.metaeval.plots import plt
from cscore.metaeval.runs import expected_jobs, missing_jobs
from cscore.metaeval.signature import Signature
from cscore.rundir import Run, find_runs
from cscore.scorers.methods import with_defaults

TABLES = [f"demo_{t}.{ext}" for t in ("quality", "bias", "quantized_accuracy") for ext in ("md", "csv", "tex")]
REPORT_FILES = tuple(TABLES) + ("demo_quality_long.csv", "report.md", "speed.csv", "speed.md", "speed.tex",
                                "plots/demo_distributions.png")  # one pair: no speed_vs_quality.png


@pytest.fixture(scope="module")
def sweep(tiny_sweep):
    """The tiny pair's gamma=0.1,0.4 multirun (conftest; shared: the tests here only read it)."""
    return tiny_sweep.dir


def test_report_tables_match_independent_correlations(sweep, tmp_path, cscore_main):
    out = tmp_path / "rep"
    res = cscore_main("report", str(sweep), "--bootstrap", "50", "--permutations", "50", "--out", str(out),
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # the README's names: <data>_* (no split suffix for split.use=all)
    for name in REPORT_FILES + ("plots/demo_corr_vs_gamma.png",):
        assert (out / name).is_file(), name
    assert not [p for p in out.rglob("*") if "_all" in p.name]
    assert not (out / "demo_pairwise_accuracy.md").exists()  # translation data only
    long = pd.read_csv(out / "demo_quality_long.csv")
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
    md = (out / "demo_quality.md").read_text()
    caption = md.split("\n")[2].strip("_")
    sig = Signature.parse(caption.split(" — ")[0]).fields
    assert sig["level"] == "segment" and sig["bootstrap"] == "50" and sig["seed"] == "0"
    assert sig["resample"] == "groups" and "percentile bootstrap over documents / source segments" in caption
    assert sig["version"] == __version__ and list(sig)[-1] == "version"
    assert "\\begin{tabular}" in (out / "demo_quality.tex").read_text()
    bias = (out / "demo_bias.md").read_text()
    assert "closer to 0 is better" in bias and "lower is better" not in bias
    # progress on stderr: what was found, the quality steps, the one-pass speed plot
    assert "2 run directories" in res.stderr and "demo quality 1/" in res.stderr
    # report.md names the dataset in words, not as the JSON key
    report_md = (out / "report.md").read_text()
    assert "Files `demo_*`: 160 rows of data demo (judge_aspect=consistency), split all, prompt source" in report_md
    assert "{" not in report_md
    assert "demo quality: done" in res.stderr and "several model pairs" in res.stderr


def test_report_names_missing_and_incomplete_runs(sweep, tmp_path, cscore_main):
    partial = tmp_path / "partial"
    shutil.copytree(sweep, partial)
    shutil.rmtree(partial / "1")  # job 1 never started
    assert [j["method.gamma"] for j in expected_jobs(partial)] == ["0.1", "0.4"]
    runs = find_runs(partial)
    assert missing_jobs(partial, runs) == ["job 1 (method.gamma=0.4)"]
    res = cscore_main("report", str(partial), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "missing: job 1 (method.gamma=0.4)" in res.stdout
    assert "1 not started" in (partial / "report" / "report.md").read_text()


def test_report_on_an_empty_folder_is_a_clear_error(tmp_path, cscore_main):
    res = cscore_main("report", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 1 and "no cscore run directories" in res.stderr


def test_report_on_a_path_that_does_not_exist_says_so(tmp_path, cscore_main):
    res = cscore_main("report", str(tmp_path / "nonexistent"), cwd=tmp_path)
    assert res.returncode == 2 and "nonexistent does not exist" in res.stderr
    assert "no cscore run directories" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()  # no report folder made under it
    (tmp_path / "scores.parquet").write_bytes(b"")
    res = cscore_main("report", str(tmp_path / "scores.parquet"), cwd=tmp_path)
    assert res.returncode == 2 and "scores.parquet is a file" in res.stderr


# ---------------------------------------------------------------- names and plots (no models)

def fake_run(pair="p1", split="all", samples_per_second=10.0):
    config = {"data": {"name": "demo"}, "split": {"use": split}, "pair": {"name": pair},
              "method": {"name": "contrast", "variant": "contrast"}}
    return Run(Path(pair), config, {"speed": {"samples_per_second": samples_per_second}})


def fake_dataset(runs, humans=("human.overall",)):
    """Rows expert / amateur / ensemble / contrast (the main row) of every run."""
    ds = tables.Dataset("key", pd.DataFrame(), list(humans), None)
    for run in runs:
        for variant in ("expert", "amateur", "ensemble", "contrast"):
            label = f"{run.config['pair']['name']} {variant}"
            ds.rows[label] = {"run": run, "variant": variant, "params": {}, "main": variant == "contrast"}
    return ds


def avg_table(ds, values):
    return pd.DataFrame({"label": list(ds.rows), "target": "AVG", "value": values})


def test_file_stems_are_the_data_name_with_the_split_when_not_all():
    datasets = [fake_dataset([fake_run(split=s)]) for s in ("all", "dev", "all")]
    assert sections.stems(datasets) == ["demo", "demo_dev", "demo_2"]


def test_a_dataset_key_reads_as_text():
    key = json.dumps({"data": {"name": "summeval", "path": None, "judge_aspect": "coherence"}, "prompt": "reference",
                      "split": {"use": "dev", "dev_fraction": 0.1, "seed": 0, "dev_ids": None}}, sort_keys=True)
    assert sections.describe_key(key) == ("data summeval (judge_aspect=coherence), split dev (dev_fraction=0.1, "
                                            "seed=0), prompt reference")
    key = json.dumps({"data": {"name": "demo"}, "split": {"use": "all", "seed": 0}, "prompt": None})
    assert sections.describe_key(key) == "data demo, split all"


def test_rows_of_one_pass_are_one_speed_point_with_a_note():
    ds = fake_dataset([fake_run()])
    points = side_tables.speed_points(ds, avg_table(ds, [0.5, 0.3, 0.4, 0.6]))
    assert points[["label", "value", "samples_per_second"]].values.tolist() == [["p1 contrast", 0.6, 10.0]]
    fig = plots.speed_vs_quality_figure(points)
    ax = fig.axes[0]
    assert len(ax.collections[0].get_offsets()) == 1
    assert [t.get_text() for t in ax.texts] == ["p1 contrast", plots.SINGLE_PASS_NOTE]  # label, note
    plt.close(fig)


def test_two_pairs_are_two_speed_points_without_a_note():
    ds = fake_dataset([fake_run("p1", samples_per_second=10.0), fake_run("p2", samples_per_second=40.0)])
    points = side_tables.speed_points(ds, avg_table(ds, [0.5, 0.3, 0.4, 0.6, 0.1, 0.2, 0.3, 0.4]))
    assert points[["label", "samples_per_second"]].values.tolist() == [["p1 contrast", 10.0], ["p2 contrast", 40.0]]
    fig = plots.speed_vs_quality_figure(points)
    assert len(fig.axes[0].collections[0].get_offsets()) == 2
    assert plots.SINGLE_PASS_NOTE not in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)


def test_distributions_have_one_panel_per_aspect_and_per_metric():
    rng = np.random.default_rng(0)
    humans = ["human.consistency", "human.fluency", "human.relevance", "human.overall"]
    metrics = ["score.expert", "score.contrast"]
    frame = pd.DataFrame(rng.normal(size=(40, 6)), columns=humans + metrics)
    fig = plots.distribution_figure(frame, metrics, humans)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == len(humans) + len(metrics)
    assert titles == ["consistency (human)", "fluency (human)", "relevance (human)", "overall (human)",
                      "expert", "contrast"]
    plt.close(fig)


def test_sweep_legend_sits_outside_the_axes():
    table = pd.DataFrame({"gamma": [0.1, 0.4] * 2, "value": [0.5, 0.6, 0.4, 0.45], "low": [0.4, 0.5, 0.3, 0.35],
                          "high": [0.6, 0.7, 0.5, 0.55], "series": ["overall"] * 2 + ["AVG"] * 2})
    fig = plots.correlation_vs_param_figure(table, "gamma")
    fig.tight_layout()  # as the saved file
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert frame.x1 <= legend.x0 and legend.x1 <= fig.bbox.x1  # right of the bands, inside the figure
    plt.close(fig)


# ---------------------------------------------------------------- pairwise accuracy and rendering (no models)

def translation_dataset():
    """Two language pairs, three systems; rows m (the metric) and neg (its negation).
    de-en g1: m orders A < B < C as the humans do; g2: m = 3, 2, 1 against human 1, 2, 2.
    zh-en g3: m = 1, 1.1, 5 against human 0, 0, 1; g4 has one finite cell (no pair: left out)."""
    frame = pd.DataFrame({
        "group": ["g1"] * 3 + ["g2"] * 3 + ["g3"] * 3 + ["g4"] * 3,
        "system": list("ABC") * 4,
        "task": "translation",
        "lang_pair": ["de-en"] * 6 + ["zh-en"] * 6,
        "human.mqm": [1, 2, 3, 1, 2, 2, 0, 0, 1, 5, np.nan, np.nan],
        "score.m": [1, 2, 3, 3, 2, 1, 1, 1.1, 5, 1, 2, 3],
    })
    frame["score.neg"] = -frame["score.m"]
    ds = tables.Dataset("key", frame, ["human.mqm"], "lang_pair")
    run = fake_run()
    ds.rows = {lb: {"run": run, "variant": lb, "params": {}, "main": True} for lb in ("m", "neg")}
    return ds


def test_pairwise_accuracy_of_translation_rows_is_hand_computed(tmp_path):
    # m, de-en: eps 0 gives g1 3/3 and g2 0/3 (two discordant pairs; B-C tied by the humans only),
    # mean 1/2; eps 1 (1/3, 1/3) and eps 2 (0, 1/3) are lower. zh-en: eps 0 gets 2/3, eps 0.1 ties
    # A-B as the humans do: 3/3. neg, de-en: g1 0, g2 2/3 at eps 0 and 1 (the smallest wins);
    # zh-en: only the A-B tie is right, from eps 0.1 on: 1/3.
    long = side_tables.pairwise(translation_dataset())
    got = long.set_index(["label", "target"])
    want = {("m", "de-en"): (1 / 2, 0.0), ("m", "zh-en"): (1.0, 0.1), ("m", "AVG"): (3 / 4, None),
            ("neg", "de-en"): (1 / 3, 0.0), ("neg", "zh-en"): (1 / 3, 0.1), ("neg", "AVG"): (1 / 3, None)}
    assert set(got.index) == set(want)
    for key, (value, eps) in want.items():
        assert got.loc[key, "value"] == pytest.approx(value)
        if eps is not None:
            assert got.loc[key, "epsilon"] == pytest.approx(eps)
    # wired into the report: <data>_pairwise_accuracy.{md,csv,tex}, none for other tasks
    lines = sections.pairwise_section(translation_dataset(), "demo", tmp_path)
    table = pd.read_csv(tmp_path / "demo_pairwise_accuracy.csv", index_col="label")
    assert list(table.columns) == ["de-en", "zh-en", "AVG"]
    assert table.loc["m"].tolist() == [0.5, 1.0, 0.75] and "acc-eq" in lines[1]
    assert (tmp_path / "demo_pairwise_accuracy.tex").is_file()
    eps = pd.read_csv(tmp_path / "demo_pairwise_accuracy_long.csv").set_index(["label", "target"])["epsilon"]
    assert eps[("m", "zh-en")] == pytest.approx(0.1)
    summary = translation_dataset()
    summary.frame["task"] = "summarization"
    assert side_tables.pairwise(summary).empty and sections.pairwise_section(summary, "demo", tmp_path) == []


def test_bias_score_is_computed_per_language_pair_then_averaged(tmp_path):
    """ContrastScore Table 8: BiasScore within each language pair (min-max and Spearman over that
    pair's rows), AVG = their mean; the pooled value over all rows is another number."""
    rng = np.random.default_rng(3)
    n = 12
    frame = pd.DataFrame({"group": [f"g{i // 3}" for i in range(2 * n)], "system": list("ABC") * (2 * n // 3),
                          "task": "translation", "lang_pair": ["de-en"] * n + ["zh-en"] * n,
                          "human.mqm": rng.normal(size=2 * n), "mean_logp.expert": rng.normal(size=2 * n)})
    frame["score.expert"] = frame["human.mqm"] + np.r_[1.0, -1.0].repeat(n) * frame["mean_logp.expert"]
    ds = tables.Dataset("key", frame, ["human.mqm"], "lang_pair")
    ds.rows = {"expert": {"run": fake_run(), "variant": "expert", "params": {}, "main": True}}

    def minmax(x):
        return (x - x.min()) / (x.max() - x.min())

    def by_hand(part):
        us = minmax(part["score.expert"]) - minmax(part["human.mqm"])
        return stats.spearmanr(part["mean_logp.expert"], us)[0]

    want = {lp: by_hand(frame[frame["lang_pair"] == lp]) for lp in ("de-en", "zh-en")}
    got = side_tables.bias(ds).set_index("target")["value"]
    assert list(got.index) == ["de-en", "zh-en", "AVG"]
    assert got["de-en"] == pytest.approx(want["de-en"]) and got["zh-en"] == pytest.approx(want["zh-en"])
    assert got["AVG"] == pytest.approx((want["de-en"] + want["zh-en"]) / 2)
    assert want["de-en"] > 0.5 and want["zh-en"] < -0.5  # overrated in one pair, underrated in the other
    assert abs(by_hand(frame) - got["AVG"]) > 0.1  # pooling all pairs is not their average
    sections.bias_section(ds, "mqm", tmp_path)
    md = (tmp_path / "mqm_bias.md").read_text()
    assert "split_by:lang_pair" in md and "AVG = their mean" in md
    assert list(pd.read_csv(tmp_path / "mqm_bias.csv", index_col="label").columns) == ["de-en", "zh-en", "AVG"]
    ds.split_by = None  # no groups: one column per aspect over all rows, as before
    assert side_tables.bias(ds)["value"].item() == pytest.approx(by_hand(frame))


def test_one_table_renders_to_markdown_csv_latex_and_rich():
    frame = pd.DataFrame({"a_b": [0.5, 0.25], "AVG": [float("nan"), 0.75]},
                         index=pd.Index(["x", "y [1]"], name="metric"))
    t = render.from_frame(frame, "T", "data:d|version:0", cell=render.number, best=True)
    assert t.best == {(0, 0), (1, 1)}
    assert render.markdown(t).splitlines() == [
        "## T", "", "_data:d|version:0_", "", "| metric | a_b | AVG |", "|---|---:|---:|",
        "| x | **0.5000** | nan |", "| y [1] | 0.2500 | **0.7500** |"]
    assert render.csv(t) == "metric,a_b,AVG\nx,0.5000,nan\ny [1],0.2500,0.7500\n"  # never marked
    tex = render.latex(t)
    assert tex.startswith("% data:d|version:0\n") and r"metric & a\_b & AVG \\" in tex
    assert r"x & \textbf{0.5000} & nan \\" in tex and r"\caption{T}" in tex
    from rich.console import Console

    console = Console(record=True, width=100)
    console.print(render.rich(t))
    text = console.export_text()
    assert "y [1]" in text and "0.7500" in text and "data:d|version:0" in text  # names kept, signature as caption


def test_run_correlation_tables_are_one_per_kind():
    df = pd.DataFrame({"m": [1, 2, 3, 4], "n": [4, 3, 2, 1], "h": [1, 3, 2, 4]})
    corr = correlation_table(df, ["m", "n"], ["h"])
    md = report.markdown(corr, "run", "sig")
    assert md.startswith("# run\n\n_sig_\n\n## Pearson\n") and "## Kendall (tau-b)" in md
    assert "| m | **0.8000** | **0.8000** |" in md  # Pearson: h and AVG, the best marked
    titles = [t.title for t in report.correlation_tables(corr, "run")]
    assert titles == ["run - pearson", "run - spearman", "run - kendall (tau-b)"]


def test_comparison_rows_pooled_differently_keep_their_own_labels_and_values(tmp_path):
    """A sweep over cdm's pooling pools the expert / amateur rows alike: each run's rows are its
    own (norm=sum, norm=max), never one run's values under a shared label."""
    runs = []
    for k, pooling in enumerate(("sum", "max")):
        path = tmp_path / str(k)
        path.mkdir()
        pd.DataFrame({"id": ["a", "b", "c"], "human.overall": [1.0, 2.0, 3.0],
                      "score.expert": [k + 0.1, k + 0.2, k + 0.3], "score.cdm": [k, 2 * k, 3 * k + 1.0]}
                     ).to_parquet(path / "scores.parquet")
        config = {"data": {"name": "demo"}, "split": {"use": "all"}, "pair": {"name": "p"},
                  "method": {"name": "cdm", "variant": "cdm", "pooling": pooling}}
        metrics = {"variants": [{"name": "expert", "method": "single", "params": {"model": "expert", "norm": pooling}},
                                {"name": "cdm", "method": "cdm", "params": {"pooling": pooling}}]}
        runs.append(Run(path, config, metrics))
    (ds,) = tables.collect(runs, with_defaults)
    assert list(ds.rows) == ["p expert norm=sum", "p cdm pooling=sum", "p expert norm=max", "p cdm pooling=max"]
    assert ds.frame["score.p expert norm=sum"].tolist() == [0.1, 0.2, 0.3]
    assert ds.frame["score.p expert norm=max"].tolist() == [1.1, 1.2, 1.3]


# ---------------------------------------------------------------- report options, NaN ranks, duplicate rows

@pytest.mark.parametrize("args, message", [
    (["--kendall", "zz"], "unknown Kendall variant 'zz'; use one of b, c, 23, acc23, like"),
    (["--correlation", "spearman", "--kendall", "c"], "--kendall c applies to the Kendall correlation only"),
    (["--kendall-threshold", "1"], "--kendall-threshold applies to --kendall like only"),
    (["--kendall", "like", "--kendall-threshold", "0"], "--kendall-threshold must be a number > 0"),
    (["--bootstrap", "-5"], "--bootstrap must be a whole number >= 0"),
    (["--permutations", "-1"], "--permutations must be a whole number >= 0"),
    (["--seed", "-1"], "--seed must be a whole number >= 0"),
    (["--alpha", "2"], "--alpha must lie strictly between 0 and 1"),
    (["--alpha", "0"], "--alpha must lie strictly between 0 and 1"),
    (["--bootstrap", "1.5"], "argument --bootstrap: invalid int value: '1.5'"),
    (["--resample", "docs"], "--resample must be one of groups, items, got 'docs'"),
    (["--accuracy", "oracle"], "--accuracy must be one of summac, topk, got 'oracle'"),
])
def test_bad_report_options_are_one_line_config_errors(args, message, tmp_path, cscore_main):
    """Checked before any run is read (the folder is empty): exit 2 as for other config errors."""
    res = cscore_main("report", str(tmp_path), *args, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith(f"cscore: error: {message}") and res.stderr.count("\n") == 1, res.stderr


def test_kendall_option_alone_means_the_kendall_correlation(sweep, tmp_path, cscore_main):
    out = tmp_path / "rep"
    res = cscore_main("report", str(sweep), "--kendall", "tau_c", "--bootstrap", "0", "--permutations", "0",
                      "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    long = pd.read_csv(out / "demo_quality_long.csv")
    run = next(r for r in find_runs(sweep) if r.config["method"]["gamma"] == 0.4)
    scores = run.scores()
    want = stats.kendalltau(scores["score.contrast"], scores["human.overall"], variant="c")[0]
    got = long.query("label == 'tiny contrast gamma=0.4' and target == 'overall'")["value"].item()
    assert got == pytest.approx(want) and want != pytest.approx(stats.pearsonr(scores["score.contrast"],
                                                                                scores["human.overall"])[0])
    sig = Signature.parse((out / "demo_quality.md").read_text().split("\n")[2].strip("_").split(" — ")[0]).fields
    assert sig["correlation"] == "kendall" and sig["kendall"] == "c" and "threshold" not in sig


def test_resample_and_accuracy_options_label_their_tables(sweep, tmp_path, cscore_main):
    """--resample items draws rows (summaries), not documents; --accuracy topk keeps the earlier rule;
    both are named in the captions, and the default summac table equals a direct computation."""
    from cscore.metaeval.accuracy import summac_accuracy

    run = next(r for r in find_runs(sweep) if r.config["method"]["gamma"] == 0.4)
    scores = run.scores()
    tables_of = {}
    for name, args in (("default", []), ("other", ["--resample", "items", "--accuracy", "topk"])):
        out = tmp_path / name
        res = cscore_main("report", str(sweep), "--bootstrap", "40", "--permutations", "0", "--out", str(out),
                          *args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        tables_of[name] = out
    caption = (tables_of["other"] / "demo_quality.md").read_text().split("\n")[2]
    assert "resample:items" in caption and "percentile bootstrap over items (rows" in caption
    acc_md = (tables_of["other"] / "demo_quantized_accuracy.md").read_text()
    assert "top-k rule" in acc_md and "protocol:topk" in acc_md
    got = pd.read_csv(tables_of["other"] / "demo_quantized_accuracy_long.csv").set_index(["label", "target"])
    want = quantized_accuracy_of(scores["score.contrast"], scores["human.overall"])
    assert got.loc[("tiny contrast gamma=0.4", "overall"), "value"] == pytest.approx(want)
    acc_md = (tables_of["default"] / "demo_quantized_accuracy.md").read_text()
    assert "SummaC protocol" in acc_md and "protocol:summac" in acc_md
    got = pd.read_csv(tables_of["default"] / "demo_quantized_accuracy_long.csv").set_index(["label", "target"])
    want = summac_accuracy(scores["score.contrast"].to_numpy(), scores["human.overall"].to_numpy())
    cell = got.loc[("tiny contrast gamma=0.4", "overall")]
    assert cell["value"] == pytest.approx(want["value"]) and cell["threshold"] == pytest.approx(want["threshold"])
    # the same point estimates, other intervals: rows drawn one by one are not documents drawn whole
    long = {k: pd.read_csv(v / "demo_quality_long.csv").set_index(["label", "target"]) for k, v in tables_of.items()}
    assert np.allclose(long["default"]["value"], long["other"]["value"])
    assert not np.allclose(long["default"]["low"], long["other"]["low"])


def quantized_accuracy_of(metric, human):
    """The top-k rule by hand: the k highest metric scores, k = the number of top human scores."""
    m, h = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    y = h == h.max()
    pred = m >= np.sort(m)[::-1][y.sum() - 1]
    return float(np.mean(pred == y))


def ranked_dataset(with_constant: bool):
    """Eight items of two rows: ``good`` follows the human score, ``bad`` is noise, ``flat`` is
    constant (no correlation: NaN)."""
    rng = np.random.default_rng(1)
    human = np.arange(16, dtype=float)
    frame = pd.DataFrame({"id": [str(i) for i in range(16)], "group": np.repeat(np.arange(8), 2),
                          "human.overall": human, "score.good": human + rng.normal(0, 1, 16),
                          "score.bad": rng.normal(0, 1, 16)})
    labels = ["good", "bad"]
    if with_constant:
        frame.insert(3, "score.flat", 1.0)
        labels.insert(0, "flat")
    ds = tables.Dataset("key", frame, ["human.overall"], None)
    ds.rows = {lb: {"run": fake_run(), "variant": lb, "params": {}, "main": True} for lb in labels}
    return ds


def test_a_nan_cell_gets_no_rank_and_leaves_the_others_ranks_alone():
    spec = tables.Spec(bootstrap=0, permutations=200)
    plain = tables.quality(ranked_dataset(False), spec).set_index(["label", "target"])
    long = tables.quality(ranked_dataset(True), spec)
    got = long.set_index(["label", "target"])
    assert np.isnan(got.loc[("flat", "overall"), "value"]) and pd.isna(got.loc[("flat", "overall"), "rank"])
    # good (r ~ 0.99) beats noise significantly: two clusters, with or without the NaN row
    assert [got.loc[(lb, "AVG"), "rank"] for lb in ("good", "bad")] == [1, 2]
    assert plain["rank"].to_dict() == got.loc[plain.index, "rank"].to_dict()
    cells = dict(tables.to_table(long, "t", "s").rows)
    assert cells["flat"] == ["nan", "nan"] and cells["good"][0].endswith(" (1)")
    # the clustering itself: NaN last, unranked, never tested
    from cscore.metaeval.clusters import significance_clusters
    from cscore.metaeval.statistic import LevelStat

    clusters = significance_clusters(ranked_dataset(True).frame, LevelStat("human.overall"),
                                     ["score.flat", "score.bad", "score.good"], n=50)
    assert [(c["metric"], c["rank"]) for c in clusters] == [("score.good", 1), ("score.bad", 2), ("score.flat", None)]
    assert clusters[2]["pvalues"] == {}


def write_run(path: Path, method: dict, variants: list[dict], scores: dict, pair: dict | None = None) -> Run:
    path.mkdir()
    pd.DataFrame({"id": ["a", "b", "c"], "human.overall": [1.0, 2.0, 3.0],
                  **{f"score.{k}": v for k, v in scores.items()}}).to_parquet(path / "scores.parquet")
    config = {"data": {"name": "demo"}, "split": {"use": "all"}, "pair": pair or {"name": "p"}, "method": method}
    return Run(path, config, {"variants": variants})


ENSEMBLE = {"gamma": 0.5, "t_exp": 1.0, "t_ama": 1.0, "floor": 1e-30, "clamp": None, "norm": "sum", "skip_first": False}


def test_a_row_repeated_with_its_defaults_left_out_appears_once(tmp_path):
    """method=ensemble writes every parameter of its row; the ensemble comparison row of a
    contrast run leaves floor out (the run sets none) and is scored with the default 1e-30: the
    same row, shown once. A contrast run with floor=1e-10 has another ensemble row."""
    comparison = {k: v for k, v in ENSEMBLE.items() if k != "floor"}
    contrast = {**ENSEMBLE, "gamma": 0.1}
    runs = [
        write_run(tmp_path / "0", {"name": "contrast", "variant": "contrast"},
                  [{"name": "ensemble", "method": "ensemble", "params": comparison},
                   {"name": "contrast", "method": "contrast", "params": contrast}],
                  {"ensemble": [0.1, 0.2, 0.3], "contrast": [3.0, 1.0, 2.0]}),
        write_run(tmp_path / "1", {"name": "ensemble", "variant": "ensemble"},
                  [{"name": "ensemble", "method": "ensemble", "params": ENSEMBLE}],
                  {"ensemble": [0.1, 0.2, 0.3]}),
        write_run(tmp_path / "2", {"name": "contrast", "variant": "contrast"},
                  [{"name": "ensemble", "method": "ensemble", "params": {**comparison, "floor": 1e-10}},
                   {"name": "contrast", "method": "contrast", "params": {**contrast, "floor": 1e-10}}],
                  {"ensemble": [0.3, 0.2, 0.1], "contrast": [1.0, 2.0, 4.0]}),
    ]
    (ds,) = tables.collect(runs, with_defaults)
    assert list(ds.rows) == ["p ensemble floor=1e-30", "p contrast floor=1e-30", "p ensemble floor=1e-10",
                             "p contrast floor=1e-10"]
    assert ds.rows["p ensemble floor=1e-30"]["main"]  # some run's method: a main row
    assert ds.rows["p ensemble floor=1e-30"]["params"] == ENSEMBLE
    assert ds.frame["score.p ensemble floor=1e-10"].tolist() == [0.3, 0.2, 0.1]
    assert ds.frame["score.p contrast floor=1e-10"].tolist() == [1.0, 2.0, 4.0]
    # one row of a name: no parameters in its label; two pairs of one name: the pair setting that differs
    (ds,) = tables.collect(runs[1:2], with_defaults)
    assert list(ds.rows) == ["p ensemble"]
    other = write_run(tmp_path / "3", {"name": "ensemble", "variant": "ensemble"},
                      [{"name": "ensemble", "method": "ensemble", "params": ENSEMBLE}],
                      {"ensemble": [0.5, 0.5, 0.6]}, pair={"name": "p", "amateur": {"early_exit": 4}})
    (ds,) = tables.collect([runs[1], other], with_defaults)
    assert list(ds.rows) == ["p ensemble amateur.early_exit=null", "p ensemble amateur.early_exit=4"]  # no Python None
    assert ds.frame["score.p ensemble amateur.early_exit=4"].tolist() == [0.5, 0.5, 0.6]


def test_plot_axes_are_parameters_every_method_row_has():
    run = fake_run()
    ds = tables.Dataset("key", pd.DataFrame(), ["human.overall"], None)
    ds.rows = {"p division": {"run": run, "variant": "division", "params": {"t_exp": 0.5, "t_ama": 1.5}, "main": True},
               "p cd_score": {"run": run, "variant": "cd_score", "main": True,
                              "params": {"t_exp": 0.5, "t_ama": 1.5, "alpha": 0.1, "outside": -np.inf}}}
    assert report_plots.swept_params(ds) == []  # alpha / outside: cd_score's only, no axis
    ds.rows["p division"]["params"]["t_exp"] = 1.0
    assert report_plots.swept_params(ds) == ["t_exp"]


# ---------------------------------------------------------------- Kendall-like's threshold

def like_dataset():
    """Human 1, 2, 3, 5 (a 1-5 scale), metric 1, 3, 2, 4: of the 6 pairs only (2, 3) is
    discordant. Pairs with |human difference| >= 2: (1,3), (1,5), (2,5), (3,5), all concordant."""
    frame = pd.DataFrame({"id": list("abcd"), "group": ["g1", "g1", "g2", "g2"], "system": list("ABAB"),
                          "human.overall": [1.0, 2.0, 3.0, 5.0], "score.m": [1.0, 3.0, 2.0, 4.0]})
    ds = tables.Dataset("key", frame, ["human.overall"], None)
    ds.rows = {"m": {"run": fake_run(), "variant": "m", "params": {}, "main": True}}
    return ds


@pytest.mark.parametrize("threshold, want", [(None, np.nan), (1, 4 / 6), (2, 1.0), (4, 1.0), (4.5, np.nan)])
def test_kendall_like_counts_pairs_that_differ_by_the_threshold(threshold, want):
    spec = tables.Spec(kind="kendall", variant="like", bootstrap=0, permutations=0, threshold=threshold)
    got = tables.quality(like_dataset(), spec).set_index("target")["value"]
    assert got["overall"] == pytest.approx(want, nan_ok=True)
    assert spec.fields()["threshold"] == ("25" if threshold is None else f"{threshold:g}")
    unreachable = tables.unreachable_like_threshold(like_dataset(), spec)
    assert unreachable == ({"overall": 4.0} if np.isnan(want) else {})


def test_the_largest_human_difference_is_that_of_the_pairs_a_level_compares():
    f = like_dataset().frame
    assert tables.largest_human_difference(f, "human.overall", "segment") == 4.0  # 5 - 1
    assert tables.largest_human_difference(f, "human.overall", "item") == 2.0  # g2: 5 - 3
    assert tables.largest_human_difference(f, "human.overall", "system_grouped") == 3.0  # B: 5 - 2
    assert tables.largest_human_difference(f, "human.overall", "system") == 1.5  # means 2 and 3.5
    spec = tables.Spec(kind="kendall", variant="like", level="item", threshold=3)
    note = sections.like_note(tables.unreachable_like_threshold(like_dataset(), spec), spec)
    assert "differ by >= 3" in note and "at level item" in note and "largest difference: overall 2)" in note
    assert "\n" not in note


def test_console_tables_print_brackets_as_text():
    from rich.console import Console

    t = render.Table("T [draft]", ["c [1]"], [("x [expected]", ["0.5"])], "sig; [expected]: the expected score",
                     "label [x]")
    console = Console(record=True, width=200)
    console.print(render.rich(t))
    text = " ".join(console.export_text().split())  # the caption wraps at the table's width
    for part in ("T [draft]", "c [1]", "x [expected]", "sig; [expected]: the expected score", "label [x]"):
        assert part in text, part


def test_a_baseline_joins_every_prompt_condition_of_its_data(tmp_path):
    """A baseline reads no prompt: beside runs under two prompt conditions its row appears in both
    of their tables; alone it is a table of its own; other data is not joined."""
    def contrast_run(name, condition, values, data="demo"):
        run = write_run(tmp_path / name, {"name": "contrast", "variant": "contrast"},
                        [{"name": "contrast", "method": "contrast", "params": {"gamma": 0.1}}], {"contrast": values})
        run.config.update({"prompt": {"condition": condition}, "data": {"name": data}})
        return run

    src, ref = contrast_run("src", "source", [1.0, 3.0, 2.0]), contrast_run("ref", "reference", [2.0, 1.0, 3.0])
    other = contrast_run("other", "source", [0.0, 1.0, 2.0], data="summeval")
    bleu = write_run(
        tmp_path / "bleu",
        {"name": "baseline", "variant": "baseline"},
        [{"name": "bleu", "method": "baseline", "params": {"baseline": "bleu"}}],
        {"bleu": [5.0, 6.0, 7.0]},
    )
    bleu.config["prompt"] = {"condition": "source"}
    got = {json.loads(ds.key)["data"]["name"] + "/" + str(json.loads(ds.key).get("prompt")): ds
           for ds in tables.collect([src, ref, other, bleu], with_defaults)}
    assert sorted(got) == ["demo/reference", "demo/source", "summeval/source"]
    for key in ("demo/reference", "demo/source"):
        assert list(got[key].rows) == ["p contrast", "bleu"]
        assert got[key].frame["score.bleu"].tolist() == [5.0, 6.0, 7.0]
    assert list(got["summeval/source"].rows) == ["p contrast"]
    (alone,) = tables.collect([bleu], with_defaults)
    assert list(alone.rows) == ["bleu"]


def test_expected_jobs_are_the_jobs_of_hydras_basic_sweeper(tmp_path):
    """multirun.yaml's sweeper params then its command line, a command-line sweep of a key the
    config sweeps too in that key's first place: the job list Hydra's own basic sweeper makes."""
    import yaml
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = {"method.score_range": "[0,4],[1,5]", "method.lam": "0.01,0.1", "method.t": "0.5,1,2"}
    task = ["method=cd_judge", "method.lam=1.0,2.0,3.0", "data=demo", "+method.x=range(0,3)"]
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": task},
                                                                      "sweeper": {"params": params}}}, sort_keys=False))
    overrides = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + task)
    want = BasicSweeper.split_arguments(overrides, None)[0]
    got = expected_jobs(tmp_path)
    assert len(want) == 2 * 3 * 3 * 3 and [[f"{k}={v}" for k, v in job.items()] for job in got] == want
    assert got[3]["method.lam"] == "1.0" and got[3]["method.t"] == "1" and got[3]["+method.x"] == "0"
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": ["a=interval(0,1)"]}}}))
    assert expected_jobs(tmp_path) is None  # not a list of values: unknown
