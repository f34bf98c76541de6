"""The one wait for shards (scorers/store/runner.py ``wait_for``): an array task's (while a
sibling runs, or its grace) and the parent of runtime.devices' (run/workers.py ``Workers.look``:
while a missing shard's worker is alive, one line if it failed). No model, no process started:
the marks are a list, the workers objects that answer ``poll``."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from cscore.errors import CscoreError
from cscore.scorers.store.runner import InProcess, wait_for


def test_the_stop_condition_is_looked_at_before_the_marks_and_the_marks_once_more_when_it_stops():
    calls: list[str] = []
    looks = iter([[0, 1], [1], [1], []])

    def pending() -> list[int]:
        calls.append("pending")
        return next(looks)

    def look():
        calls.append("look")
        n = calls.count("look")
        return lambda missing: n < 2  # the second look ends the wait

    assert wait_for(pending, look, poll=0.0) == [1]
    assert calls == ["look", "pending", "look", "pending", "pending"]
    assert wait_for(pending, look, poll=0.0) == []  # nothing missing: no stop condition asked
    assert calls[-2:] == ["look", "pending"]


def test_the_waiting_line_is_said_once_and_only_when_there_is_a_wait(caplog):
    looks = iter([[2], [2], [2], []])
    with caplog.at_level(logging.INFO, logger="cscore.scorers.store.runner"):
        assert InProcess(3, 0, grace=5.0).wait_running(lambda: next(looks), lambda missing: False) == []
        assert InProcess(3, 0).wait_running(lambda: [1, 2], lambda missing: False) == [1, 2]  # no grace, none runs
    assert [r.getMessage() for r in caplog.records] == ["waiting for shard 2 of 3"]


class Proc:
    """A worker process as ``Workers`` sees it: ``poll()`` its exit code (None: alive)."""

    def __init__(self, codes: list):
        self.codes = codes

    def poll(self):
        return self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]

    def wait(self):
        return self.codes[-1]


def workers_of(procs: dict, tmp_path: Path):
    from cscore.run.workers import Workers

    w = Workers.__new__(Workers)
    w.procs, w.devices, w.out, w.relays, w.failed = procs, ["cpu", "cpu", "cpu"], tmp_path, [], False
    w.command, w.overrides = ("cdm", "train"), ["cdm.train.x=1"]
    return w


def test_the_parent_waits_while_every_missing_shards_worker_is_alive(tmp_path):
    w = workers_of({1: Proc([None, None, 0]), 2: Proc([None, 0])}, tmp_path)
    marks = iter([[1, 2], [1], [], []])
    w.wait(lambda: next(marks), "pass")  # shard 2 marked and ended, then shard 1: no failure
    assert not w.failed


def test_a_worker_that_marks_then_fails_after_the_marks_were_read_is_not_a_failed_shard(tmp_path):
    """Its process is looked at before the marks: seen alive, then its mark is there."""
    w = workers_of({1: Proc([None, 3])}, tmp_path)
    marks = iter([[1], []])
    w.wait(lambda: next(marks), "pass")
    assert not w.failed


def test_a_worker_that_ended_without_its_mark_stops_the_run_in_one_line(tmp_path):
    w = workers_of({1: Proc([None, 0]), 2: Proc([None, 7])}, tmp_path)
    with pytest.raises(CscoreError, match=r"^shard 2 of 3 \(runtime.device=cpu\) failed with exit code 7 .*"
                                          r"`cscore cdm train cdm.train.x=1` finishes it"):
        w.wait(lambda: [1, 2], "pass")
    assert w.failed


def test_shard_zero_or_a_worker_that_ended_well_without_its_mark_ends_the_wait(tmp_path):
    w = workers_of({1: Proc([None, 0])}, tmp_path)
    assert w.wait(lambda: [0, 1], "pass") is None  # shard 0 is the parent's: nothing to wait for
    w = workers_of({1: Proc([None, 0])}, tmp_path)
    looks = SimpleNamespace(n=0)

    def pending() -> list[int]:
        looks.n += 1
        return [1]

    w.wait(pending, "pass")  # the worker ended well, its shard lost: the merge re-runs it
    assert looks.n == 3  # alive at the first look, ended at the second, the marks read once more
