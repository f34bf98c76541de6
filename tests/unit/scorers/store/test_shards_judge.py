"""The judge kinds sharded (runtime.shards, scorers/judge/partials.py): cd_judge's first-step pass
(its batches dealt to the shards as the token pass deals them, per-context partials under the full
pass's key) and its greedy decode trees (one prompt's tree never split, the prompts dealt by cost,
partials under each row's decode key), and cd_judge_released's decode batches. Merged, the cache
entries and the scores are the unsharded run's bit for bit (1, 2 and 3 shards); a damaged decode
partial is never merged; an interrupted shard resumes from its own partials. The waits (a task of
a job array for its siblings, the parent of runtime.devices for its workers) are played in this
process by the fake coordinator (tests/support/coordinator.py). The run directory end to end:
tests/integration/test_shards_judge_cli.py."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cscore.scorers.api import ModelPair  # noqa: E402
from cscore.scorers.engine.pass_options import PassOptions  # noqa: E402
from cscore.scorers.judge import decode as jd  # noqa: E402
from cscore.scorers.judge import judge  # noqa: E402
from cscore.scorers.judge.judge import first_step  # noqa: E402
from cscore.scorers.judge.stats import DecodedPaths, JudgeStats  # noqa: E402
from cscore.scorers.store.cache import StatsCache, stats_key  # noqa: E402
from cscore.scorers.store.checkpoint import PARTIAL_DIR  # noqa: E402
from cscore.scorers.store.runner import (  # noqa: E402
    Done,
    InProcess,  # noqa: E402
    Pending,
)
from cscore.tests.support.coordinator import Scripted, ScriptedParent  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DOCS = ["The mayor opened a new bridge over the river on Monday.", "The council said the library will close.",
        "A storm hit the coast and the match was called off.", "Rain"]
BUDGET = 96  # tokens per batch: several batches to deal
KW = dict(alpha=0.1, max_new_tokens=4, stop=None)
RULES = [0.0, 0.5, None]  # the main model alone, a contrast, the assistant alone


@pytest.fixture(scope="module")
def pair(judge_dirs):
    return ModelPair.load(judge_dirs["expert"], judge_dirs["amateur"], dtype="float32")


def contexts_of(pair, lo: int, hi: int):
    """Judge prompts (each document with several summaries: packed rows), their contexts and scale."""
    from cscore.scorers.judge.parse import continuation_prefixes, digit_tokens, score_tokens

    tok = pair.tokenizer
    prompts = [tok(f"Rate {lo}-{hi}. Document: {d} Summary: {s}. Score:", add_special_tokens=False)["input_ids"]
               for d in DOCS for s in ("it rained", "a bridge opened", "no")]
    tokens = score_tokens(tok, lo, hi)
    values = list(range(lo, hi + 1))
    prefixes = continuation_prefixes(tokens)
    contexts = [c for p in prompts for c in [p, *(p + list(x) for x in prefixes)]]
    scale = judge.Scale(values, [tuple(tokens[v]) for v in values], prefixes, len(prompts),
                        lambda t: tok.decode([t]), digit_tokens(tok) if prefixes else None)
    return prompts, contexts, scale


def parts_of(pair, contexts, scale) -> dict:
    return {"kind": "judge", "test": "shards", "ids": [len(c) for c in contexts], "values": list(scale.values),
            "prefixes": [list(p) for p in scale.prefixes], "budget": BUDGET}


def computer(pair, contexts, scale):
    opts = PassOptions(token_budget=BUDGET)

    def compute(checkpoint=None):
        return judge.compute(pair.expert.model, contexts, scale, asst=pair.amateur.model, pad_id=0, options=opts,
                             checkpoint=checkpoint)
    return compute


def stats_shards(pair, contexts, scale, cache, count):
    """Every shard of ``count`` one after another, as array tasks would (each but the last leaves
    the pass pending), the last one merging; count 1: the unsharded cached pass."""
    compute = computer(pair, contexts, scale)
    parts = parts_of(pair, contexts, scale)
    if count == 1:
        got, _ = cache.get_or_compute(parts, lambda key: ({"judge": compute()[0]}, None), JudgeStats)
        return got["judge"]
    for k in range(count - 1):
        pending = first_step(cache, parts, scale, compute, (pair.expert, pair.amateur), InProcess(count, k))
        assert isinstance(pending, Pending) and pending.missing == list(range(k + 1, count))
        assert list(cache.root.glob(f"{PARTIAL_DIR}/*/s{k:03d}-*.npz"))  # each shard computed batches of its own
    done = first_step(cache, parts, scale, compute, (pair.expert, pair.amateur), InProcess(count, count - 1))
    assert isinstance(done, Done)
    assert done.report.shards == count and len(done.report.shard_seconds) == count
    return done.stats["judge"]


def assert_same_stats(a: JudgeStats, b: JudgeStats) -> None:
    x, y = a.to_arrays(), b.to_arrays()
    assert sorted(x) == sorted(y)
    for name in x:
        assert same(x[name], y[name]), name


def same(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit for bit: dtype, shape and bytes (NaN where the other has NaN, as the unsharded pass)."""
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def entry_arrays(cache: StatsCache, key: str, payload) -> dict:
    (stats,) = cache.load(key, payload).stats.values()
    return stats.to_arrays()


