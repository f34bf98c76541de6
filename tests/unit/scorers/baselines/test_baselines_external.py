"""baseline=external: per-row scores computed outside cscore (COMET in its own environment) joined
by id into the run's score.<column> rows; rows without a score counted; bad files are one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest


def data(tmp_path):
    path = tmp_path / "r.csv"
    pd.DataFrame({"id": ["a", "b", "c", "d"], "src": ["s1 x", "s2 y", "s3 z", "s4 w"],
                  "hyp": ["h one", "h two", "h three", "h four"], "ref": ["h one", "h 2", "h three", "x"],
                  "q": [4, 1, 3, 2]}).to_csv(path, index=False)
    return ["data=table", f"data.path={path}", "data.task=translation", "data.lang_pair=de-en", "data.columns.id=id",
            "data.columns.source=src", "data.columns.hypothesis=hyp", "data.columns.reference=ref",
            "data.columns.human=q", "method=baseline", "runtime.progress=false"]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_scores_from_a_file_become_rows_beside_the_other_baselines(tmp_path, cscore_main):
    f = write_jsonl(tmp_path / "comet.jsonl", [{"id": "a", "comet": 0.91, "cometkiwi": 0.8},
                                                {"id": "b", "comet": 0.12, "cometkiwi": 0.3},
                                                {"id": "c", "comet": 0.75, "cometkiwi": None},
                                                {"id": "zz", "comet": 0.5, "cometkiwi": 0.5}])
    res = cscore_main("run", *data(tmp_path), "baseline=[chrf,external]", f"baseline.external.path={f}",
                      f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    scores = pd.read_parquet(tmp_path / "run" / "scores.parquet")
    assert [c for c in scores.columns if c.startswith("score.")] == ["score.chrf", "score.comet", "score.cometkiwi"]
    np.testing.assert_array_equal(scores["score.comet"], [0.91, 0.12, 0.75, np.nan])
    np.testing.assert_array_equal(scores["score.cometkiwi"], [0.8, 0.3, np.nan, np.nan])
    rec = json.loads((tmp_path / "run" / "metrics.json").read_text())["baselines"]["external"]
    assert rec["missing_score"] == {"count": 2, "ids": ["c", "d"]} and rec["ids_not_in_run"] == 1
    res = cscore_main("run", *data(tmp_path), "baseline=external", f"baseline.external.path={f}",
                      "baseline.external.columns=[comet]", f"hydra.run.dir={tmp_path / 'run2'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert [c for c in pd.read_parquet(tmp_path / "run2" / "scores.parquet").columns if c.startswith("score.")] == [
        "score.comet"]


@pytest.mark.parametrize("rows, extra, message", [
    (None, [], "give baseline.external.path=<file>"),
    ([{"id": "a", "comet": 1}], ["baseline.external.columns=[bleurt]"], "no score column 'bleurt'; it has comet"),
    ([{"seg": "a", "comet": 1}], [], "no 'id' column (set baseline.external.id_column)"),
    ([{"id": "a", "comet": 1}, {"id": "a", "comet": 2}], [], "id 'a' appears more than once"),
    ([{"id": "a", "comet": "high"}], [], "column 'comet', id 'a': 'high' is not a number"),
])
def test_bad_score_files_are_one_line_errors(tmp_path, cscore_main, rows, extra, message):
    path = [] if rows is None else [f"baseline.external.path={write_jsonl(tmp_path / 's.jsonl', rows)}"]
    res = cscore_main("run", *data(tmp_path), "baseline=external", *path, *extra, cwd=tmp_path)
    assert res.returncode != 0
    assert message in res.stderr.strip().splitlines()[-1]
