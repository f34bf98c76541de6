"""Who computes which shard of a sharded pass, who waits for whom and who merges
(``runtime.shards``): a pass runner (``shards.run_pass``, the judge's, the CDM generator's) is given
a coordinator and asks it; the shards themselves meet in a ``meeting.Place``.

- ``InProcess``: this process computes every shard not done yet, one after another (``index``
  None), or shard ``index`` alone, and merges once every shard is done;
- ``ArrayTask``: one task of a job array (a SLURM array task, a worker of ``runtime.devices``): its
  shard, then the merge if it is the last one (a worker leaves it to its parent: ``merge=False``);
  where it needs every shard's part (the judge's decodes read the first-step pass) it waits while a
  sibling runs, and ``grace`` seconds for one still starting up;
- ``LocalDevices`` (``run/workers.py``): the parent of ``runtime.devices``, which computes shard 0
  and supervises the workers of the others (``supervise``: until their marks are there, or one
  line naming a worker that failed).

Both wait in one loop, ``wait_for``: the shards missing polled until none is, or until the
caller's stop condition ends the wait.

The command line builds the one that fits (``run/workers.py``'s ``coordinator``: it alone reads the
environment); the library's own default is ``InProcess``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

log = logging.getLogger(__name__)

START_GRACE = 120.0  # seconds a task of a job array waits for siblings still starting up
POLL = 0.25


@dataclass(frozen=True)
class InProcess:
    """Shards ``count``; ``index`` the one this process computes (None: every shard not done yet);
    ``merge``: merge once every shard is done; ``grace``: see ``wait_running``."""

    count: int = 1
    index: int | None = None
    merge: bool = True
    grace: float = 0.0
    supervises: ClassVar[bool] = False  # a parent whose workers compute the other shards (``supervise``)

    @property
    def on(self) -> bool:
        return self.count > 1

    def todo(self) -> list[int]:
        return list(range(self.count)) if self.index is None else [self.index]

    def supervise(self, pending: Callable[[], list[int]], label: str) -> None:
        """A supervisor's wait before the merge (``LocalDevices``); nothing to wait for here."""

    def wait_running(self, pending: Callable[[], list[int]], running: Callable[[list[int]], bool]) -> list[int]:
        """Wait until ``pending()`` (the shards missing) is empty, while one of them runs
        (``running(missing)``) or for ``grace`` seconds (a sibling still starting). Returns the
        shards still missing."""
        start = time.monotonic()

        def still(missing: list[int]) -> bool:
            return running(missing) or time.monotonic() - start < self.grace

        def said(missing: list[int]) -> None:
            log.info("waiting for shard%s %s of %d", "s" * (len(missing) > 1), ", ".join(map(str, missing)),
                     self.count)

        return wait_for(pending, lambda: still, said=said)


def wait_for(pending: Callable[[], list[int]], look: Callable[[], Callable[[list[int]], bool]],
             poll: float = POLL, said: Callable[[list[int]], None] | None = None) -> list[int]:
    """The one wait for shards: every ``poll`` seconds, ``pending()`` (the shards missing) until it
    is empty or the caller's stop condition ends the wait. ``look()`` is taken before each
    ``pending()`` and gives that condition, ``still(missing)``: wait on (a sibling runs, the grace
    is not over; a worker process is alive), else stop; it may raise (a worker that failed). Looked
    at first, then the marks: a shard marks, then its process ends. ``said(missing)``: once, as the
    wait begins. Returns the shards still missing, looked at once more when stopped (a shard that
    ended between the two looks has marked)."""
    told = False
    while True:
        still = look()
        missing = pending()
        if not missing:
            return missing
        if not still(missing):
            return pending()
        if not told and said is not None:
            said(missing)
            told = True
        time.sleep(poll)


@dataclass(frozen=True)
class ArrayTask(InProcess):
    """One task of a job array (SLURM, or a worker of ``runtime.devices`` with ``merge=False``)."""

    grace: float = START_GRACE
