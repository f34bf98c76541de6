"""Checkpoints of a statistics pass (scorers/store/checkpoint.py): a pass stopped after some batches (an
exception from its progress callback, Ctrl-C) resumes from the batches it completed, computes only
the rest, and ends with statistics bit-identical to an uninterrupted pass; a damaged or foreign
checkpoint file is recomputed, never trusted. The CLI cases (a real SIGKILL / SIGINT of `cscore
run`) are in tests/integration/test_reliability.py."""

from __future__ import annotations

import errno
import logging
import os

import numpy as np
import pytest

from cscore.scorers.api import ModelPair
from cscore.scorers.store.cache import StatsCache
from cscore.scorers.store.checkpoint import PARTIAL_DIR
from cscore.tests.support.texts import prompts_and_hyps

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUDGET = 160  # tokens per batch: a few items each, so a pass has many batches


def texts(n: int = 36):
    return prompts_and_hyps(n, seed=5)


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32")  # one pass, two heads


def stop_after(k: int, exc=KeyboardInterrupt):
    """A progress factory whose callback raises after the k-th batch."""
    seen = [0]

    def factory(name, total):
        def callback(n):
            seen[0] += 1
            if seen[0] == k:
                raise exc()
        return callback
    return factory


def partial_files(cache: StatsCache) -> list:
    folder = cache.root / PARTIAL_DIR
    return sorted(p for p in folder.rglob("*.npz")) if folder.is_dir() else []


def assert_identical(a, b):
    assert list(a.stats) == list(b.stats)
    for head in a.stats:
        x, y = a.stats[head], b.stats[head]
        for name in ("offsets", "token_ids", "logp", "logp_max"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), (head, name)  # bit for bit


@pytest.mark.parametrize("every,share", [(0.0, True), (3600.0, True), (0.0, False)])
def test_interrupted_pass_resumes_bit_identical(pair, tmp_path, caplog, every, share):
    """every=0: each batch is flushed as it completes; every=3600: nothing is flushed during the
    pass, only on the way out of the interrupted one."""
    prompts, hyps = texts()
    kw = dict(token_budget=BUDGET, prefix_sharing=share)
    ref = pair.statistics(prompts, hyps, cache=StatsCache(tmp_path / "ref"), **kw)
    total = ref.reports["expert+amateur"].batches
    assert total >= 6
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=every)
    with pytest.raises(KeyboardInterrupt) as stop:
        pair.statistics(prompts, hyps, cache=cache, progress=stop_after(3), **kw)
    assert cache.keys() == [] and partial_files(cache)
    assert len(partial_files(cache)) == (3 if every == 0 else 1)
    note = stop.value.__notes__[0]
    kept = int(note.split(": ")[1].split(" of ")[0])
    assert note == f"statistics (expert+amateur): {kept} of {len(prompts)} items kept in a checkpoint" and kept >= 3

    with caplog.at_level(logging.INFO, logger="cscore.scorers.api"):
        got = pair.statistics(prompts, hyps, cache=cache, **kw)
    report = got.reports["expert+amateur"]
    assert f"statistics (expert+amateur): resumed {kept} of {len(prompts)} items from a checkpoint" in caplog.text
    assert report.resumed == kept and report.batches == total - 3 and not report.cached
    assert_identical(got, ref)
    assert len(cache.keys()) == 1 and partial_files(cache) == []  # the entry holds it all now
    assert_identical(pair.statistics(prompts, hyps, cache=cache, **kw), ref)


class Recorder:
    """A progress factory that keeps what each pass announced (``work``) and the items it counted."""

    def __init__(self):
        self.said, self.counted = {}, {}

    def __call__(self, name, total):
        self.counted[name] = 0

        def callback(n):
            self.counted[name] += n
        callback.work = lambda **counts: self.said.setdefault(name, counts)
        return callback


def test_a_resumed_pass_announces_and_counts_only_this_commands_items(pair, tmp_path):
    """Issue 47, item 10: after an interrupt, the work to run leaves out the items the checkpoint
    kept (named apart), its tokens are those this command runs, and the progress counts to it."""
    from cscore.progress import work_text

    prompts, hyps = texts()
    kw = dict(token_budget=BUDGET, prefix_sharing=True)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0.0)
    with pytest.raises(KeyboardInterrupt):
        pair.statistics(prompts, hyps, cache=cache, progress=stop_after(3), **kw)
    seen = Recorder()
    report = pair.statistics(prompts, hyps, cache=cache, progress=seen, **kw).reports["expert+amateur"]
    said, kept = seen.said["expert+amateur"], report.resumed
    assert kept >= 3 and said["items"] == len(prompts) - kept and said["kept"] == kept
    assert said["tokens"] == report.tokens and seen.counted["expert+amateur"] == len(prompts) - kept
    assert work_text("expert+amateur", said["items"], said).startswith(
        f"expert+amateur: {len(prompts) - kept} items, {report.tokens:,} tokens to run (")
    assert work_text("expert+amateur", said["items"], said).endswith(
        f"; {kept} more items done before this command, kept)")


