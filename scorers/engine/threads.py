"""``runtime.threads``: torch's CPU threads, set per job (``apply``) and around each pass (``using``);
``auto``: the cores free for this process, null: torch's own default."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

AUTO = "auto"
SMALL = 2  # cores: on a machine this small auto is one thread
_DEFAULT: list[int] = []  # torch's own count, noted before cscore first changes it
_JOB: dict = {}  # what the last ``apply`` asked for (value) and set (count)
_ASKED: dict = {}  # what the job asked for (``ask``: value), torch loaded or not


def free_cores(cores: int | None = None, load: float | None = None, allowed: int | None = None,
               env: dict | None = None) -> int:
    """``auto``'s count: the ``allowed`` cores, at most ``cores`` less ``load`` and ``OMP_NUM_THREADS``."""
    if allowed is None:
        try:
            allowed = len(os.sched_getaffinity(0))
        except AttributeError:  # no affinity masks on this platform (macOS)
            allowed = os.cpu_count() or 1
    cores = (os.cpu_count() or allowed) if cores is None else cores
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform (Windows)
            load = 0.0
    if cores <= SMALL:
        return 1
    n = max(1, min(allowed, round(cores - load)))
    cap = (os.environ if env is None else env).get("OMP_NUM_THREADS", "")
    return min(n, int(cap)) if cap.isdigit() and int(cap) >= 1 else n


def wanted(value) -> int | None:
    """The thread count ``value`` (null, ``auto`` or an integer >= 1) asks for; None: torch's."""
    if value is None:
        return None
    return free_cores() if value == AUTO else int(value)


def apply(value) -> int:
    """Set torch's intra-op threads for ``value``; returns the count now in use."""
    import torch

    if not _DEFAULT:
        _DEFAULT.append(torch.get_num_threads())
    n = wanted(value)
    n = _DEFAULT[0] if n is None else n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    _JOB.update(value=value, count=torch.get_num_threads())
    _ASKED.update(value=value, applied=True)
    return _JOB["count"]


def ask(value) -> None:
    """Note the job's ``runtime.threads`` without loading torch (``apply`` runs before work that computes)."""
    _ASKED.update(value=value, applied=False)


def in_use() -> int | None:
    """torch's intra-op threads now, or the count the job asked for where it did not apply it."""
    torch = sys.modules.get("torch")
    if torch is not None and _ASKED.get("applied", True):
        return torch.get_num_threads()
    n = wanted(_ASKED.get("value"))
    if n is None and torch is not None:  # an earlier job of this process loaded torch: its own count
        return _DEFAULT[0] if _DEFAULT else torch.get_num_threads()
    return n


@contextmanager
def using(value) -> Iterator[int]:
    """torch's intra-op threads as ``value`` asks for the duration; yields the count in use."""
    import torch

    before = torch.get_num_threads()
    job = _JOB.get("value", object()) == value and _JOB.get("count") == before
    n = before if job else wanted(value)
    if n is not None and n != before:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