@pytest.mark.parametrize("lo,hi", [(1, 5), (1, 10)])
def test_first_step_pass_sharded_is_bit_identical_under_the_same_key(pair, tmp_path, lo, hi):
    prompts, contexts, scale = contexts_of(pair, lo, hi)
    key = stats_key(parts_of(pair, contexts, scale))
    one = StatsCache(tmp_path / "one")
    want = stats_shards(pair, contexts, scale, one, 1)
    for count in (2, 3):
        cache = StatsCache(tmp_path / f"c{count}", checkpoint_seconds=0)
        got = stats_shards(pair, contexts, scale, cache, count)
        assert_same_stats(want, got)
        assert cache.keys() == one.keys() == [key]  # the ordinary entry, the unsharded key
        stored, ref = entry_arrays(cache, key, JudgeStats), entry_arrays(one, key, JudgeStats)
        assert all(same(stored[n], ref[n]) for n in ref)
        assert (cache.path(key) / "stats.npz").read_bytes() == (one.path(key) / "stats.npz").read_bytes()
        assert not list((tmp_path / f"c{count}" / PARTIAL_DIR).glob("*/*"))  # the partials removed
    if hi == 10 and len(scale.prefixes):
        assert want.chain_a.size  # the multi-token range's chain rows went through the partials too


def greedy(pair, stats, prompts, cache, key, shards=None, progress=None):
    return jd.greedy_paths(pair, stats, prompts, RULES, jd.Paths(**KW, judge_key=key, coordinator=shards), cache=cache,
                           progress=progress)


def decode_entries(cache: StatsCache) -> dict:
    out = {}
    for key in cache.keys():
        if cache.meta(key)["kind"] == "judge_decode":
            out[key] = cache.load(key, DecodedPaths).stats["paths"].to_arrays()
            assert (cache.path(key) / "stats.npz").read_bytes()  # the file the comparison reads back
    return out


def decoded_shards(pair, stats, prompts, cache, key, count):
    for k in range(count - 1):
        got = greedy(pair, stats, prompts, cache, key, InProcess(count, k))
        assert isinstance(got, Pending) and got.missing == list(range(k + 1, count)) and got.passes == ("decode",)
        assert len(list(cache.root.glob(f"{PARTIAL_DIR}/*/s{k:03d}-*.npz"))) >= len(RULES)  # its trees, every row
    return greedy(pair, stats, prompts, cache, key, InProcess(count, count - 1))


def unsharded_decode(pair, tmp_path):
    """(prompts, judge statistics, their key, the cache at tmp_path/one, greedy paths) of the
    unsharded 1-5 judge pass and decode: what the sharded decodes must equal."""
    prompts, contexts, scale = contexts_of(pair, 1, 5)
    one = StatsCache(tmp_path / "one")
    stats = stats_shards(pair, contexts, scale, one, 1)
    key = stats_key(parts_of(pair, contexts, scale))
    return prompts, stats, key, one, greedy(pair, stats, prompts, one, key)


def test_greedy_decode_trees_sharded_are_the_unsharded_entries(pair, tmp_path):
    prompts, stats, key, one, want = unsharded_decode(pair, tmp_path)
    ref = decode_entries(one)
    assert len(ref) == len(RULES)
    for count in (2, 3):
        cache = StatsCache(tmp_path / f"c{count}", checkpoint_seconds=0)
        got = decoded_shards(pair, stats, prompts, cache, key, count)
        assert got == want
        entries = decode_entries(cache)
        assert sorted(entries) == sorted(ref)  # the same keys
        for k, arrays in ref.items():
            assert all(same(arrays[n], entries[k][n]) for n in arrays)
            assert (cache.path(k) / "stats.npz").read_bytes() == (one.path(k) / "stats.npz").read_bytes()
        assert not list((tmp_path / f"c{count}" / PARTIAL_DIR).glob("*/*"))


