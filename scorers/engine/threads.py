"""``runtime.threads``: how many threads torch uses on the CPU, set once at the start of a job.

null keeps torch's own default, an integer sets it, ``auto`` is the number of cores this process
may run on (its CPU affinity mask: a SLURM or ``taskset`` allocation, not the machine's count).
A job of an in-process multirun with null gets torch's default back, not the previous job's."""

from __future__ import annotations

import os

AUTO = "auto"
_DEFAULT: list[int] = []  # torch's own count, noted before cscore first changes it


def allowed_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks on this platform (macOS)
        return os.cpu_count() or 1


def wanted(value) -> int | None:
    """The thread count ``value`` (null, ``auto`` or an integer >= 1) asks for; None: torch's."""
    if value is None:
        return None
    return allowed_cores() if value == AUTO else int(value)


def apply(value) -> int:
    """Set torch's intra-op threads for ``value``; returns the count now in use."""
    import torch

    if not _DEFAULT:
        _DEFAULT.append(torch.get_num_threads())
    n = wanted(value)
    n = _DEFAULT[0] if n is None else n
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return torch.get_num_threads()
