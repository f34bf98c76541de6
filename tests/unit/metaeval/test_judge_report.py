"""Judge meta-evaluation (metaeval.judge, metaeval.judge_plots) and `cscore report` on judge runs:
run directories written by hand (no models, no torch) for a grid of 2 lambda x 2 t x 2 score ranges
x 2 pairs with a dev / test split, scores built so that the best dev point is known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from cscore import __version__, rundir
from cscore.metaeval import judge, judge_plots, judge_runs, judge_tables, render
from cscore.metaeval.plots import plt
from cscore.metaeval.signature import Signature
from cscore.rundir import Run, find_runs

LAMS, TS = (0.5, 1.0), (1.0, 2.0)
RANGES = ((1, 5), (2, 6))
DOCS, SYSTEMS = 10, 4
DEV_DOCS = ("d0", "d1")
# which c = lam / t gives the best dev scores, per range: (0.5, 1) and (1, 2) share c = 0.5
BEST_C = {(1, 5): 0.5, (2, 6): 1.0}
BEST_EXPECTED_C = {(1, 5): 0.25, (2, 6): 0.5}
PAIRS = {"pA": ("org/Main-8B", "org/Asst-1B"), "pB": ("org/Main-8B", "org/Asst-3B")}


def base_table() -> pd.DataFrame:
    """10 documents x 4 systems; human.coherence = mean of 3 experts (k/3 in [1, 5])."""
    rng = np.random.default_rng(7)
    experts = rng.integers(1, 6, size=(DOCS * SYSTEMS, 3))
    experts[0] = (1, 1, 1)  # the scale's ends occur
    experts[-1] = (5, 5, 5)
    frame = pd.DataFrame({"id": [f"i{k}" for k in range(DOCS * SYSTEMS)],
                          "group": [f"d{k // SYSTEMS}" for k in range(DOCS * SYSTEMS)],
                          "system": [f"S{k % SYSTEMS}" for k in range(DOCS * SYSTEMS)],
                          "human.coherence": experts.mean(1),
                          "human.fluency": rng.integers(1, 6, size=DOCS * SYSTEMS).astype(float)})
    frame["split"] = np.where(frame["group"].isin(DEV_DOCS), "dev", "test")
    return frame


def on_range(h, lo):
    """The human score as a judge on [lo, lo + 4] would write it."""
    return np.floor(np.asarray(h) + 0.5) - 1 + lo


def contrast_scores(frame, lo, hi, quality: str) -> np.ndarray:
    """good: the human score on the range; mid: the same on every other row, lo elsewhere;
    bad: reversed. Deterministic, so the dev order good > mid > bad is known."""
    b = on_range(frame["human.coherence"], lo)
    if quality == "good":
        out = b.copy()
        out[lo::7] = np.clip(out[lo::7] + 1, lo, hi)  # not a copy of the human column; not the same per range
        return out
    if quality == "mid":
        return np.where(np.arange(len(b)) % 2 == 0, b, lo)
    return lo + hi - b


def judge_frame(lam, t, lo, hi, pair) -> pd.DataFrame:
    frame = base_table()
    c = lam / t
    quality = "good" if c == BEST_C[(lo, hi)] else ("mid" if c == 0.25 else "bad")
    frame["prompt"] = "judge prompt"
    score = contrast_scores(frame, lo, hi, quality)
    parse = np.array(["ok"] * len(frame), dtype=object)
    first_test = int(np.flatnonzero(frame["split"] == "test")[0])
    score[first_test], parse[first_test] = hi, "Above"  # one clamped output on test at every point
    frame["score.cd_judge"] = score
    frame["parse.cd_judge"] = parse
    h = frame["human.coherence"].to_numpy()
    exp_good = lo + (h - 1)
    frame["score.cd_judge_expected"] = exp_good if c == BEST_EXPECTED_C[(lo, hi)] else lo + hi - exp_good + 0.1 * c
    # the single models do not depend on lam, t: the same columns at every point of a range
    expert = on_range(h, lo)
    expert[lo::5] = lo + 2
    frame["score.expert"] = expert
    frame["parse.expert"] = "ok"
    frame["score.expert_expected"] = expert + 0.25
    asst = np.full(len(frame), float(lo + 1))
    asst[::3] = on_range(h[::3], lo)
    asst_parse = np.array(["ok"] * len(frame), dtype=object)
    test_rows = np.flatnonzero(frame["split"] == "test")
    if pair == "pA":  # pA's assistant: 5 No Pred and 2 Below on test, 1 No Pred on dev
        asst_parse[test_rows[1:6]] = "No Pred"
        asst_parse[test_rows[6:8]] = "Below"
        asst_parse[0] = "No Pred"
        asst[asst_parse != "ok"] = lo
    else:
        asst = asst[::-1].copy()
    frame["score.amateur"] = asst
    frame["parse.amateur"] = asst_parse
    frame["score.amateur_expected"] = np.nan  # e.g. a value that is not one token
    return frame


def metrics_for(frame, lam, t, lo, hi, variant="cd_judge") -> dict:
    cols = [c for c in frame.columns if c.startswith("score.")]
    invalid = {}
    for row in ("expert", "amateur", variant):
        st = frame[f"parse.{row}"]
        invalid[row] = {**{s: int((st == s).sum()) for s in ("No Pred", "Below", "Above")}, "n": len(frame)}
    return {"cscore_version": __version__, "signature": "sig", "data": {}, "n_items": len(frame),
            "split": {"use": "all"}, "n_truncated": 0, "truncated_ids": [], "temperatures": [],
            "variants": [{"name": v, "method": "cd_judge", "params": {"lam": lam, "t": t, "score_range": [lo, hi],
                                                                        "aspect": "coherence", "who": w}}
                         for v, w in (("expert", "main"), ("amateur", "asst"), (variant, "contrast"))],
            "models": {}, "correlations": [], "speed": {"samples_per_second": 5.0},
            "nonfinite_scores": {c: int(frame[c].isna().sum()) for c in cols},
            "judge": {"score_range": [lo, hi], "aspect": "coherence", "lam": lam, "t": t, "invalid": invalid},
            "environment": {}}


def write_run(folder: Path, frame: pd.DataFrame, lam, t, lo, hi, pair="pA", dev_ids="dev_ids.txt",
              name="cd_judge") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    expert, amateur = PAIRS[pair]
    config = {"data": {"name": "summeval", "path": None, "template": None},
              "pair": {"name": pair, "expert": {"path": expert}, "amateur": {"path": amateur, "early_exit": None}},
              "method": {"name": name, "variant": name, "lam": lam, "t": t, "score_range": [lo, hi],
                         "aspect": "coherence"},
              "split": {"use": "all", "dev_ids": dev_ids}, "judge_prompt": {"name": "geval"}}
    (folder / rundir.CONFIG).write_text(yaml.safe_dump(config))
    frame.to_parquet(folder / rundir.SCORES, index=False)
    rundir.write_metrics(folder, metrics_for(frame, lam, t, lo, hi, name))
    return folder


def write_sweep(root: Path, pairs=("pA", "pB"), split=True) -> Path:
    job = 0
    for pair in pairs:
        for lo, hi in RANGES:
            for lam in LAMS:
                for t in TS:
                    frame = judge_frame(lam, t, lo, hi, pair)
                    if not split:
                        frame = frame.drop(columns="split")
                    write_run(root / str(job), frame, lam, t, lo, hi, pair, "dev_ids.txt" if split else None)
                    job += 1
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return write_sweep(tmp_path_factory.mktemp("judge") / "sweep")


@pytest.fixture(scope="module")
def study(sweep):
    studies = judge_runs.collect(find_runs(sweep))
    assert len(studies) == 1
    return studies[0]


@pytest.fixture(scope="module")
def rep(study):
    return judge.build(study, bootstrap=200, seed=3)


def scipy_corr(kind, x, y) -> float:
    fn = {"pearson": stats.pearsonr, "spearman": stats.spearmanr, "kendall": stats.kendalltau}[kind]
    return float(fn(x, y)[0])


# ---------------------------------------------------------------- collection and selection

def test_judge_runs_are_collected_into_one_study_of_grid_points(study, sweep):
    runs = find_runs(sweep)
    assert len(runs) == 16 and all(judge_runs.is_judge_run(r) for r in runs)
    assert (study.data, study.aspect, study.human) == ("summeval", "coherence", "human.coherence")
    assert len(study.points) == 16 and study.ranges() == [(1, 5), (2, 6)] and study.has_dev_split
    assert study.settings() == [("pA", "cd_judge", 1, 5), ("pB", "cd_judge", 1, 5), ("pA", "cd_judge", 2, 6),
                                ("pB", "cd_judge", 2, 6)]
    p = study.points[0]
    assert (p.main, p.asst) == ("Main-8B", "Asst-1B") and "prompt" not in p.frame  # only the columns needed
    token = Run(Path("x"), {"data": {}, "pair": {}, "method": {"name": "contrast"}}, {"variants": []})
    assert not judge_runs.is_judge_run(token)


def test_selection_picks_the_best_dev_point_with_ties_to_the_smallest_lambda(study):
    sel = judge.select(study).set_index(["pair", "range"])
    grid = judge.grid(study)
    # independently: scipy's Spearman on the dev rows of every run
    for p in study.points:
        dev = p.frame[p.frame["split"] == "dev"]
        want = scipy_corr("spearman", dev["score.cd_judge"], dev["human.coherence"])
        got = grid[(grid["pair"] == p.pair) & (grid["lo"] == p.lo) & (grid["lam"] == p.lam) & (grid["t"] == p.t)]
        assert got["value"].item() == pytest.approx(want, abs=1e-12) and got["n"].item() == 8
    for pair in ("pA", "pB"):
        # 1-5: c = 0.5 is best at (0.5, 1) and (1, 2), identical scores: the smaller lambda wins
        s = sel.loc[(pair, "1-5")]
        assert (s["lam"], s["t"], s["n_tied"], s["points"]) == (0.5, 1.0, 2, 4)
        assert s["tied"] == "(0.5, 1); (1, 2)" and s["selected_on"] == "dev" and s["reported_on"] == "test"
        vals = grid[(grid["pair"] == pair) & (grid["lo"] == 1)]["value"]
        assert s["value"] == vals.max() and (vals < s["value"]).sum() == 2
        # 2-6: c = 1 only at (1, 1)
        s = sel.loc[(pair, "2-6")]
        assert (s["lam"], s["t"], s["n_tied"]) == (1.0, 1.0, 1)
    # the expected score is selected on its own: 1-5 best at c = 0.25, i.e. (0.5, 2)
    exp = judge.select(study, score="expected").set_index(["pair", "range"])
    assert (exp.loc[("pA", "1-5"), "lam"], exp.loc[("pA", "1-5"), "t"]) == (0.5, 2.0)
    assert (exp.loc[("pA", "2-6"), "lam"], exp.loc[("pA", "2-6"), "t"]) == (0.5, 1.0)  # c=0.5 ties (1, 2)


def test_ties_go_to_the_smallest_lambda_then_the_smallest_t():
    def frame(values):
        return pd.DataFrame({"lam": [0.5, 0.5, 1.0, 1.0], "t": [1.0, 2.0, 1.0, 2.0], "value": values})

    assert judge.choose(frame([0.3, 0.3, 0.3, 0.3])) == (0, [0, 1, 2, 3])
    assert judge.choose(frame([0.1, 0.2, 0.9, 0.9])) == (2, [2, 3])  # same lambda: the smaller t
    assert judge.choose(frame([0.1, 0.9, 0.9 + 1e-15, 0.2]))[0] == 1  # rounding noise is a tie
    assert judge.choose(frame([0.1, 0.9, 0.9 + 1e-6, 0.2]))[0] == 2  # a real difference is not
    assert judge.choose(frame([np.nan, 0.2, np.nan, 0.5]))[0] == 3  # nan never wins
    assert judge.choose(frame([np.nan] * 4)) == (0, [0, 1, 2, 3])  # nothing finite: all tie
    shuffled = frame([0.9, 0.1, 0.2, 0.9]).iloc[[3, 2, 1, 0]]
    assert judge.choose(shuffled) == (0, [0, 3])  # by value, not by row order


# ---------------------------------------------------------------- reported correlations

def test_test_correlations_are_scipys_on_the_test_rows_of_the_chosen_point(rep, study):
    long = rep.long
    chosen = {(1, 5): (0.5, 1.0), (2, 6): (1.0, 1.0)}
    for (lo, hi), (lam, t) in chosen.items():
        p = next(p for p in study.points if (p.pair, p.lo, p.lam, p.t) == ("pA", lo, lam, t))
        test = p.frame[p.frame["split"] == "test"]
        assert len(test) == 32
        for kind in judge.CORRELATIONS:
            for label, col in (("Contra. (pA)", "score.cd_judge"), ("Main-8B", "score.expert"),
                               ("Asst-1B", "score.amateur"), ("Contra. (pA) [expected]", None)):
                got = long[(long["lo"] == lo) & (long["label"] == label) & (long["correlation"] == kind)]
                assert len(got) == 1, (label, lo, kind)
                if col is None:
                    continue
                want = scipy_corr(kind, test[col], test["human.coherence"])
                r = got.iloc[0]
                assert r["value"] == pytest.approx(want, abs=1e-12)
                assert r["half_width"] == pytest.approx((r["high"] - r["low"]) / 2) and r["half_width"] > 0
                assert (r["n"], r["n_groups"]) == (32, 8)
    # the main model is shared by pA and pB: one row per range; each pair's assistant is its own row
    labels = set(long["label"])
    assert {"Main-8B", "Asst-1B", "Asst-3B", "Contra. (pA)", "Contra. (pB)", "Main-8B [expected]"} <= labels
    assert not any(lb.startswith("Asst") and "expected" in lb for lb in labels)  # all-NaN column: no row
    assert len(long[(long["label"] == "Main-8B") & (long["correlation"] == "pearson")]) == 2
    # the expected contrast is reported at its own choice
    e = long[(long["label"] == "Contra. (pA) [expected]") & (long["lo"] == 1)]
    assert set(zip(e["lam"], e["t"])) == {(0.5, 2.0)}


def test_resample_items_draws_summaries_and_says_so(rep, study):
    """--resample items (the released evaluation's bootstrap over summaries): each interval is the
    percentile bootstrap of the test rows drawn one by one; the notes and caption name the unit."""
    from cscore.metaeval.resampling import bootstrap_ci

    items = judge.build(study, bootstrap=200, seed=3, resample="items")
    p = next(p for p in study.points if (p.pair, p.lo, p.lam, p.t) == ("pA", 2, 1.0, 1.0))
    test = p.frame[p.frame["split"] == "test"].reset_index(drop=True)
    got = items.long.query("lo == 2 and label == 'Contra. (pA)' and correlation == 'pearson'").iloc[0]
    stat = judge.Criterion().stat(study.human, "pearson")
    want = bootstrap_ci(test, stat, "score.cd_judge", resample=None, n=200, seed=3)
    assert (got["low"], got["high"]) == pytest.approx((want[1], want[2]))
    grouped = rep.long.query("lo == 2 and label == 'Contra. (pA)' and correlation == 'pearson'").iloc[0]
    assert got["value"] == pytest.approx(grouped["value"]) and got["low"] != pytest.approx(grouped["low"])
    caption = items.tables["correlation"].signature
    assert "resample:items" in caption and "bootstrap interval over summaries (each drawn on its own" in caption
    assert "resample:groups" in rep.tables["correlation"].signature


def test_averages_and_spread_across_ranges(rep, study):
    values = []
    for (lo, hi), (lam, t) in {(1, 5): (0.5, 1.0), (2, 6): (1.0, 1.0)}.items():
        p = next(p for p in study.points if (p.pair, p.lo, p.lam, p.t) == ("pA", lo, lam, t))
        test = p.frame[p.frame["split"] == "test"]
        values.append(scipy_corr("pearson", test["score.cd_judge"], test["human.coherence"]))
    a = rep.across.set_index(["label", "correlation"]).loc[("Contra. (pA)", "pearson")]
    assert a["mean"] == pytest.approx(np.mean(values))
    assert a["std"] == pytest.approx(abs(values[0] - values[1]) / 2)  # population std of two values
    assert a["spread"] == pytest.approx(abs(values[0] - values[1]))
    assert (a["ranges"], a["of"]) == (2, 2) and abs(values[0] - values[1]) > 0.01
    # the table: blocks per range, then the average block with the same means
    t = rep.tables["correlation"]
    assert t.columns == ["Range", "Pear.", "Spear.", "Kend."] and t.row_header == "Model"
    names = [name for name, _ in t.rows]
    head = names.index(judge_tables.AVERAGE_HEADER)
    avg_rows = dict(t.rows[head + 1:])
    assert avg_rows["Contra. (pA)"][0] == "mean" and avg_rows["Contra. (pA)"][1] == f"{np.mean(values):.4f}"
    first = t.rows[0]
    assert first[1][0] == "1-5" and " ± " in first[1][1]
    bias = rep.tables["range_bias"]
    row = dict(bias.rows)["Contra. (pA)"]
    assert row[bias.columns.index("Pear. max-min")] == f"{abs(values[0] - values[1]):.4f}"
    assert row[-1] == "2/2"


def _long(values: dict) -> pd.DataFrame:
    """A correlations frame by hand: {(label, lo, hi): pearson value}; spearman and kendall = value / 2."""
    rows = [{"lo": lo, "hi": hi, "range": f"{lo}-{hi}", "label": lb, "role": "contrast", "score": "parsed",
             "correlation": k, "value": v / (1 if k == "pearson" else 2), "half_width": np.nan}
            for (lb, lo, hi), v in values.items() for k in ("pearson", "spearman", "kendall")]
    return pd.DataFrame(rows)


def test_range_bias_over_one_range_says_it_needs_two_and_marks_no_best():
    long = _long({("A", 1, 5): 0.40, ("B", 1, 5): 0.30})
    t = judge_tables.range_bias_table(judge_tables.across_ranges(long), "bias")
    rows = dict(t.rows)
    for k in ("Pear.", "Spear.", "Kend."):
        for stat in ("std", "max-min"):
            j = t.columns.index(f"{k} {stat}")
            assert rows["A"][j] == rows["B"][j] == "needs ≥ 2 ranges"
            assert not any(col == j for _, col in t.best)
    assert rows["A"][t.columns.index("Pear. mean")] == "0.4000" and rows["A"][-1] == "1/1"
    assert t.best == {(0, 0), (0, 3), (0, 6)}  # only the highest mean of each correlation (A)
    md = render.markdown(t)
    assert "0.0000" not in md and "| needs ≥ 2 ranges |" in md


def test_range_bias_with_a_row_finite_on_one_range_only():
    """Two ranges; B is nan on 2-6: its std and max-min need 2 ranges, A's are numbers and the best."""
    long = _long({("A", 1, 5): 0.40, ("A", 2, 6): 0.10, ("B", 1, 5): 0.30, ("B", 2, 6): np.nan})
    t = judge_tables.range_bias_table(judge_tables.across_ranges(long), "bias")
    rows = dict(t.rows)
    std, spread = t.columns.index("Pear. std"), t.columns.index("Pear. max-min")
    assert rows["A"][std] == f"{0.15:.4f}" and rows["A"][spread] == f"{0.30:.4f}"
    assert rows["B"][std] == rows["B"][spread] == "needs ≥ 2 ranges" and rows["B"][-1] == "1/2"
    assert (0, std) in t.best and (1, std) not in t.best and (1, spread) not in t.best


def _red_boxes(ax) -> list:
    return [pt for pt in ax.patches if pt.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]


def test_a_dev_heat_map_of_nan_cells_chooses_nothing_and_says_so():
    cells = [(lam, t) for lam in LAMS for t in TS]
    nan = pd.DataFrame({"lam": [c[0] for c in cells], "t": [c[1] for c in cells], "value": np.nan})
    some = nan.assign(value=[np.nan, 0.2, np.nan, np.nan])  # only (0.5, 2.0) valid
    fig = judge_plots.dev_heatmap_figure({"parsed": nan, "expected": some}, {"parsed": (0.5, 1.0),
                                                                             "expected": (1.0, 1.0)})
    parsed_ax, expected_ax = [ax for ax in fig.axes if ax.get_title()]
    assert parsed_ax.get_title() == "parsed score: no valid scores, nothing chosen" and not _red_boxes(parsed_ax)
    assert expected_ax.get_title() == "expected score" and not _red_boxes(expected_ax)  # chosen cell is nan
    plt.close(fig)
    fig = judge_plots.dev_heatmap_figure({"expected": some}, {"expected": (0.5, 2.0)})
    box = _red_boxes(fig.axes[0])
    assert len(box) == 1 and box[0].get_xy() == (0.5, -0.5)  # column t=2.0, row lambda=0.5
    plt.close(fig)


def test_invalid_outputs_are_counted_from_the_parse_columns(rep):
    inv = rep.invalid.set_index(["label", "range"])
    a = inv.loc[("Asst-1B", "1-5")]
    assert (a["No Pred"], a["Below"], a["Above"], a["count"], a["n"]) == (5, 2, 0, 7, 32)  # test rows only
    assert a["invalid"] == pytest.approx(7 / 32)
    c = inv.loc[("Contra. (pA)", "2-6")]
    assert (c["Above"], c["count"], c["n"]) == (1, 1, 32) and c["invalid"] == pytest.approx(1 / 32)
    assert inv.loc[("Main-8B", "1-5"), "count"] == 0 and inv.loc[("Asst-3B", "1-5"), "count"] == 0
    assert not any("expected" in lb for lb, _ in inv.index)  # expected rows have no parse column
    # grouped by model, ranges ascending within (paper Tables 6-7)
    assert list(rep.invalid["label"])[:2] == ["Main-8B", "Main-8B"] and list(rep.invalid["range"])[:2] == ["1-5", "2-6"]
    md = render.markdown(rep.tables["invalid"])
    assert "| Asst-1B | 1-5 | 21.9% | 5 | 2 | 0 | 0 | 0 | 32 |" in md  # List and Echo: 0 under the paper rule
    # runs without method.parse (made before the key): cd_judge read with the paper's rule, said
    assert set(rep.invalid["rule"]) == {"paper"}
    assert "read with method.parse=paper (the paper's Tables 6-7 used method.parse=released)" in \
        rep.tables["invalid"].signature


def test_the_invalid_table_says_which_rule_read_each_row(tmp_path):
    """method.parse from each run's config (the released preset's default when absent): one rule
    is named once; two rules name the rows each read."""
    frame = judge_frame(0.5, 1.0, 1, 5, "pA").rename(columns=lambda c: c.replace(".cd_judge", ".cd_judge_released"))
    write_run(tmp_path / "a", frame, 0.5, 1.0, 1, 5, name="cd_judge_released")
    rep_one = judge.build(judge_runs.collect(find_runs(tmp_path))[0], bootstrap=0)
    assert set(rep_one.invalid["rule"]) == {"released"}
    assert "read with method.parse=released (the rule of the paper's Tables 6-7)" in rep_one.tables["invalid"].signature
    cfg = yaml.safe_load((tmp_path / "a" / rundir.CONFIG).read_text())
    cfg["method"]["parse"] = "paper"
    write_run(tmp_path / "b", frame, 0.5, 1.0, 1, 5, name="cd_judge_released")
    (tmp_path / "b" / rundir.CONFIG).write_text(yaml.safe_dump(cfg))
    rep_two = judge.build(judge_runs.collect(find_runs(tmp_path))[0], bootstrap=0)
    assert set(rep_two.invalid["rule"]) == {"released", "paper"}
    sig = rep_two.tables["invalid"].signature
    assert "method.parse=released: " in sig and "method.parse=paper: " in sig


def test_list_numbering_is_its_own_column_and_not_invalid():
    """A released row whose parse says List: counted in its own column, not in Invalid."""
    frame = pd.DataFrame({"parse.x": ["ok", "List", "List", "No Pred", "Above"]})
    rows = [{"label": "Main", "role": "main", "pair": "p", "range": "1-5", "lo": 1, "hi": 5, "frame": frame,
             "parse": "parse.x"}]
    inv = judge.invalid(rows)
    r = inv.iloc[0]
    assert (r["List"], r["No Pred"], r["Above"], r["count"], r["n"], r["other"]) == (2, 1, 1, 2, 5, 0)
    assert r["invalid"] == pytest.approx(2 / 5)
    md = render.markdown(judge_tables.invalid_table(inv, "t"))
    assert "| Model | Range | Invalid | No Pred | Below | Above | List | Echo | n |" in md
    assert "| Main | 1-5 | 40.0% | 1 | 0 | 1 | 2 | 0 | 5 |" in md


def test_range_echoes_are_their_own_column_and_no_ok_share():
    """Rows whose parse says Echo (the prompt's range read as its minimum): counted in their own
    column, not in Invalid (both rules read a score), and the Invalid cell says how much of the
    row they are, so a row of echoes prints no plain 0.0%."""
    echoes = pd.DataFrame({"parse.x": ["Echo"] * 4})
    mixed = pd.DataFrame({"parse.x": ["ok", "Echo", "No Pred", "ok"]})
    plain = pd.DataFrame({"parse.x": ["ok", "ok", "No Pred", "ok"]})
    rows = [{"label": lb, "role": "main", "pair": "p", "range": "1-5", "lo": 1, "hi": 5, "frame": f,
             "parse": "parse.x"} for lb, f in (("Echoes", echoes), ("Mixed", mixed), ("Plain", plain))]
    inv = judge.invalid(rows).set_index("label")
    assert (inv.loc["Echoes", "Echo"], inv.loc["Echoes", "count"], inv.loc["Echoes", "n"]) == (4, 0, 4)
    assert (inv.loc["Mixed", "Echo"], inv.loc["Mixed", "No Pred"], inv.loc["Mixed", "count"]) == (1, 1, 1)
    assert inv.loc["Plain", "Echo"] == 0
    md = render.markdown(judge_tables.invalid_table(judge.invalid(rows), "t"))
    assert "| Model | Range | Invalid | No Pred | Below | Above | List | Echo | n |" in md
    assert "| Echoes | 1-5 | 0.0% + 100.0% Echo | 0 | 0 | 0 | 0 | 4 | 4 |" in md
    assert "| Mixed | 1-5 | 25.0% + 25.0% Echo | 1 | 0 | 0 | 0 | 1 | 4 |" in md
    assert "| Plain | 1-5 | 25.0% | 1 | 0 | 0 | 0 | 0 | 4 |" in md
    # without any echo or list number the columns stay, at 0: the table reads alike under either rule
    plain = render.markdown(judge_tables.invalid_table(judge.invalid(rows[2:]), "t"))
    assert "| Above | List | Echo | n |" in plain and "| Plain | 1-5 | 25.0% | 1 | 0 | 0 | 0 | 0 | 4 |" in plain


def test_an_expected_score_not_computed_is_a_study_note(tmp_path):
    """A run whose metrics say an expected score could not be computed (a multi-token range at a
    c off the kept grid): the study carries the reason as a note (cscore report prints it)."""
    frame = judge_frame(0.3, 1.0, 1, 5, "pA")
    frame["score.cd_judge_expected"] = np.nan
    run = write_run(tmp_path / "0", frame, 0.3, 1.0, 1, 5)
    metrics = json.loads((run / rundir.METRICS).read_text())
    metrics["judge"]["expected_not_computed"] = {"cd_judge": "c = 0.3 is not one of the kept normalisers"}
    (run / rundir.METRICS).write_text(json.dumps(metrics))
    (study,) = judge_runs.collect(find_runs(tmp_path))
    assert study.notes == ["pA 1-5 lam=0.3 t=1: score.cd_judge_expected not computed: c = 0.3 is not one of the "
                           "kept normalisers"]


def test_runs_that_differ_in_other_settings_are_separate_points_and_say_how(tmp_path):
    """A greedy and a decode=values run of the same pair, range and (λ, t) are two points, each
    with all its rows, labelled with the setting that differs; a third run that repeats the greedy
    one merges with it (its ids counted once)."""
    import yaml

    frame = judge_frame(0.5, 1.0, 1, 5, "pA")
    runs = {}
    for name, decode in (("0", "greedy"), ("1", "values"), ("2", "greedy")):
        run = write_run(tmp_path / name, frame, 0.5, 1.0, 1, 5)
        cfg = yaml.safe_load((run / rundir.CONFIG).read_text())
        cfg["method"]["decode"] = decode
        (run / rundir.CONFIG).write_text(yaml.safe_dump(cfg))
        runs[name] = run
    (study,) = judge_runs.collect(find_runs(tmp_path))
    points = {p.pair: p for p in study.points}
    assert set(points) == {"pA [method.decode=greedy]", "pA [method.decode=values]"}
    assert len(points["pA [method.decode=values]"].frame) == len(frame)
    assert len(points["pA [method.decode=greedy]"].frame) == len(frame)
    assert points["pA [method.decode=greedy]"].runs == [runs["0"], runs["2"]]
    # one setting per pair: the label is the pair's name alone
    (one,) = judge_runs.collect(find_runs(tmp_path / "1"))
    assert [p.pair for p in one.points] == ["pA"]


def test_hyperparameter_table_lists_the_chosen_lambda_and_t(rep):
    t = rep.tables["hyperparameters"]
    rows = [(name, dict(zip(t.columns, cells))) for name, cells in t.rows]
    pa15 = next(r for name, r in rows if name == "pA" and r["Range"] == "1-5" and r["score"] == "parsed")
    assert (pa15["lambda"], pa15["t"], pa15["c = lambda/t"], pa15["selected on"]) == ("0.5", "1", "0.5", "dev")
    assert pa15["tied (lambda, t)"] == "2 of 4: (0.5, 1); (1, 2)"
    assert (pa15["Main"], pa15["Asst"]) == ("Main-8B", "Asst-1B")
    assert "smallest lambda, then the smallest t" in t.signature and "c = lambda/t" in t.signature


def test_without_a_dev_split_selection_and_report_use_the_same_items_and_say_so(tmp_path):
    root = write_sweep(tmp_path / "nosplit", pairs=("pA",), split=False)
    (study,) = judge_runs.collect(find_runs(root))
    assert not study.has_dev_split
    sel = judge.select(study)
    assert set(sel["selected_on"]) == {"all"} and set(sel["reported_on"]) == {"all"}
    rep = judge.build(study, bootstrap=0)
    assert judge.NO_DEV in rep.notes
    for table in rep.tables.values():
        if table is not rep.tables.get("invalid"):
            assert "SAME ITEMS" in table.title or judge.NO_DEV in table.signature, table.title
    assert "SAME ITEMS" in rep.tables["correlation"].title and judge.NO_DEV in rep.tables["correlation"].signature
    assert rep.long["n"].max() == 40 and rep.long["low"].isna().all()  # all rows, no intervals


# ---------------------------------------------------------------- plots

def test_human_scores_are_put_on_the_judges_range():
    h = np.array([1, 4 / 3, 5 / 3, 2, 13 / 3, 5, np.nan])
    assert judge_plots.human_on_range(h, 2, 6)[:6].tolist() == [2, 2, 3, 3, 5, 6]
    assert np.isnan(judge_plots.human_on_range(h, 2, 6)[6])
    assert judge_plots.human_on_range(h[:6], 0, 4).tolist() == [0, 0, 1, 1, 3, 4]
    assert judge_plots.human_scale(h) == (1, 5) and judge_plots.human_scale([0, 2.5, 10]) == (0, 10)
    assert judge_plots.score_shares([2, 2, 3, np.nan, 6], 2, 6).tolist() == [0.5, 0.25, 0, 0, 0.25]


def test_distribution_panels_and_dev_heat_map(rep):
    panels = judge_plots.distribution_panels(rep, "pA", "cd_judge")
    assert [p["range"] for p in panels] == ["1-5", "2-6"] and [(p["lam"], p["t"]) for p in panels] == [(0.5, 1), (1, 1)]
    p = panels[0]
    assert set(p["series"]) == {"human", "main", "asst", "contrast"} and p["n"] == 32
    assert all(s.sum() == pytest.approx(1) and len(s) == 5 for s in p["series"].values())
    fig = judge_plots.score_distribution_figure(panels, "t")
    assert len(fig.axes) == 2
    plt.close(fig)
    g = rep.grid[(rep.grid["pair"] == "pA") & (rep.grid["lo"] == 2)]
    expected = judge.grid(rep.study, judge.Criterion(), "expected")
    expected = expected[(expected["pair"] == "pA") & (expected["lo"] == 2)]
    fig = judge_plots.dev_heatmap_figure({"parsed": g, "expected": expected}, {"parsed": (1.0, 1.0),
                                                                               "expected": (0.5, 1.0)})
    parsed_ax, expected_ax = [ax for ax in fig.axes if ax.get_title()]
    for ax, xy in ((parsed_ax, (-0.5, 0.5)), (expected_ax, (-0.5, -0.5))):  # (column of t, row of lambda) - 0.5
        box = [pt for pt in ax.patches if pt.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
        assert len(box) == 1 and box[0].get_xy() == xy
        assert len(ax.texts) == 4
    assert expected_ax.texts[0].get_text() == f"{expected.sort_values(['lam', 't'])['value'].iloc[0]:.3f}"
    plt.close(fig)


def test_fallback_scores_are_marked_in_the_plot_and_under_the_table(rep):
    """pA's assistant on 1-5: 5 No Pred and 2 Below on the 32 test rows, all set to the range minimum;
    the contrast on 2-6: 1 Above clamped to 6. The plot hatches those shares and counts them under
    each panel; the correlation table's notes name them."""
    panels = judge_plots.distribution_panels(rep, "pA", "cd_judge")
    low, high = panels
    assert low["fallback"]["asst"] == pytest.approx([7 / 32, 0, 0, 0, 0])
    assert not low["fallback"]["main"].any()
    assert high["fallback"]["contrast"] == pytest.approx([0, 0, 0, 0, 1 / 32])
    assert high["fallback"]["asst"] == pytest.approx([7 / 32, 0, 0, 0, 0])
    assert judge_plots.fallback_counts(low) == "\nfallbacks: asst 7/32, contrast 1/32"
    fig = judge_plots.score_distribution_figure(panels, "t")
    for ax, lo in zip(fig.axes, (1, 2)):  # per panel: the assistant's bar at the minimum, the contrast's at the top
        hatched = [p for p in ax.patches if p.get_hatch() and p.get_height() > 0]
        assert [round(p.get_height() * 32) for p in hatched] == [7, 1]
        assert round(hatched[0].get_x() + hatched[0].get_width() / 2) == lo
    assert "fallbacks: asst 7/32" in fig.axes[0].get_xlabel()
    assert judge_plots.FALLBACK_LABEL in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)
    sig = rep.tables["correlation"].signature
    assert "fallback scores (invalid outputs set to a range end, no judgement): " in sig
    assert "Asst-1B 1-5: 7/32" in sig and "Main-8B" not in sig.split("fallback scores")[1]


def test_a_bootstrap_over_one_document_prints_no_interval(study):
    """A row whose scored rows lie in one document: the bootstrap would redraw that document every
    time, so no interval (the table prints the value alone) and a note says why; two documents get one."""
    frame = base_table()
    frame["score.x"] = frame["human.coherence"] * 2 + np.arange(len(frame)) % 3
    frame.loc[frame["group"] != "d3", "score.x"] = np.nan  # an [expected] score defined in one document only
    row = {"range": "1-5", "lo": 1, "hi": 5, "label": "Main [expected]", "role": "main", "pair": "pA",
           "score": "expected", "lam": 0.0, "t": np.nan, "column": "score.x", "frame": frame}
    long = judge.correlations(study, [row], bootstrap=50)
    assert long["value"].notna().all() and long["low"].isna().all() and long["high"].isna().all()
    assert (long["n_groups"] == 1).all()
    assert long.loc[long["correlation"] == "pearson", "value"].item() == pytest.approx(
        stats.pearsonr(frame.loc[frame["group"] == "d3", "score.x"],
                       frame.loc[frame["group"] == "d3", "human.coherence"])[0])
    md = render.markdown(judge_tables.correlation_table(long, "t"))
    assert "±" not in md
    note = judge.degenerate_note(long, 50, "groups")
    assert note.startswith("no interval (no ±) for Main [expected] 1-5: fewer than two documents")
    two = frame.assign(**{"score.x": np.where(frame["group"].isin(["d3", "d4"]), frame["human.coherence"]
                                              + np.arange(len(frame)) % 3, np.nan)})
    long2 = judge.correlations(study, [{**row, "frame": two}], bootstrap=50)
    assert long2["low"].notna().all() and judge.degenerate_note(long2, 50, "groups") == ""


# ---------------------------------------------------------------- cscore report

def test_report_writes_the_judge_tables_and_plots(sweep, tmp_path, cscore_main):
    out = tmp_path / "rep"
    res = cscore_main("report", str(sweep), "--bootstrap", "50", "--permutations", "0", "--out", str(out),
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    stem = "summeval_judge_coherence"
    for suffix in ("correlation", "hyperparameters", "range_bias", "invalid"):
        for ext in ("md", "csv", "tex"):
            assert (out / f"{stem}_{suffix}.{ext}").is_file(), (suffix, ext)
    for name in ("correlation_long.csv", "grid.csv", "invalid_long.csv"):
        assert (out / f"{stem}_{name}").is_file()
    for name in ("scores_pA", "scores_pB", "dev_pA_1-5", "dev_pA_2-6", "dev_pB_2-6"):
        assert (out / "plots" / f"{stem}_{name}.png").is_file(), name
    assert not list(out.glob("summeval_quality*"))  # judge runs do not go through the token tables
    md = (out / f"{stem}_correlation.md").read_text()
    sig = Signature.parse(md.split("\n")[2].strip("_").split(" — ")[0]).fields
    assert sig["criterion"] == "spearman" and sig["bootstrap"] == "50" and sig["selection"] == "dev"
    assert sig["version"] == __version__
    long = pd.read_csv(out / f"{stem}_correlation_long.csv")
    (run,) = [r for r in find_runs(sweep) if r.config["pair"]["name"] == "pA"
              and r.config["method"]["score_range"] == [2, 6] and r.config["method"]["lam"] == 1.0
              and r.config["method"]["t"] == 1.0]
    test = run.scores().query("split == 'test'")
    want = stats.kendalltau(test["score.cd_judge"], test["human.coherence"])[0]
    got = long.query("label == 'Contra. (pA)' and lo == 2 and correlation == 'kendall'")["value"].item()
    assert got == pytest.approx(want)
    assert f"{got:.4f} ± " in md and judge_tables.AVERAGE_HEADER in md
    assert "Contra. (pA)" in res.stdout and "Kend." in res.stdout  # printed
    assert "[expected]: the expected score" in " ".join(res.stdout.split())  # text, not rich markup
    report_md = (out / "report.md").read_text()
    assert "16 complete" in report_md and "## summeval coherence: lambda and t chosen on dev" in report_md
    # the test rows are 8 documents: the bootstrap over them is flagged, on the console and in report.md
    warning = "only 8 documents in the reported rows to resample (fewer than 10)"
    assert f"**{warning}" in report_md and warning in res.stdout
    assert "speed" in report_md.lower()
    # another criterion picks by its own dev values
    res = cscore_main("report", str(sweep), "--bootstrap", "0", "--permutations", "0", "--select-by", "pearson",
                      "--out", str(tmp_path / "rep2"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sig = (tmp_path / "rep2" / f"{stem}_hyperparameters.md").read_text()
    assert "criterion:pearson" in sig and "dev pearson" in sig


def test_report_over_one_score_range_prints_no_range_bias_numbers(tmp_path, cscore_main):
    """One pair on one range (1-5): the range-bias table says it needs 2 ranges, with no bold 0.0000."""
    for job, (lam, t) in enumerate((lam, t) for lam in LAMS for t in TS):
        write_run(tmp_path / "sweep" / str(job), judge_frame(lam, t, 1, 5, "pA"), lam, t, 1, 5, "pA")
    out = tmp_path / "rep"
    res = cscore_main("report", str(tmp_path / "sweep"), "--bootstrap", "0", "--permutations", "0",
                      "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    md = (out / "summeval_judge_coherence_range_bias.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| Contra. (pA) |")]
    assert len(rows) == 1 and rows[0].count("needs ≥ 2 ranges") == 6 and rows[0].endswith("| 1/1 |")
    # the console may wrap the cell ("needs" / "≥ 2 ranges") at its width
    assert "0.0000" not in md and "≥ 2 ranges" in res.stdout


def write_token_run(folder: Path) -> None:
    """A finished token-method run (contrast) on another data set."""
    folder.mkdir(parents=True)
    frame = base_table().drop(columns="split")
    rng = np.random.default_rng(1)
    for v in ("expert", "amateur", "contrast"):
        frame[f"score.{v}"] = frame["human.coherence"] + rng.normal(size=len(frame))
    config = {"data": {"name": "demo"}, "split": {"use": "all"}, "pair": {"name": "tiny"},
              "method": {"name": "contrast", "variant": "contrast", "gamma": 0.1}}
    (folder / rundir.CONFIG).write_text(yaml.safe_dump(config))
    frame.to_parquet(folder / rundir.SCORES, index=False)
    metrics = {"cscore_version": __version__, "signature": "s", "data": {}, "n_items": len(frame),
               "split": {"use": "all"}, "n_truncated": 0, "truncated_ids": [], "temperatures": [1.0],
               "variants": [{"name": v, "method": v if v != "contrast" else "contrast", "params": {}}
                            for v in ("expert", "amateur", "contrast")],
               "models": {}, "correlations": [], "speed": {}, "nonfinite_scores": {}, "environment": {}}
    rundir.write_metrics(folder, metrics)


def test_judge_and_token_runs_in_one_folder_get_both_kinds_of_tables(tmp_path, cscore_main):
    root = tmp_path / "mixed"
    write_sweep(root / "judge", pairs=("pA",), split=False)
    write_token_run(root / "token")
    res = cscore_main("report", str(root), "--bootstrap", "20", "--permutations", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = root / "report"
    assert (out / "demo_quality.md").is_file() and (out / "summeval_judge_coherence_correlation.md").is_file()
    long = pd.read_csv(out / "demo_quality_long.csv")
    assert set(long["label"]) == {"tiny expert", "tiny amateur", "tiny contrast"}  # no judge rows there
    report_md = (out / "report.md").read_text()
    assert judge.NO_DEV in report_md and "SAME ITEMS" in report_md
    assert "NO DEV SPLIT" in res.stdout
    assert json.loads((root / "judge" / "0" / rundir.METRICS).read_text())["judge"]["score_range"] == [1, 5]


def test_the_judge_kendall_like_column_takes_the_report_threshold():
    """Human 1, 2, 3, 5, judge 1, 3, 2, 4: at threshold 1 all 6 pairs count and (2, 3) is
    discordant: 4/6; at the default 25 none counts (NaN). Other kinds ignore the threshold."""
    frame = pd.DataFrame({"human.x": [1.0, 2.0, 3.0, 5.0], "score.j": [1.0, 3.0, 2.0, 4.0]})
    criterion = judge.Criterion("spearman", "segment", "like", 1.0)
    assert criterion.stat("human.x", "kendall")(frame, "score.j") == pytest.approx(4 / 6)
    assert np.isnan(judge.Criterion("spearman", "segment", "like").stat("human.x", "kendall")(frame, "score.j"))
    assert criterion.stat("human.x", "spearman")(frame, "score.j") == pytest.approx(0.8)
    assert judge.Criterion("spearman", "segment", "b", None).like_threshold is None