def test_a_damaged_decode_partial_is_never_merged_and_its_shard_runs_again(pair, tmp_path, caplog):
    prompts, stats, key, one, want = unsharded_decode(pair, tmp_path)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    assert isinstance(greedy(pair, stats, prompts, cache, key, InProcess(2, 0)), Pending)
    files = sorted((tmp_path / "c" / PARTIAL_DIR).glob("*/s000-*.npz"))
    assert len(files) >= len(RULES)
    data = bytearray(files[0].read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: its checksum no longer matches its name
    files[0].write_bytes(bytes(data))
    got = greedy(pair, stats, prompts, cache, key, InProcess(2, 1))  # the last shard: shard 0 lost a file
    assert isinstance(got, Pending) and got.missing == [0]  # so it is missing again
    assert "is damaged (its checksum does not match its name)" in caplog.text
    assert not files[0].exists()
    assert greedy(pair, stats, prompts, cache, key, InProcess(2, 0)) == want  # shard 0 again, then the merge
    assert decode_entries(cache).keys() == decode_entries(one).keys()


def test_an_interrupted_decode_shard_resumes_from_its_partials(pair, tmp_path, caplog):
    import logging

    prompts, stats, key, one, want = unsharded_decode(pair, tmp_path)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    seen = []

    def stop_after_two(n):  # the progress of the decode: interrupted after its second tree
        seen.append(n)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        greedy(pair, stats, prompts, cache, key, InProcess(1 + 1, None), progress=stop_after_two)
    kept = list((tmp_path / "c" / PARTIAL_DIR).glob("*/s000-*.npz"))
    assert kept and not list((tmp_path / "c" / PARTIAL_DIR).glob("*/s000of002.done.json"))
    calls = []
    with caplog.at_level(logging.INFO, logger="cscore.scorers.store.runner"):
        got = greedy(pair, stats, prompts, cache, key, InProcess(2, None), progress=calls.append)
    assert got == want
    assert "shard 0 of 2 resumed 2 prompts from its partials" in caplog.text
    assert sum(calls) == len(prompts) - 2  # the two kept trees are not decoded again


def test_an_interrupted_first_step_shard_resumes_from_its_partials(pair, tmp_path, caplog):
    import logging

    prompts, contexts, scale = contexts_of(pair, 1, 5)
    want = stats_shards(pair, contexts, scale, StatsCache(tmp_path / "one"), 1)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    parts, opts = parts_of(pair, contexts, scale), PassOptions(token_budget=BUDGET)
    seen = []

    def stop_after_one(n):  # the pass's progress: interrupted after its first batch
        seen.append(n)
        raise KeyboardInterrupt

    def compute(checkpoint=None, progress=None):
        return judge.compute(pair.expert.model, contexts, scale, asst=pair.amateur.model, pad_id=0, options=opts,
                             checkpoint=checkpoint, progress=progress)

    with pytest.raises(KeyboardInterrupt):
        first_step(cache, parts, scale, lambda ck: compute(ck, stop_after_one), (pair.expert, pair.amateur),
                   InProcess(2, None))
    assert list(cache.root.glob(f"{PARTIAL_DIR}/*/s000-*.npz")) and not list(cache.root.glob(f"{PARTIAL_DIR}/*/*.json"))
    done = []
    with caplog.at_level(logging.INFO, logger="cscore.scorers.store.runner"):
        outcome = first_step(cache, parts, scale, lambda ck: compute(ck, done.append),
                             (pair.expert, pair.amateur), InProcess(2, None))
    assert isinstance(outcome, Done)
    got, report = outcome.stats["judge"], outcome.report
    assert_same_stats(want, got)
    assert f"shard 0 of 2 resumed {seen[0]} items from its partials" in caplog.text
    assert report.batches == compute()[1].batches - 1  # the kept batch is not computed again


# -- the siblings played by the fake coordinator (tests/support/coordinator.py): no process, no wait --

def first_step_of(pair, cache, lo=1, hi=5):
    """first_step(coordinator) of the 1-lo..hi judge pass on ``cache``, and the unsharded statistics."""
    prompts, contexts, scale = contexts_of(pair, lo, hi)
    want = stats_shards(pair, contexts, scale, StatsCache(cache.root.parent / "one"), 1)
    parts, compute = parts_of(pair, contexts, scale), computer(pair, contexts, scale)
    return (lambda shards: first_step(cache, parts, scale, compute, (pair.expert, pair.amateur), shards)), want


def test_a_task_waits_while_its_sibling_runs_then_merges_the_first_step(pair, tmp_path):
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    run, want = first_step_of(pair, cache)
    task = Scripted(2, 0, play=lambda k: run(InProcess(2, k, merge=False)), comes=(1,))
    got = run(task)
    assert task.waits == [("wait", [1])]  # its own shard done, it waited for shard 1
    assert isinstance(got, Done)
    assert_same_stats(want, got.stats["judge"])
    assert len(cache.keys()) == 1 and not list(cache.root.glob(f"{PARTIAL_DIR}/*/*"))


def test_a_sibling_that_dies_mid_shard_leaves_the_pass_pending_naming_it_then_resumes(pair, tmp_path, caplog):
    import logging

    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    prompts, contexts, scale = contexts_of(pair, 1, 5)
    run, want = first_step_of(pair, cache)
    parts, opts = parts_of(pair, contexts, scale), PassOptions(token_budget=BUDGET)

    def dies(n):  # the sibling's progress: killed after its first batch
        raise KeyboardInterrupt

    def sibling(k):
        def compute(checkpoint=None):
            return judge.compute(pair.expert.model, contexts, scale, asst=pair.amateur.model, pad_id=0,
                                 options=opts, checkpoint=checkpoint, progress=dies)
        with pytest.raises(KeyboardInterrupt):
            first_step(cache, parts, scale, compute, (pair.expert, pair.amateur), InProcess(2, k, merge=False))

    task = Scripted(2, 0, play=sibling, comes=(1,))
    got = run(task)
    assert isinstance(got, Pending) and got.missing == [1] and task.waits == [("wait", [1])]
    assert list(cache.root.glob(f"{PARTIAL_DIR}/*/s001-*.npz")) and not cache.keys()  # its partials kept
    with caplog.at_level(logging.INFO, logger="cscore.scorers.store.runner"):
        done = run(InProcess(2, 1))  # the sibling again: resumes from its partials, the last merges
    assert "shard 1 of 2 resumed" in caplog.text
    assert isinstance(done, Done)
    assert_same_stats(want, done.stats["judge"])


def test_a_sibling_that_never_comes_leaves_pending_naming_it(pair, tmp_path):
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    run, want = first_step_of(pair, cache)
    task = Scripted(3, 1)
    got = run(task)
    assert isinstance(got, Pending) and got.missing == [0, 2] and task.waits == [("wait", [0, 2])]
    assert isinstance(run(InProcess(3, 0)), Pending)
    done = run(InProcess(3, 2))
    assert isinstance(done, Done)
    assert_same_stats(want, done.stats["judge"])


def test_a_task_waits_for_its_siblings_decodes_then_merges(pair, tmp_path):
    prompts, stats, key, one, want = unsharded_decode(pair, tmp_path)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)

    def sibling(k):
        got = greedy(pair, stats, prompts, cache, key, InProcess(2, k, merge=False))
        assert isinstance(got, Pending) and got.missing == []  # its decodes done; the merge is the waiting task's

    task = Scripted(2, 0, play=sibling, comes=(1,))
    assert greedy(pair, stats, prompts, cache, key, task) == want
    assert task.waits == [("wait", [1])]
    assert decode_entries(cache).keys() == decode_entries(one).keys()


@pytest.mark.parametrize("damage", [False, True])
def test_the_parent_decodes_what_its_worker_did_not_leave(pair, tmp_path, damage):
    """The parent of runtime.devices: a worker that ended without its decodes (never came), or
    whose decode partial is damaged: the parent decodes that shard itself and merges."""
    prompts, stats, key, one, want = unsharded_decode(pair, tmp_path)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)

    def worker(k):
        assert isinstance(greedy(pair, stats, prompts, cache, key, InProcess(2, k, merge=False)), Pending)
        first = sorted((tmp_path / "c" / PARTIAL_DIR).glob(f"*/s{k:03d}-*.npz"))[0]
        data = bytearray(first.read_bytes())
        data[len(data) // 2] ^= 0xFF
        first.write_bytes(bytes(data))

    parent = ScriptedParent(2, 0, play=worker, comes=(1,) if damage else ())
    assert greedy(pair, stats, prompts, cache, key, parent) == want
    assert [w[1] for w in parent.waits] == [[1]]
    assert decode_entries(cache).keys() == decode_entries(one).keys()
