"""Sharded statistics passes (runtime.shards, scorers/store/runner.py): a pass planned once, its whole
batches dealt to N shards that write checkpoint partials under the full pass's key, merged into the
ordinary cache entry: statistics bit-identical to the unsharded pass (causal, early exit, two
models, cross-family, seq2seq), the same cache key, a shard's partials only its own. The other
shards of a parent of runtime.devices are played in this process by the fake coordinator
(tests/support/coordinator.py): a worker that comes, one that lost a partial, one that never
comes. The CLI cases
(worker processes per device, a killed shard, a missing one) are in tests/system/test_shards_cli.py."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from cscore.errors import ShardsPending
from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR, deal
from cscore.scorers.store.runner import InProcess
from cscore.tests.support.coordinator import Scripted, ScriptedParent
from cscore.tests.support.texts import prompts_and_hyps
from cscore.tests.support.threads import in_threads

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUDGET = 160  # tokens per batch: a few items each, so a pass has many batches to deal


def texts(n: int = 30):
    return prompts_and_hyps(n, seed=7)


def assert_identical(a, b):
    assert list(a.stats) == list(b.stats)
    for head in a.stats:
        x, y = a.stats[head], b.stats[head]
        assert x.temperatures == y.temperatures
        for name in ("offsets", "token_ids", "logp", "logp_max"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), (head, name)  # bit-identical


def sharded(pair, inputs, root, count, temps=(1.0, 2.0), **kw):
    """Every shard of ``count`` one after another, as separate array tasks would run them (each
    but the last leaves the pass pending), then the merge by the last one."""
    cache = StatsCache(root, checkpoint_seconds=0)
    for k in range(count - 1):
        with pytest.raises(ShardsPending) as err:
            pair.statistics(inputs=inputs, temperatures=temps, token_budget=BUDGET, cache=cache,
                            coordinator=InProcess(count, k), **kw)
        assert err.value.missing == list(range(k + 1, count)) and err.value.count == count
        names = [p.name for p in (root / PARTIAL_DIR).rglob("*.npz")]
        assert names and all(n.startswith(tuple(f"s{j:03d}-" for j in range(k + 1))) for n in names)
    return pair.statistics(inputs=inputs, temperatures=temps, token_budget=BUDGET, cache=cache,
                           coordinator=InProcess(count, count - 1), **kw)


def unsharded(pair, inputs, root, temps=(1.0, 2.0), **kw):
    return pair.statistics(inputs=inputs, temperatures=temps, token_budget=BUDGET, cache=StatsCache(root), **kw)


def test_deal_balances_padded_tokens_and_every_shard_deals_alike():
    costs = [100, 90, 80, 40, 30, 30, 20, 10]
    assert deal(costs, 1) == [0] * 8
    owner = deal(costs, 2)  # longest first, each to the lighter shard (ties: the lower index)
    assert owner == [0, 1, 1, 0, 0, 0, 1, 1]
    loads = [sum(c for c, o in zip(costs, owner) if o == k) for k in range(2)]
    assert loads == [200, 200]
    assert deal(costs, 3) == [0, 1, 2, 2, 1, 0, 1, 2]


@pytest.fixture(scope="module")
def early_exit_pair(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32")  # one pass, two heads


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("share", [True, False])
def test_sharded_pass_is_bit_identical_and_stored_under_the_same_key(early_exit_pair, tmp_path, count, share):
    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one", prefix_sharing=share)
    got = sharded(early_exit_pair, inputs, tmp_path / "many", count, prefix_sharing=share)
    assert_identical(got, want)
    assert StatsCache(tmp_path / "many").keys() == StatsCache(tmp_path / "one").keys()
    assert not any((tmp_path / "many" / PARTIAL_DIR).rglob("*"))  # the merge removed the partials
    rep = got.reports["expert+amateur"]
    assert rep.shards == count and len(rep.shard_seconds) == count and rep.merge_seconds >= 0
    again = unsharded(early_exit_pair, inputs, tmp_path / "many", prefix_sharing=share)  # an unsharded reader
    whole = again.reports["expert+amateur"]  # the entry's report: the whole pass
    assert whole.cached and whole.shards == count
    assert whole.batches == want.reports["expert+amateur"].batches  # the same plan, dealt whole
    assert whole.tokens == want.reports["expert+amateur"].tokens
    # the last call's own: its shard's batches and tokens; the earlier calls' shards kept, their items resumed
    assert rep.kept_shards == list(range(count - 1)) and 0 < rep.batches < whole.batches
    assert 0 < rep.tokens < whole.tokens and 0 < rep.resumed < len(texts()[0])
    assert_identical(again, want)


def test_every_shard_in_one_process_and_a_shard_that_is_done_is_not_rerun(early_exit_pair, tmp_path):
    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one")
    cache = StatsCache(tmp_path / "many", checkpoint_seconds=0)
    with pytest.raises(ShardsPending):
        early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                   coordinator=InProcess(2, 1))
    calls = []
    with pytest.raises(ShardsPending) as err:
        early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                   coordinator=InProcess(2, 0, merge=False), progress=lambda name, n: calls.append(n))
    assert len(calls) == 1 and err.value.missing == []  # shard 0 ran; merge=False (a worker): its parent merges
    got = early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                     coordinator=InProcess(2), progress=lambda name, n: calls.append(n))
    assert len(calls) == 1  # both shards done: merged, no model run
    assert_identical(got, want)


def test_two_models_and_a_cross_family_pair(tiny_dirs, tmp_path):
    two = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32")
    inputs = two.encode(*texts(18))
    assert_identical(sharded(two, inputs, tmp_path / "a2", 2), unsharded(two, inputs, tmp_path / "a1"))
    cross = ModelPair.load(tiny_dirs.expert, tiny_dirs.other, dtype="float32")
    assert cross.aligned
    inputs = cross.encode(*texts(18))
    temps = (0.5, 1.0, 1.5, 2.0)  # contrast's defaults among them
    got, want = sharded(cross, inputs, tmp_path / "c3", 3, temps), unsharded(cross, inputs, tmp_path / "c1", temps)
    assert_identical(got, want)
    assert np.array_equal(got.score("contrast", gamma=0.3), want.score("contrast", gamma=0.3))


def test_seq2seq_pair(tmp_path):
    import importlib.util

    from cscore.tests.support import TESTS

    spec = importlib.util.spec_from_file_location("s2s_models", next(TESTS.rglob("test_seq2seq.py")))
    s2s = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(s2s)  # its tiny T5 builders
    build_t5, build_tokenizer = s2s.build_t5, s2s.build_tokenizer
    tok = build_tokenizer(None, "t5")
    pair = ModelPair.load(build_t5(tmp_path / "t5", tok, layers=2, d_model=32, seed=1),
                          build_t5(tmp_path / "t5s", tok, layers=1, d_model=16, seed=2), dtype="float32")
    prompts, hyps = texts(18)
    inputs = pair.encode(prompts, hyps)
    assert_identical(sharded(pair, inputs, tmp_path / "s3", 3), unsharded(pair, inputs, tmp_path / "s1"))


def test_a_damaged_or_foreign_partial_is_never_merged(early_exit_pair, tmp_path, caplog):
    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one")
    root = tmp_path / "many"
    cache = StatsCache(root, checkpoint_seconds=0)
    with pytest.raises(ShardsPending):
        early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                   coordinator=InProcess(2, 0))
    files = sorted((root / PARTIAL_DIR).rglob("s000-*.npz"))
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    files[0].write_bytes(bytes(data))  # damaged: its checksum no longer matches its name
    other = texts(31)
    foreign_inputs = early_exit_pair.encode(*other)
    with pytest.raises(ShardsPending):  # another configuration's shard 1: another key, another folder
        early_exit_pair.statistics(inputs=foreign_inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                   coordinator=InProcess(2, 1))
    with pytest.raises(ShardsPending) as err:  # shard 1 done; shard 0's damaged file: not merged
        early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                   coordinator=InProcess(2, 1))
    assert not cache.keys()
    assert "damaged" in caplog.text and files[0].name not in {p.name for p in root.rglob("*.npz")}
    assert err.value.missing == [0]
    # shard 0 again: its mark says done, but the merge finds items uncovered; it recomputes them
    got = early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                     coordinator=InProcess(2))
    assert_identical(got, want)


def test_two_sharded_runs_of_one_pass_at_once_compute_each_batch_once(tiny_dirs, tmp_path):
    """Two runs (threads here; the locks are the processes' too) each running every shard of the
    same pass on one cache: each shard is computed by one of them, the merge stored once, both
    get the unsharded statistics."""
    pairs = [ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32") for _ in range(2)]
    inputs = pairs[0].encode(*texts())
    want = unsharded(pairs[0], inputs, tmp_path / "one")
    cache_root = tmp_path / "many"
    done, got, errors = [], [None, None], []

    def count(name, n):
        return lambda k: done.append(k)

    def run(i):
        try:
            got[i] = pairs[i].statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET,
                                         cache=StatsCache(cache_root, checkpoint_seconds=0), coordinator=InProcess(2),
                                         progress=count)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    in_threads([functools.partial(run, i) for i in range(2)])
    assert not errors, errors
    assert sum(done) == len(inputs.items)  # every item computed once, by one run or the other
    for g in got:
        assert_identical(g, want)
    assert len(StatsCache(cache_root).keys()) == 1 and not any((cache_root / PARTIAL_DIR).rglob("*.npz"))


def worker_of(pair, inputs, root, damage=False):
    """play(k) of a fake parent (tests/support/coordinator.py): the worker of shard k computes its
    shard (merge=False: its parent merges); ``damage``: then one byte of its first partial flips."""

    def play(k):
        with pytest.raises(ShardsPending) as err:
            pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET,
                            cache=StatsCache(root, checkpoint_seconds=0), coordinator=InProcess(2, k, merge=False))
        assert err.value.missing == []  # its shard done; the merge is the parent's
        if damage:
            first = sorted((root / PARTIAL_DIR).rglob(f"s{k:03d}-*.npz"))[0]
            data = bytearray(first.read_bytes())
            data[len(data) // 2] ^= 0xFF
            first.write_bytes(bytes(data))
    return play


def test_the_parent_computes_its_shard_then_waits_for_its_workers_and_merges(early_exit_pair, tmp_path):
    """runtime.devices' layout in one process: the parent computes shard 0, then supervises; its
    "worker" (the fake's play) computes shard 1 only then, so the merge must come after it."""
    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one")
    root = tmp_path / "many"
    items: dict[int, list] = {0: []}
    parent = ScriptedParent(2, 0, play=worker_of(early_exit_pair, inputs, root), comes=(1,))
    got = early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET,
                                     cache=StatsCache(root, checkpoint_seconds=0), coordinator=parent,
                                     progress=lambda name, n: items[0].append)
    assert parent.waits == [("statistics (expert+amateur)", [1])]  # the parent's own shard done, shard 1 awaited
    assert_identical(got, want)
    assert 0 < sum(items[0]) < len(inputs.items)  # the parent's items: its own shard's only
    rep = got.reports["expert+amateur"]
    assert rep.shards == 2 and len(rep.shard_seconds) == 2 and rep.merge_seconds >= 0
    assert len(StatsCache(root).keys()) == 1 and not any((root / PARTIAL_DIR).rglob("*.npz"))


def test_a_worker_that_ends_without_its_shard_is_computed_by_the_parent(early_exit_pair, tmp_path, caplog):
    import logging

    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one")
    root = tmp_path / "many"
    parent = ScriptedParent(2, 0)  # its worker never comes (it ended well but marked nothing)
    with caplog.at_level(logging.INFO, logger="cscore"):
        got = early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET,
                                         cache=StatsCache(root, checkpoint_seconds=0), coordinator=parent)
    assert parent.waits == [("statistics (expert+amateur)", [1])]
    assert "shard 1 of 2 lost partials; this process re-runs what it lost" in caplog.text
    assert_identical(got, want)


