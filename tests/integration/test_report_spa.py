"""`cscore report --spa` end to end on translation runs written by hand (no model): WMT24's soft
pairwise accuracy per row and language pair, equal to a per-pair computation in the test, its
p-values written out, its settings printed, and on with the translation --paper presets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cscore.metaeval import side_tables, tables
from cscore.tests.support.cli import write_scored_run

SYSTEMS, SEGMENTS, PAIRS = 4, 12, ("de-en", "zh-en")
ROWS = ("expert", "amateur", "contrast")


def write_translation_run(folder: Path) -> pd.DataFrame:
    """A finished contrast run on two language pairs, SEGMENTS source segments x SYSTEMS systems each,
    scores on quarter points (exact in float32 and float64); row order: segment-major."""
    rng = np.random.default_rng(7)
    cells = [(lp, seg, sys) for lp in PAIRS for seg in range(SEGMENTS) for sys in range(SYSTEMS)]
    n = len(cells)
    frame = pd.DataFrame({"id": [f"{lp}/S{s}/{g}" for lp, g, s in cells],
                          "group": [f"{lp}/{g}" for lp, g, _ in cells],
                          "system": [f"S{s}" for _, _, s in cells], "task": "translation",
                          "lang_pair": [lp for lp, _, _ in cells],
                          "human.mqm": (rng.integers(-12, 1, size=n) + np.array([s for *_, s in cells])) / 4})
    for k, v in enumerate(ROWS):
        frame[f"score.{v}"] = frame["human.mqm"] + rng.integers(-4 * (k + 1), 4 * (k + 1) + 1, size=n) / 4
    params = {"gamma": 0.3, "t_exp": 1.0, "t_ama": 1.0}
    config = {"data": {"name": "wmt", "split_by": "lang_pair"}, "split": {"use": "all"}, "pair": {"name": "p"},
              "method": {"name": "contrast", "variant": "contrast", **params}}
    write_scored_run(folder, frame, config, params)
    return frame


def expected_spa(frame: pd.DataFrame, col: str, lp: str) -> float:
    """SPA pair by pair in float64: the flips are the uniforms of default_rng(4) above one half."""
    part = frame[frame["lang_pair"] == lp]
    h = part["human.mqm"].to_numpy().reshape(SEGMENTS, SYSTEMS).T  # segment-major rows: systems S0..S3
    m = part[col].to_numpy().reshape(SEGMENTS, SYSTEMS).T
    flips = np.where(np.random.default_rng(4).random(size=(1000, SEGMENTS), dtype=np.float32) > 0.5, 1.0, -1.0)
    errors = []
    for i in range(SYSTEMS):
        for j in range(i + 1, SYSTEMS):
            p = [np.mean(flips @ (x[i] - x[j]) >= (x[i] - x[j]).sum()) for x in (h, m)]
            errors.append(abs(p[0] - p[1]))
    return 1 - float(np.mean(errors))


@pytest.fixture
def translation_root(tmp_path):
    root = tmp_path / "runs"
    frame = write_translation_run(root / "0")
    return root, frame


def test_spa_tables_equal_a_pair_by_pair_computation(translation_root, tmp_path, cscore_main):
    root, frame = translation_root
    out = tmp_path / "rep"
    res = cscore_main("report", str(root), "--spa", "--bootstrap", "0", "--permutations", "0", "--out", str(out),
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "wmt: soft pairwise accuracy (WMT24, system level; 1000 sign-flip permutations, seed 4)" in res.stdout
    for ext in ("md", "csv", "tex"):
        assert (out / f"wmt_spa.{ext}").is_file()
    table = pd.read_csv(out / "wmt_spa.csv", index_col="label")
    assert list(table.columns) == [*PAIRS, "AVG"]
    longs = pd.read_csv(out / "wmt_spa_long.csv")
    for v in ROWS:
        want = [expected_spa(frame, f"score.{v}", lp) for lp in PAIRS]
        assert table.loc[f"p {v}", list(PAIRS)].tolist() == pytest.approx(want, abs=5e-4)  # 3 decimals shown
        long = longs[longs["label"] == f"p {v}"].set_index("target")
        assert long.loc[list(PAIRS), "value"].tolist() == pytest.approx(want, abs=1e-12)
        assert long.loc["AVG", "value"] == pytest.approx(np.mean(want), abs=1e-12)
        assert long.loc["de-en", "pce"] == pytest.approx(1 - want[0], abs=1e-12)
        assert long.loc["de-en", "n_systems"] == SYSTEMS and long.loc["de-en", "n_segments"] == SEGMENTS
    pv = pd.read_csv(out / "wmt_spa_pvalues.csv")
    assert len(pv) == len(ROWS) * len(PAIRS) * SYSTEMS * (SYSTEMS - 1) // 2
    assert set(pv.columns) >= {"label", "target", "system_a", "system_b", "p_human", "p_metric"}
    md = (out / "report.md").read_text()
    assert "soft pairwise accuracy" in md and "statistic:spa" in md and "seed:4" in md and "permutations:1000" in md


def test_spa_settings_and_presets(translation_root, tmp_path, cscore_main):
    root, frame = translation_root
    res = cscore_main("report", str(root), "--spa", "--spa-permutations", "50", "--spa-seed", "1", "--bootstrap", "0",
                      "--permutations", "0", "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "50 sign-flip permutations, seed 1" in res.stdout
    # without --spa: no table; --paper t5score (translation): on, with mt-metrics-eval's settings
    res = cscore_main("report", str(root), "--bootstrap", "0", "--permutations", "0", "--out", str(tmp_path / "b"),
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "b" / "wmt_spa.md").exists()
    res = cscore_main("report", str(root), "--paper", "t5score", "--bootstrap", "0", "--permutations", "0",
                      "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    long = pd.read_csv(tmp_path / "c" / "wmt_spa_long.csv").set_index(["label", "target"])
    assert long.loc[("p contrast", "zh-en"), "value"] == pytest.approx(expected_spa(frame, "score.contrast", "zh-en"))
    res = cscore_main("report", str(root), "--spa-seed", "3", "--out", str(tmp_path / "d"), cwd=tmp_path)
    assert res.returncode != 0 and "--spa-seed applies with --spa" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_spa_is_for_translation_data_and_says_why_a_cell_has_none():
    frame = pd.DataFrame({"group": ["g1", "g1", "g2", "g2", "g1", "g2"], "system": ["A", "B", "A", "B", "A", "A"],
                          "task": "translation", "lang_pair": ["de-en"] * 4 + ["zh-en"] * 2,
                          "human.mqm": [1.0, 2.0, 3.0, 1.0, 0.0, 1.0], "score.m": [1.0, 3.0, 2.0, 2.0, 5.0, 4.0]})
    ds = tables.Dataset("key", frame, ["human.mqm"], "lang_pair")
    ds.rows = {"m": {"run": None, "variant": "m", "params": {}, "main": True}}
    long, pvalues = side_tables.spa(ds, permutations=20, seed=0)
    got = long.set_index("target")
    assert np.isnan(got.loc["zh-en", "value"]) and "fewer than 2 systems" in got.loc["zh-en", "note"]
    # de-en: human A - B = (-1, 2), observed 1: p = the share of flips keeping segment 2 (about 1/2);
    # metric A - B = (-2, 0), observed -2: every flip reaches it, p = 1
    flips = np.where(np.random.default_rng(0).random(size=(20, 2), dtype=np.float32) > 0.5, 1.0, -1.0)
    p_h = np.mean(flips @ [-1.0, 2.0] >= 1.0)
    assert got.loc["de-en", "value"] == pytest.approx(1 - abs(p_h - 1.0))
    assert pvalues[["label", "target", "system_a", "system_b"]].values.tolist() == [["m", "de-en", "A", "B"]]
    frame["task"] = "summarization"
    assert all(t.empty for t in side_tables.spa(ds))
