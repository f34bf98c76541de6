"""Jobs run at once in threads (the tests of locks and of concurrent passes)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def in_threads(jobs: list[Callable[[], object]]) -> None:
    """Each job in its own thread, all started before any is waited for; returns when all have ended."""
    threads = [threading.Thread(target=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