def test_an_error_keeps_the_completed_batches_too(pair, tmp_path):
    prompts, hyps = texts()
    ref = pair.statistics(prompts, hyps, token_budget=BUDGET)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=3600)
    with pytest.raises(RuntimeError):
        pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache, progress=stop_after(4, RuntimeError))
    assert len(partial_files(cache)) == 1
    got = pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache)
    assert got.reports["expert+amateur"].resumed >= 4
    assert_identical(got, ref)


def damage(files, foreign):
    """Truncate, flip a bit in, misname and replace with another pass's file: one each."""
    data = files[0].read_bytes()
    files[0].write_bytes(data[: len(data) // 2])
    data = bytearray(files[1].read_bytes())
    data[len(data) // 2] ^= 0x10
    files[1].write_bytes(bytes(data))
    seq, _ = files[2].name.split("-")
    files[2].rename(files[2].with_name(f"{seq}-{'0' * 64}.npz"))
    os.replace(foreign, files[3].with_name(foreign.name))
    files[3].unlink()


def test_damaged_or_foreign_checkpoint_files_are_recomputed(pair, tmp_path, caplog):
    prompts, hyps = texts()
    ref = pair.statistics(prompts, hyps, token_budget=BUDGET)
    other = StatsCache(tmp_path / "other", checkpoint_seconds=0)  # the same items, other temperatures
    with pytest.raises(KeyboardInterrupt):
        pair.statistics(prompts, hyps, token_budget=BUDGET, temperatures=(1.0,), cache=other, progress=stop_after(2))
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    with pytest.raises(KeyboardInterrupt):
        pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache, progress=stop_after(6))
    files = partial_files(cache)
    assert len(files) == 6
    damage(files, partial_files(other)[-1])
    with caplog.at_level(logging.INFO):
        got = pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache)
    assert caplog.text.count("is damaged") == 4  # each removed, its items recomputed
    report = got.reports["expert+amateur"]
    assert 0 < report.resumed < len(prompts) and report.batches == ref.reports["expert+amateur"].batches - 2
    assert_identical(got, ref)


def test_checkpoints_off_and_cache_clear(pair, tmp_path):
    prompts, hyps = texts(12)
    off = StatsCache(tmp_path / "off", checkpoint_seconds=None)
    with pytest.raises(KeyboardInterrupt):
        pair.statistics(prompts, hyps, token_budget=BUDGET, cache=off, progress=stop_after(2))
    assert partial_files(off) == []
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    with pytest.raises(KeyboardInterrupt):
        pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache, progress=stop_after(2))
    assert partial_files(cache)
    assert cache.clear() > 0 and partial_files(cache) == []


def test_a_cache_folder_under_a_file_is_one_warning(pair, tmp_path, caplog):
    (tmp_path / "notes.txt").write_text("a file")
    prompts, hyps = texts(6)
    ref = pair.statistics(prompts, hyps, token_budget=BUDGET)
    for root in (tmp_path / "notes.txt" / "cache", tmp_path / "notes.txt"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            got = pair.statistics(prompts, hyps, token_budget=BUDGET, cache=StatsCache(root))
        assert [r.getMessage() for r in caplog.records] == [
            f"statistics cache {root} cannot be a folder: {tmp_path / 'notes.txt'} is a file; statistics are "
            "neither read nor stored"]
        assert_identical(got, ref)
    assert (tmp_path / "notes.txt").read_text() == "a file"


def test_a_checkpoint_on_a_full_disk_is_one_warning_and_the_pass_goes_on(pair, tmp_path, monkeypatch, caplog):
    """ENOSPC injected at the checkpoint's write (a full disk): checkpointing stops for the pass
    with one warning; the statistics are those of a pass without a cache, and the entry is stored."""
    from cscore.scorers.store import checkpoint

    def no_space(path, data):
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected)", str(path))

    prompts, hyps = texts(12)
    ref = pair.statistics(prompts, hyps, token_budget=BUDGET)
    monkeypatch.setattr(checkpoint, "write_atomic", no_space)
    cache = StatsCache(tmp_path / "c", checkpoint_seconds=0)
    with caplog.at_level(logging.WARNING):
        got = pair.statistics(prompts, hyps, token_budget=BUDGET, cache=cache)
    assert_identical(got, ref)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith(f"statistics checkpoint {tmp_path / 'c' / PARTIAL_DIR}/") and warning.endswith(
        " cannot be written (No space left on device (injected)): this pass goes on without one")
    assert partial_files(cache) == [] and len(cache.keys()) == 1


@pytest.mark.parametrize("value,shown", [("-1", "-1.0"), ("abc", "'abc'"), ("true", "True")])
def test_checkpoint_seconds_is_checked_before_anything_runs(tmp_path, cscore_main, value, shown):
    res = cscore_main("run", f"cache.checkpoint_seconds={value}", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"cscore: error: cache.checkpoint_seconds must be a number >= 0 or null, got {shown}"]
    assert not list(tmp_path.iterdir())  # no run directory
