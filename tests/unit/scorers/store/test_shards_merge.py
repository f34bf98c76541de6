"""The shard merge (scorers/store/shards.py) merges only when every item is covered, whatever the
marks say: a shard's mark that names only some of its partial files (one file gone, the mark
written without it) leaves the pass pending and stores nothing, never an entry with uncovered
tokens (the marks' own check, that every file they name is there, does not see it)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cscore.errors import ShardsPending
from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR
from cscore.scorers.store.coordinator import InProcess

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_lost_partial_of_a_done_shard_is_never_merged(tiny_dirs, tmp_path):
    pair = ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32")
    words = "the mayor opened a new bridge over the river and the council said it cost five million".split()
    rng = np.random.default_rng(3)
    prompts = ["Summarize: " + " ".join(rng.choice(words, size=int(rng.integers(4, 14)))) for _ in range(16)]
    hyps = [" ".join(rng.choice(words, size=int(rng.integers(2, 8)))) for _ in range(16)]
    inputs = pair.encode(prompts, hyps)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    run = dict(inputs=inputs, temperatures=(1.0,), token_budget=96, cache=cache)
    with pytest.raises(ShardsPending):
        pair.statistics(**run, shards=InProcess(2, 0))
    files = sorted((tmp_path / "c" / PARTIAL_DIR).rglob("s000-*.npz"))
    assert files  # shard 0's partials, and its mark
    files[0].unlink()
    (mark,) = (tmp_path / "c" / PARTIAL_DIR).rglob("s000of002.done.json")
    record = json.loads(mark.read_text())
    assert files[0].name in record["files"]
    mark.write_text(json.dumps({**record, "files": [f for f in record["files"] if f != files[0].name]}))
    with pytest.raises(ShardsPending) as err:  # shard 1 done, shard 0 marked done: items still uncovered
        pair.statistics(**run, shards=InProcess(2, 1))
    assert not cache.keys() and err.value.count == 2
