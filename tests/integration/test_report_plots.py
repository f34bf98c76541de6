"""`cscore report` end to end: every PNG it writes keeps its text inside the figure and its
legends off the bars (checked on the figure as saved, at the PNG's size); the judge's dev heat map
shows the expected score beside the parsed one; a bootstrap over fewer than 10 documents warns."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from cscore import __version__, rundir
from cscore.metaeval import judge, judge_runs, plots
from cscore.metaeval.resampling import MIN_UNITS
from cscore.rundir import find_runs
from cscore.tests.support import REPO
from cscore.tests.support.cli import run_main, write_scored_run

DEMO_FILE = REPO / "data" / "demo" / "demo.jsonl"
SLACK = 1.0  # pixels: rounding of the text extents


# ---------------------------------------------------------------- checking a saved figure

def _inside(box, fig_box) -> bool:
    return (box.x0 >= fig_box.x0 - SLACK and box.y0 >= fig_box.y0 - SLACK and box.x1 <= fig_box.x1 + SLACK
            and box.y1 <= fig_box.y1 + SLACK)


def _tick_labels(fig) -> set[int]:
    ids = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ids |= {id(tick.label1), id(tick.label2)}
    return ids


def _drawn_tick_labels(axis) -> list[Text]:
    """The labels of the ticks drawn (in the view), major and minor."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for locs, ticks in (
        (axis.get_majorticklocs(), axis.get_major_ticks),
        (axis.get_minorticklocs(), axis.get_minor_ticks),
    ):
        for loc, tick in zip(locs, ticks(len(locs))):
            if lo - 1e-9 * abs(hi - lo) <= loc <= hi + 1e-9 * abs(hi - lo) and tick.label1.get_visible():
                out += [tick.label1] if tick.label1.get_text() else []
    return out


def _overlapping(boxes: list) -> bool:
    return any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])


def layout_problems(fig, png: Path) -> list[str]:
    """What in ``fig``, drawn as ``plots.save`` wrote it to ``png``, would be cut off or hidden: a
    text (or an axes' tick labels, of the ticks drawn) outside the figure, a figure-level text or
    legend over an axes, a legend over a bar."""
    canvas = FigureCanvasAgg(fig)  # plt.close left the figure without one
    fig.set_dpi(plots.DPI)
    canvas.draw()
    renderer, box = canvas.get_renderer(), fig.bbox
    height, width = matplotlib.image.imread(png).shape[:2]
    problems = [] if (round(box.width), round(box.height)) == (width, height) else [f"size {width}x{height}"]
    ticks = _tick_labels(fig)
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and id(t) not in ticks:
            if not _inside(t.get_window_extent(renderer), box):
                problems.append(f"text outside: {t.get_text()!r}")
    axes_boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    problems += [f"tick labels or titles of axes {k} outside" for k, b in enumerate(axes_boxes) if not _inside(b, box)]
    for k, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            if _overlapping([t.get_window_extent(renderer) for t in _drawn_tick_labels(axis)]):
                problems.append(f"tick labels of axes {k} over each other")
    top_level = [t for t in fig.texts if t.get_visible() and t.get_text()]  # suptitle, supxlabel among them
    top_level = [a.get_window_extent(renderer) for a in top_level + list(fig.legends)]
    if _overlapping(top_level):
        problems.append("figure-level texts or legends over each other")
    if any(a.overlaps(b) for a in top_level for b in axes_boxes):
        problems.append("a figure-level text or legend over an axes")
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    bars = [p.get_window_extent(renderer) for ax in fig.axes for c in ax.containers for p in getattr(c, "patches", ())
            if p.get_height() > 0]
    for legend in legends:
        if any(legend.get_window_extent(renderer).overlaps(b) for b in bars):
            problems.append("legend over a bar")
    return problems


@pytest.fixture
def saved(monkeypatch):
    """Every (figure, path) that ``plots.save`` writes during the test."""
    out = []
    original = plots.save

    def save(fig, path):
        out.append((fig, original(fig, path)))
        return out[-1][1]

    monkeypatch.setattr(plots, "save", save)
    return out


def assert_figures_fit(saved, out: Path) -> None:
    pngs = sorted((out / "plots").glob("*.png"))
    assert sorted(p for _, p in saved) == pngs and pngs  # every PNG the report wrote is checked
    for fig, path in saved:
        assert layout_problems(fig, path) == [], path.name


# ---------------------------------------------------------------- token-method reports

