"""The shard merge (scorers/store/runner.py) merges only when every item is covered, whatever the
marks say: a shard's mark that names only some of its partial files (one file gone, the mark
written without it) stores nothing, never an entry with uncovered tokens (the marks' own check,
that every file they name is there, does not see it). The merge then removes that mark
(``checkpoint.Place.check_items``: its files hold fewer items than it says), so the shard is missing
again, computes only what its partials lack, and the pass merges: never pending forever."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from cscore.errors import ShardsPending
from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR
from cscore.scorers.store.runner import InProcess

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32")


def inputs_of(pair):
    words = "the mayor opened a new bridge over the river and the council said it cost five million".split()
    rng = np.random.default_rng(3)
    prompts = ["Summarize: " + " ".join(rng.choice(words, size=int(rng.integers(4, 14)))) for _ in range(16)]
    hyps = [" ".join(rng.choice(words, size=int(rng.integers(2, 8)))) for _ in range(16)]
    return pair.encode(prompts, hyps)


def short_mark(pair, inputs, root):
    """Shard 0 done, then one of its partial files gone and its mark rewritten without it: the
    mark's own check passes. Returns (the run's keywords, the mark, the items the lost file held)."""
    cache = StatsCache(root, checkpoint_seconds=0)
    run = dict(inputs=inputs, temperatures=(1.0,), token_budget=96, cache=cache)
    with pytest.raises(ShardsPending):
        pair.statistics(**run, coordinator=InProcess(2, 0))
    files = sorted((root / PARTIAL_DIR).rglob("s000-*.npz"))
    assert len(files) >= 2  # shard 0's partials (one per batch), and its mark
    offsets = np.concatenate([[0], np.cumsum([len(it.hyp_ids) for it in inputs.items])])
    with np.load(files[0]) as z:
        lost = np.unique(np.searchsorted(offsets, z["dest"], side="right") - 1).size
    files[0].unlink()
    (mark,) = (root / PARTIAL_DIR).rglob("s000of002.done.json")
    record = json.loads(mark.read_text())
    assert files[0].name in record["files"]
    mark.write_text(json.dumps({**record, "files": [f for f in record["files"] if f != files[0].name]}))
    return run, mark, int(record["items"]), lost


def assert_identical(got, want):
    for head in want.stats:
        for name in ("offsets", "token_ids", "logp", "logp_max"):
            assert np.array_equal(getattr(got.stats[head], name), getattr(want.stats[head], name)), (head, name)


def test_a_lost_partial_of_a_done_shard_is_never_merged_and_the_shard_runs_again(pair, tmp_path, caplog):
    inputs = inputs_of(pair)
    want = pair.statistics(inputs=inputs, temperatures=(1.0,), token_budget=96, cache=StatsCache(tmp_path / "one"))
    run, mark, items, lost = short_mark(pair, inputs, tmp_path / "c")
    cache = run["cache"]
    with caplog.at_level(logging.WARNING), pytest.raises(ShardsPending) as err:  # shard 1, then the merge
        pair.statistics(**run, coordinator=InProcess(2, 1))
    assert not cache.keys() and err.value.count == 2
    assert err.value.missing == [0] and not mark.exists()  # the short mark removed: shard 0 is missing again
    assert f"shard 0 of 2 is marked done but its partials hold {items - lost} of its {items} items" in caplog.text
    with caplog.at_level(logging.INFO, logger="cscore"):
        got = pair.statistics(**run, coordinator=InProcess(2, 0))  # shard 0 again: only what it lacks, then the merge
    assert f"shard 0 of 2 resumed {items - lost} items from its partials" in caplog.text
    assert len(cache.keys()) == 1 and not list((tmp_path / "c" / PARTIAL_DIR).rglob("*.npz"))
    assert_identical(got, want)


def test_one_process_running_every_shard_recomputes_a_short_mark_in_the_same_call(pair, tmp_path, caplog):
    inputs = inputs_of(pair)
    want = pair.statistics(inputs=inputs, temperatures=(1.0,), token_budget=96, cache=StatsCache(tmp_path / "one"))
    run, mark, items, lost = short_mark(pair, inputs, tmp_path / "c")
    with caplog.at_level(logging.INFO, logger="cscore"):
        got = pair.statistics(**run, coordinator=InProcess(2))  # shard 1, the merge finds shard 0 short, shard 0, merge
    assert "shard 0 of 2 lost partials; this process re-runs what it lost" in caplog.text
    assert f"shard 0 of 2 resumed {items - lost} items from its partials" in caplog.text
    assert len(run["cache"].keys()) == 1
    assert_identical(got, want)
