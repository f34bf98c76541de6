"""Generative CDM, held out: `cdm.generate.limit` draws its positives round-robin across the groups
(a limit of 1, which can never give `cdm train` its 2 groups, is refused before anything loads);
`cdm train` records the rows it trained on; `cscore run method=cdm_gen` leaves exactly those rows
out of scoring, says so in one line and counts them in metrics.json."""

import json

import pandas as pd
import pytest

from cscore.tests.support.cli import tiny_args
from cscore.training import held_out
from cscore.training.negatives import round_robin


def test_round_robin_draws_across_groups():
    table = pd.DataFrame({"id": ["a1", "a2", "a3", "b1", "c1", "c2"], "group": ["a", "a", "a", "b", "c", "c"]})
    # by hand: the first of every group (a, b, c in table order), then the second of every group, ...
    assert list(round_robin(table, 1)["id"]) == ["a1"]
    assert list(round_robin(table, 2)["id"]) == ["a1", "b1"]
    assert list(round_robin(table, 4)["id"]) == ["a1", "b1", "c1", "a2"]
    assert list(round_robin(table, 10)["id"]) == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert list(round_robin(table, None)["id"]) == list(table["id"])  # no limit: all, in table order
    # groups interleaved in the table: a group's rank counts its own rows only
    mixed = pd.DataFrame({"id": ["x1", "y1", "x2", "y2", "z1"], "group": ["x", "y", "x", "y", "z"]})
    assert list(round_robin(mixed, 3)["id"]) == ["x1", "y1", "z1"]
    assert list(round_robin(mixed, 4)["id"]) == ["x1", "y1", "z1", "x2"]


def test_trained_mask_matches_id_group_and_text():
    items = [{"id": "d1-a", "group": "d1", "text": "A cat sat.", "label": 1},
             {"id": "d1-a#neg0", "group": "d1", "text": "A dog sat.", "label": 0},
             {"id": "d2-a", "group": "d2", "text": "Rain fell.", "label": 1},
             {"id": "d3-a", "group": "d3", "text": "Sun rose.", "label": 1}]
    record = held_out.trained_rows(items, [False, False, True, False], {"name": "demo"})
    assert record["n"] == 2 and set(record["rows"]) == {"d1-a", "d3-a"}  # d2 held out, negatives are no rows
    examples = pd.DataFrame({"id": ["d1-a", "d2-a", "d3-a", "d3-a", "d1-b"],
                             "group": ["d1", "d2", "d3", "d9", "d1"],
                             "hypothesis": ["A cat sat.", "Rain fell.", "Sun rose!", "Sun rose.", "A cat sat."]})
    # trained; held out; same id, other text; same id and text, other group; other id
    assert held_out.trained_mask(record, examples).tolist() == [True, False, False, False, False]


def test_held_out_rows_leave_out_refuse_all_and_warn_without_a_record(caplog):
    from cscore.errors import ConfigError
    from cscore.run.kinds.base import Loaded
    from cscore.run.kinds.discriminator import held_out_rows

    examples = pd.DataFrame({"id": ["a", "b", "c"], "group": ["g", "g", "h"], "hypothesis": ["x", "y", "z"]})
    loaded = Loaded(examples, None, 3)
    items = [{"id": i, "group": g, "text": t, "label": 1} for i, g, t in zip(examples["id"], examples["group"],
                                                                          examples["hypothesis"])]
    some = {"kind": "pooler", "trained_rows": held_out.trained_rows(items, [False, True, True], None)}
    kept, n = held_out_rows("cdm_gen", some, loaded)
    assert n == 1 and list(kept.examples["id"]) == ["b", "c"] and list(kept.examples.index) == [0, 1]
    assert "cdm_gen: 1 row the pooler was trained on is excluded from scoring" in caplog.text
    every = {"kind": "classifier", "trained_rows": held_out.trained_rows(items, [False] * 3, None)}
    with pytest.raises(ConfigError, match="all 3 rows of this data are rows the classifier was trained on"):
        held_out_rows("cdm_gen", every, loaded)
    kept, n = held_out_rows("cdm_gen", {"kind": "pooler"}, loaded)  # trained before the record
    assert n is None and kept is loaded and "no record of the rows it was trained on" in caplog.text


def test_a_limit_of_one_is_refused_before_anything_loads(tmp_path, cscore_main):
    res = cscore_main("cdm", "generate", "data=demo", "cdm.generate.limit=1",
                      f"cdm.generate.out={tmp_path / 'gen'}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "cdm.generate.limit=1 takes positives of one group" in res.stderr
    assert "give cdm.generate.limit=2 or more" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gen").exists() and not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_generate_train_run_leaves_the_trained_rows_out(tiny_dirs, tmp_path, cscore_main):
    """generate (limit 4) -> train (pooler) -> run on the demo set: the 4 positives come from 4
    documents; the pooler's train groups' positives are not scored."""
    from cscore.data.registry import load_config

    demo, _ = load_config({"name": "demo"})
    common = tiny_args(tiny_dirs, "data=demo", f"cache.dir={tmp_path / 'stats'}")
    gen, pooler = tmp_path / "gen", tmp_path / "pooler"
    res = cscore_main("cdm", "generate", *common, "cdm.generate.limit=4", "cdm.generate.max_span=4",
                      f"cdm.generate.out={gen}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    recs = [json.loads(line) for line in (gen / "negatives.jsonl").read_text().splitlines()]
    first_groups = list(demo["group"].unique()[:4])
    firsts = [demo[demo["group"] == g]["id"].iloc[0] for g in first_groups]
    assert [r["source_id"] for r in recs] == firsts  # one positive from each of the first 4 documents
    res = cscore_main("cdm", "train", *common, f"cdm.train.input={gen}", f"cdm.train.out={pooler}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((pooler / "cscore_discriminator.json").read_text())
    held = set(meta["split"]["held_out_groups"])
    trained = [r["source_id"] for r in recs if r["group"] not in held]
    assert len(held) == 1 and len(trained) == 3  # round(0.2 * 4 groups) = 1 held out
    assert sorted(meta["trained_rows"]["rows"]) == sorted(trained)
    run = tmp_path / "run"
    res = cscore_main("run", *common, "method=cdm_gen", f"model={pooler}", f"hydra.run.dir={run}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "cdm_gen: 3 rows the pooler was trained on are excluded from scoring" in res.stdout + res.stderr
    metrics = json.loads((run / "metrics.json").read_text())
    scores = pd.read_parquet(run / "scores.parquet")
    assert metrics["discriminator"]["excluded_trained_rows"] == 3
    assert metrics["n_items"] == len(scores) == 160 - 3 and not set(scores["id"]) & set(trained)
    # other data: the same rows under data=table, one trained row's text changed -> only the other two match
    table = demo[demo["group"].isin(first_groups)].copy()
    table.loc[table["id"] == trained[0], "hypothesis"] += " Indeed."
    path = tmp_path / "table.jsonl"
    table[["id", "group", "system", "source", "hypothesis", "reference", "human.overall"]].to_json(
        path, orient="records", lines=True)
    other = tmp_path / "other"
    res = cscore_main("run", *tiny_args(tiny_dirs, "data=table", f"data.path={path}", "data.task=summarization",
                                        f"cache.dir={tmp_path / 'stats'}"),
                      "method=cdm_gen", f"model={pooler}", f"hydra.run.dir={other}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    metrics = json.loads((other / "metrics.json").read_text())
    assert metrics["discriminator"]["excluded_trained_rows"] == 2 and metrics["n_items"] == 32 - 2
    assert trained[0] in set(pd.read_parquet(other / "scores.parquet")["id"])
