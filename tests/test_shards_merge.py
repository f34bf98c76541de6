"""The shard merge (scorers/store/shards.py) merges only when every item is covered: a shard's
mark says done but one of its partial files is gone (deleted, not damaged: the mark stays), so the
merge must leave the pass pending and store nothing, never an entry with uncovered tokens."""

from __future__ import annotations

import numpy as np
import pytest

from cscore.errors import ShardsPending
from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR
from cscore.scorers.store.shards import Sharding

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
        pair.statistics(**run, shards=Sharding(2, 0))
    files = sorted((tmp_path / "c" / PARTIAL_DIR).rglob("s000-*.npz"))
    assert files  # shard 0's partials, and its mark
    files[0].unlink()
    with pytest.raises(ShardsPending):  # shard 1 done, shard 0 marked done: items still uncovered
        pair.statistics(**run, shards=Sharding(2, 1))
    assert not cache.keys()
    got = pair.statistics(**run, shards=Sharding(2))  # the whole pass: the lost items recomputed
    want = pair.statistics(inputs=inputs, temperatures=(1.0,), token_budget=96, cache=StatsCache(tmp_path / "one"))
    for head in want.stats:
        assert np.array_equal(got.stats[head].logp, want.stats[head].logp)
