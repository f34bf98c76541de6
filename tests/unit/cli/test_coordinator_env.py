"""The coordinator of a process is read from the settings and the environment in one place
(run/workers.py's ``coordinator``): a shard of its own, a SLURM array task (it waits for siblings
starting up), a worker of runtime.devices (its parent merges)."""

from __future__ import annotations

from types import SimpleNamespace

from cscore.scorers.store.runner import START_GRACE, ArrayTask, InProcess


def test_the_coordinator_of_a_process_is_read_from_the_environment_in_one_place(monkeypatch):
    from cscore.run import workers

    runtime = SimpleNamespace(shards=3, shard=1)
    for var in (workers.WORKER_ENV, "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)
    assert workers.coordinator(runtime) == InProcess(3, 1)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    got = workers.coordinator(runtime)
    assert isinstance(got, ArrayTask) and got.merge and got.grace == START_GRACE and got.todo() == [1]
    monkeypatch.setenv(workers.WORKER_ENV, "1")  # a worker of runtime.devices: its parent merges
    assert workers.coordinator(runtime) == ArrayTask(3, 1, merge=False)
    monkeypatch.setenv(workers.WORKER_ENV, "1234.5")  # the parent's start: the worker's shards are its command's
    assert workers.coordinator(runtime).since == 1234.5 and not workers.array_task()
    assert not InProcess(3, 1).supervises and InProcess(3).todo() == [0, 1, 2]
