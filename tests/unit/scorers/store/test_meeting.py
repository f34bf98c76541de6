"""Where the shards meet (scorers/store/checkpoint.py ``Place``: one path scheme for partials, marks and locks)
and who waits for whom (scorers/store/runner.py; run/workers.py's ``coordinator`` picks one
from the environment). No model: the marks and locks are files."""

from __future__ import annotations

import json
import threading
import time

import pytest

from cscore.files import file_lock
from cscore.scorers.store.checkpoint import Place
from cscore.scorers.store.runner import InProcess


def test_one_path_scheme_for_a_pass_in_the_cache_and_for_a_folder_of_its_own(tmp_path):
    place = Place.of_cache(tmp_path, "abc", 3)
    assert place.folder == tmp_path / ".partial" / "abc"
    assert place.mark_path(1) == tmp_path / ".partial" / "abc" / "s001of003.done.json"
    assert place.lock_path(2) == tmp_path / ".locks" / "abc.s002.lock"
    assert place.lock_path() == tmp_path / ".locks" / "abc.lock"  # the merge's: the cache entry's own lock
    gen = Place.of_folder(tmp_path / ".shards", 2)
    assert gen.mark_path(0) == tmp_path / ".shards" / "s000of002.done.json"
    assert (gen.lock_path(1), gen.lock_path()) == (tmp_path / ".shards" / "shards.s001.lock",
                                                   tmp_path / ".shards" / "shards.lock")


def test_a_mark_counts_while_its_files_are_there_and_a_short_one_is_removed(tmp_path, caplog):
    place = Place.of_cache(tmp_path, "k", 2)
    place.folder.mkdir(parents=True)
    for name in ("s000-000000-aa.npz", "s000-000001-bb.npz", "s001-000000-cc.npz"):
        (place.folder / name).write_bytes(b"x")
    place.mark(0, {"items": 6})
    place.mark(1, {"items": 3})
    assert json.loads(place.mark_path(0).read_text())["files"] == ["s000-000000-aa.npz", "s000-000001-bb.npz"]
    assert sorted(place.marks()) == [0, 1] and place.missing() == []
    (place.folder / "s001-000000-cc.npz").unlink()  # a damaged file removed: its shard's mark no longer counts
    assert place.missing() == [1]
    place.mark_path(1).write_text("{not json")
    assert place.missing() == [1]
    assert place.check_items({0: 4}, "statistics (t)") == [0]  # its files hold 4 of the 6 items it says
    assert not place.mark_path(0).exists() and place.missing() == [0, 1]
    assert "shard 0 of 2 is marked done but its partials hold 4 of its 6 items" in caplog.text
    place.mark(0, {"models": None})  # a mark without an item count (cdm generate's) is not checked
    assert place.check_items({}, "cdm generate") == [] and place.missing() == [1]


def test_a_shard_runs_while_its_lock_is_held(tmp_path):
    place = Place.of_cache(tmp_path, "k", 2)
    place.lock_path(1).parent.mkdir(parents=True)
    assert not place.running([0, 1])
    with place.lock(1):
        assert place.running([1]) and not place.running([0])
    assert not place.running([1])


def test_a_sibling_that_ends_between_the_two_looks_is_not_reported_missing():
    """The missing shards are read, then whether one runs: a sibling that marks its shard and lets go
    of its lock in between is done, not missing (the shards are read again once none runs)."""
    looks = iter([[0, 1], [0]])  # before the sibling's mark, after it
    assert InProcess(2, 0).wait_running(lambda: next(looks), lambda missing: False) == [0]


def test_wait_running_waits_while_a_sibling_holds_its_lock_then_returns_what_is_missing(tmp_path):
    place = Place.of_cache(tmp_path, "k", 2)
    place.folder.mkdir(parents=True)
    place.lock_path(1).parent.mkdir(parents=True)
    assert InProcess(2, 0).wait_running(place.missing, place.running) == [0, 1]  # nobody runs: no wait
    held = threading.Event()

    def sibling():
        with file_lock(place.lock_path(1)):
            held.set()
            time.sleep(0.5)
            place.mark(1, {})

    thread = threading.Thread(target=sibling)
    thread.start()
    held.wait()
    start = time.monotonic()
    assert InProcess(2, 0).wait_running(place.missing, place.running) == [0]  # shard 1 came; 0 is this one's
    assert time.monotonic() - start >= 0.3
    thread.join()


@pytest.mark.parametrize("count", [1, 2])
def test_a_coordinator_of_one_shard_is_off(count):
    assert InProcess(count).on == (count > 1)
