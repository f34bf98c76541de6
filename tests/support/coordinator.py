"""A coordinator for unit tests (the protocol of ``scorers/store/runner.py``): the other shards
are played in this process, one after another, at the moment this one would wait for them; no
subprocess, no thread, no sleep.

- ``Scripted``: shard ``index`` of ``count`` as a task of a job array (``merge`` as ``InProcess``).
  Where the pass waits while its siblings run (``wait_running``), the siblings in ``comes`` that
  are still missing are played (``play(k)``: the test runs sibling k's work, e.g. the same pass
  with ``InProcess(count, k, merge=False)``, and may then damage what it left); the others never
  come (a task that died or never started: not running, its grace over).
- ``ScriptedParent``: the parent of ``runtime.devices`` (``supervises``): its "workers" are the
  siblings in ``comes``, played when it supervises; the others end without their shard.

Both record each wait in ``waits``: (what waited, the shards ``pending()`` named then)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from cscore.scorers.store.runner import InProcess


@dataclass(frozen=True)
class Scripted(InProcess):
    """A task of a job array whose siblings ``comes`` are played (``play``) when it waits."""

    play: Callable[[int], object] | None = field(default=None, compare=False)
    comes: tuple[int, ...] = ()
    waits: list = field(default_factory=list, compare=False)

    def wait_running(self, pending: Callable[[], list[int]], running: Callable[[list[int]], bool]) -> list[int]:
        self.siblings("wait", pending)
        return pending()

    def siblings(self, what: str, pending: Callable[[], list[int]]) -> None:
        """Play the siblings of ``comes`` that ``pending()`` names, in order."""
        missing = pending()
        self.waits.append((what, missing))
        for k in self.comes:
            if k in missing and k != self.index:
                assert self.play is not None, "a coordinator whose siblings come needs play"
                self.play(k)


@dataclass(frozen=True)
class ScriptedParent(Scripted):
    """The parent of ``runtime.devices``: its workers (``comes``) run when it supervises."""

    supervises: ClassVar[bool] = True

    def supervise(self, pending: Callable[[], list[int]], label: str) -> None:
        self.siblings(label, pending)