def write_contrast_run(folder: Path, pair: str, gamma: float, t_exp: float, speed: float, groups: int = 12) -> None:
    """A finished contrast run (the rows cscore writes, by hand: no model) on ``groups`` documents
    of 4 systems."""
    rng = np.random.default_rng(int(gamma * 10 + t_exp * 100) + len(pair))
    n = 4 * groups
    frame = pd.DataFrame({"id": [f"i{k}" for k in range(n)], "group": [f"d{k // 4}" for k in range(n)],
                          "system": [f"S{k % 4}" for k in range(n)], "human.overall": rng.normal(size=n),
                          "human.fluency": rng.normal(size=n)})
    params = {"gamma": gamma, "t_exp": t_exp, "t_ama": 1.5}
    for v in ("expert", "amateur", "contrast"):
        frame[f"score.{v}"] = frame["human.overall"] + rng.normal(size=n)
    config = {"data": {"name": "grid"}, "split": {"use": "all"}, "pair": {"name": pair},
              "method": {"name": "contrast", "variant": "contrast", **params}}
    write_scored_run(folder, frame, config, params, speed)


def test_every_png_of_a_sweep_report_keeps_its_text_inside(tiny_sweep, tmp_path, cscore_main, saved):
    out = tmp_path / "rep"
    res = cscore_main("report", str(tiny_sweep.dir), "--bootstrap", "20", "--permutations", "0", "--out", str(out),
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # one model pair: one forward pass, so no speed-vs-quality plot (one dot compares nothing); said why
    assert {p.name for _, p in saved} == {"demo_corr_vs_gamma.png", "demo_distributions.png"}
    assert "demo_speed_vs_quality.png not written: every row comes from one forward pass (tiny " in res.stderr
    assert "needs runs with several model pairs" in res.stderr
    assert_figures_fit(saved, out)


def test_two_parameter_heat_map_and_speed_points_keep_their_text_inside(tmp_path, cscore_main, saved):
    root = tmp_path / "grid"
    for k, (pair, gamma, t_exp) in enumerate((p, g, t) for p in ("a-long-pair-name", "b-pair")
                                             for g in (0.1, 0.4) for t in (0.5, 1.0)):
        write_contrast_run(root / str(k), pair, gamma, t_exp, speed=3.0 if pair == "b-pair" else 40.0)
    res = cscore_main("report", str(root), "--bootstrap", "0", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert {p.name for _, p in saved} == {"grid_gamma_x_t_exp.png", "grid_distributions.png",
                                          "grid_speed_vs_quality.png"}
    speed = next(f for f, p in saved if p.name == "grid_speed_vs_quality.png")
    assert len(speed.axes[0].collections[0].get_offsets()) == 2  # one point per pair
    assert speed.axes[0].get_ylabel() == "Pearson (AVG)"
    assert "Pearson, segment level, split all, n = 48 rows of 12 documents" in flat(speed.axes[0].get_title())
    assert_figures_fit(saved, root / "report")
    assert "to resample" not in res.stdout  # 12 documents: no warning


def flat(text: str) -> str:
    """A wrapped text as one line."""
    return " ".join(text.split())


def test_gamma_plot_says_which_correlation_split_and_n_warns_on_few_documents_and_keeps_bars_apart(
        tmp_path, cscore_main, saved):
    root = tmp_path / "gamma"
    for k, gamma in enumerate((0.1, 0.2, 0.4, 0.8)):  # one pair, one swept parameter, 6 documents
        write_contrast_run(root / str(k), "pair-a", gamma, 1.0, speed=10.0, groups=6)
    res = cscore_main("report", str(root), "--bootstrap", "50", "--permutations", "0", "--correlation", "spearman",
                      "--alpha", "0.1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert {p.name for _, p in saved} == {"grid_corr_vs_gamma.png", "grid_distributions.png"}
    assert_figures_fit(saved, root / "report")
    fig = next(f for f, p in saved if p.name == "grid_corr_vs_gamma.png")
    (ax,) = fig.axes
    assert flat(ax.get_title()) == ("grid: correlation with human judgements Spearman, segment level, split all, "
                                    "n = 24 rows of 6 documents; bars: 90% bootstrap intervals over documents")
    assert [flat(t.get_text()) for t in ax.texts] == [
        f"Warning: only 6 items (documents / source segments) to resample (fewer than {MIN_UNITS}): the bootstrap "
        "intervals rest on too few to be reliable"]
    # one error bar per series (no overlapping filled bands), each at the interval of the quality table
    assert not ax.collections or all(type(c).__name__ == "LineCollection" for c in ax.collections)
    long = pd.read_csv(root / "report" / "grid_quality_long.csv")
    mains = long[long["label"].str.contains("contrast")]
    xs = []
    for bars in ax.containers:
        series = bars.get_label()
        segments = bars.lines[2][0].get_segments()  # one vertical segment per gamma, in gamma order
        want = mains[mains["target"] == series].assign(
            gamma=lambda d: d["label"].str.extract(r"gamma=([\d.]+)")[0].astype(float)).sort_values("gamma")
        got = [y for s in segments for y in (s[0][1], s[1][1])]
        assert got == pytest.approx([y for lh in zip(want["low"], want["high"]) for y in lh]), series
        xs.append([s[0][0] for s in segments])
    assert sorted(b.get_label() for b in ax.containers) == ["AVG", "fluency", "overall"]
    for k, gamma in enumerate((0.1, 0.2, 0.4, 0.8)):  # side by side around each gamma, none on another
        at = sorted(x[k] for x in xs)
        assert len(set(at)) == 3 and abs(sum(at) / 3 - gamma) < 1e-9 and at[-1] - at[0] < 0.1 * 0.5
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.2", "0.4", "0.8"]


def test_layout_check_catches_a_clipped_footnote_and_a_legend_over_bars(tmp_path):
    """The check itself: a footnote hanging off the figure and a legend on the bars are found."""
    fig, ax = plots.plt.subplots(figsize=(3, 3))
    ax.bar([0, 1], [0.9, 0.9], label="tall bars")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left")
    fig.text(0.5, 0.0, "a footnote far too long to fit under a figure three inches wide", ha="center")
    problems = layout_problems(fig, plots.save(fig, tmp_path / "bad.png"))
    assert "legend over a bar" in problems and any(p.startswith("text outside: 'a footnote") for p in problems)


# ---------------------------------------------------------------- a small judge

DOCS, SYSTEMS = 3, 4
LAMS, TS = (0.5, 1.0), (1.0, 2.0)


def small_judge_frame(lam: float, t: float, lo: int, hi: int) -> pd.DataFrame:
    """3 documents x 4 systems; the parsed contrast score is constant (a small judge that always
    says the same number), the expected score follows the human score best at lam / t = 0.5."""
    n = DOCS * SYSTEMS
    human = 1 + (np.arange(n) * 7 % 13) / 3
    frame = pd.DataFrame({"id": [f"i{k}" for k in range(n)], "group": [f"d{k // SYSTEMS}" for k in range(n)],
                          "system": [f"S{k % SYSTEMS}" for k in range(n)], "human.coherence": human,
                          "prompt": "judge prompt"})
    good = lam / t == 0.5
    for row, constant in (("expert", lo + 2), ("amateur", lo), ("cd_judge", lo + 1)):
        frame[f"score.{row}"] = float(constant)
        frame[f"parse.{row}"] = "ok"
        frame[f"score.{row}_expected"] = lo + (human - 1) * (1 if good or row != "cd_judge" else -1) + lam
    return frame


def write_small_judge(root: Path) -> Path:
    job = 0
    for lo, hi in ((1, 10),):  # one range: one panel, the narrowest figure
        for lam in LAMS:
            for t in TS:
                folder = root / str(job)
                folder.mkdir(parents=True)
                frame = small_judge_frame(lam, t, lo, hi)
                config = {"data": {"name": "summeval"}, "split": {"use": "all", "dev_ids": None},
                          "pair": {"name": "tiny", "expert": {"path": "org/Tiny-135M"},
                                   "amateur": {"path": None, "early_exit": 10}},
                          "method": {"name": "cd_judge", "variant": "cd_judge", "lam": lam, "t": t,
                                     "score_range": [lo, hi], "aspect": "coherence"}}
                (folder / rundir.CONFIG).write_text(yaml.safe_dump(config))
                frame.to_parquet(folder / rundir.SCORES, index=False)
                params = {"lam": lam, "t": t, "score_range": [lo, hi], "aspect": "coherence"}
                ok = {"No Pred": 0, "Below": 0, "Above": 0, "n": len(frame)}
                rundir.write_metrics(folder, {
                    "cscore_version": __version__, "signature": "s", "data": {}, "n_items": len(frame),
                    "split": {"use": "all"}, "n_truncated": 0, "truncated_ids": [], "temperatures": [],
                    "variants": [{"name": v, "method": "cd_judge", "params": {**params, "who": w}}
                                 for v, w in (("expert", "main"), ("amateur", "asst"), ("cd_judge", "contrast"))],
                    "models": {}, "correlations": [], "speed": {"samples_per_second": 2.0}, "nonfinite_scores": {},
                    "judge": {**params, "invalid": {r: ok for r in ("expert", "amateur", "cd_judge")}},
                    "environment": {}})
                job += 1
    return root


def test_a_small_judges_dev_heat_map_shows_the_expected_score_and_every_png_fits(tmp_path, cscore_main, saved):
    root = write_small_judge(tmp_path / "judge")
    res = cscore_main("report", str(root), "--bootstrap", "20", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    stem = "summeval_judge_coherence"
    assert {p.name for _, p in saved} == {f"{stem}_scores_tiny.png", f"{stem}_dev_tiny_1-10.png"}
    assert_figures_fit(saved, root / "report")
    fig = next(f for f, p in saved if p.name == f"{stem}_dev_tiny_1-10.png")
    parsed, expected = [ax for ax in fig.axes if ax.get_title()]  # the colour bars have none
    # a constant parsed score: no correlation in any cell, so no cell is chosen (issue 47, item 4)
    assert (parsed.get_title(), expected.get_title()) == ("parsed score: no valid scores, nothing chosen",
                                                          "expected score")
    assert [t.get_text() for t in parsed.texts] == ["nan"] * 4
    assert not [p for p in parsed.patches if p.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
    study = judge_runs.collect(find_runs(root))[0]
    grid = judge.grid(study, judge.Criterion(), "expected")
    want = grid.sort_values(["lam", "t"])["value"]
    assert [t.get_text() for t in expected.texts] == [f"{v:.3f}" for v in want]
    # the expected score's chosen cell outlined: lam / t = 0.5 first at (0.5, 1): row 0, column 0
    (box,) = [p for p in expected.patches if p.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
    assert box.get_xy() == (-0.5, -0.5)
    # 3 documents: one warning line, and the same note in report.md
    lines = [line for line in res.stdout.splitlines() if "to resample" in line]
    assert len(lines) == 1 and f"only {DOCS} documents" in lines[0] and f"fewer than {MIN_UNITS}" in lines[0]
    assert f"**only {DOCS} documents in the reported rows to resample" in (root / "report" / "report.md").read_text()


# ---------------------------------------------------------------- few documents, a real tiny run

@pytest.fixture(scope="module")
def three_document_run(tiny_dirs, tmp_path_factory):
    """The tiny pair on the first 3 demo documents (8 systems each), run in this process."""
    root = tmp_path_factory.mktemp("few")
    docs = [json.loads(line) for line in DEMO_FILE.read_text().splitlines()]
    keep = sorted({d["doc_id"] for d in docs})[:3]
    (root / "three.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs if d["doc_id"] in keep))
    res = run_main("run", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                   "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false",
                   f"data.path={root / 'three.jsonl'}", f"hydra.run.dir={root / 'run'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    return root / "run"


@pytest.mark.slow
def test_a_bootstrap_over_three_documents_warns_once(three_document_run, tmp_path, cscore_main):
    out = tmp_path / "rep"
    res = cscore_main("report", str(three_document_run), "--bootstrap", "50", "--permutations", "20",
                      "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if "to resample" in line]
    assert len(lines) == 1, res.stdout
    assert "only 3 items" in lines[0] and "bootstrap intervals and the significance clusters" in lines[0]
    md = (out / "report.md").read_text()
    assert "**only 3 items (documents / source segments) to resample (fewer than 10)" in md
    # nothing resampled, nothing to warn about
    res = cscore_main("report", str(three_document_run), "--bootstrap", "0", "--permutations", "0",
                      "--out", str(tmp_path / "rep0"), cwd=tmp_path)
    assert res.returncode == 0 and "to resample" not in res.stdout + (tmp_path / "rep0" / "report.md").read_text()


def test_a_value_outside_its_interval_gets_no_bar_on_that_side():
    """A tie-calibrated acc23 (a maximum over epsilon) can lie outside its bootstrap interval: the
    sweep plot draws the bar from the interval's far end to the value, not a negative length."""
    table = pd.DataFrame({"gamma": [0.1, 0.2], "series": ["a", "a"], "value": [0.5, 0.6],
                          "low": [0.55, 0.4], "high": [0.7, 0.8]})
    fig = plots.correlation_vs_param_figure(table, "gamma")
    (bars,) = fig.axes[0].containers[0].lines[2]
    spans = np.array([sorted(seg[:, 1]) for seg in bars.get_segments()])
    np.testing.assert_allclose(spans, [[0.5, 0.7], [0.4, 0.8]], rtol=0, atol=1e-12)
