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
        said = False
        while True:
            missing = pending()
            if not missing:
                return missing
            if not running(missing) and time.monotonic() - start >= self.grace:
                return pending()  # again: a sibling that ended between the two looks has marked its shard
            if not said:
                log.info("waiting for shard%s %s of %d", "s" * (len(missing) > 1), ", ".join(map(str, missing)),
                         self.count)
                said = True
            time.sleep(POLL)


@dataclass(frozen=True)
class ArrayTask(InProcess):
    """One task of a job array (SLURM, or a worker of ``runtime.devices`` with ``merge=False``)."""

    grace: float = START_GRACE