def test_an_array_task_does_not_wait_for_a_sibling_of_a_token_pass(early_exit_pair, tmp_path):
    """A task of a job array ends pending at once (the last to end merges): it neither waits nor
    plays its sibling, whatever that one is doing."""
    inputs = early_exit_pair.encode(*texts())
    task = Scripted(2, 0, play=worker_of(early_exit_pair, inputs, tmp_path / "many"), comes=(1,))
    with pytest.raises(ShardsPending) as err:
        early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET,
                                   cache=StatsCache(tmp_path / "many", checkpoint_seconds=0), coordinator=task)
    assert err.value.missing == [1] and task.waits == []


def test_a_damaged_partial_of_a_worker_is_rerun_by_the_parent_only_what_it_lost(early_exit_pair, tmp_path, caplog):
    import logging

    inputs = early_exit_pair.encode(*texts())
    want = unsharded(early_exit_pair, inputs, tmp_path / "one")
    root = tmp_path / "many"
    cache = StatsCache(root, checkpoint_seconds=0)  # one partial per batch
    lengths = np.array([len(it.hyp_ids) for it in inputs.for_role("expert")])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    held = []  # the items in each of shard 1's partials, as its worker left them

    def play(k):
        worker_of(early_exit_pair, inputs, root)(k)
        for f in sorted((root / PARTIAL_DIR).rglob(f"s{k:03d}-*.npz")):
            with np.load(f) as z:
                held.append(np.unique(np.searchsorted(offsets, z["dest"], side="right") - 1).size)
        worker_of(early_exit_pair, inputs, root, damage=True)(k)  # done already: only its first partial damaged

    parent = ScriptedParent(2, 0, play=play, comes=(1,))
    with caplog.at_level(logging.INFO, logger="cscore"):
        got = early_exit_pair.statistics(inputs=inputs, temperatures=(1.0, 2.0), token_budget=BUDGET, cache=cache,
                                         coordinator=parent)
    assert len(held) >= 2 and parent.waits == [("statistics (expert+amateur)", [1])]
    assert "damaged" in caplog.text and "shard 1 of 2 lost partials" in caplog.text
    assert f"shard 1 of 2 resumed {sum(held) - held[0]} items from its partials" in caplog.text  # only what it lost
    assert_identical(got, want)
    assert len(cache.keys()) == 1 and not any((root / PARTIAL_DIR).rglob("*.npz"))
