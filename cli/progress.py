"""Progress of a run's passes: a live rich bar on an interactive terminal; elsewhere (a log
file, SLURM output, a pipe) a plain line about every 10 seconds per pass (items done of all,
rate, time left) and one when the pass ends. ``runtime.progress``: true, false, or the seconds
between lines off a terminal."""

from __future__ import annotations

import time
from typing import Callable

EVERY = 10.0  # seconds between plain progress lines


class Lines:
    """The plain-line progress: ``factory(name, total)`` returns the pass's ``advance(n)``."""

    def __init__(self, console, every: float = EVERY, clock: Callable[[], float] = time.monotonic):
        self.console, self.every, self.clock = console, every, clock

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def factory(self, name: str, total: int) -> Callable[[int], None]:
        start = last = self.clock()
        done = 0

        def advance(n: int) -> None:
            nonlocal done, last
            done += n
            now = self.clock()
            if now - last >= self.every or done >= total:
                last = now
                self.console.print(line(f"scoring with {name}", done, total, now - start), markup=False,
                                   highlight=False, soft_wrap=True)

        return advance


def line(what: str, done: int, total: int, seconds: float) -> str:
    """``scoring with expert: 48/160 items (30%), 4.1 items/s, 27s left`` (``in 39s`` when done)."""
    rate = done / seconds if seconds > 0 else float("inf")
    share = f" ({100 * done / total:.0f}%)" if total else ""
    if done >= total:
        tail = f"done in {seconds:.0f}s"
    elif done and rate != float("inf"):
        tail = f"about {(total - done) / rate:.0f}s left"
    else:
        tail = "time left unknown"
    speed = f"{rate:.1f} items/s" if rate != float("inf") else "- items/s"
    return f"{what}: {done}/{total} items{share}, {speed}, {tail}"


def interval(setting) -> float | None:
    """Seconds between plain lines for a ``runtime.progress`` value (None: no progress)."""
    if setting is False or setting is None:
        return None
    if setting is True:
        return EVERY
    return float(setting)


def progress_bar(console, setting):
    """(bar with start() / stop(), factory(name, total) -> advance(n)), or (None, None) when off."""
    every = interval(setting)
    if every is None:
        return None, None
    if not console.is_interactive:
        lines = Lines(console, every)
        return lines, lines.factory
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=console)

    def factory(name: str, total: int):
        task = bar.add_task(f"scoring with {name}", total=total)
        return lambda n: bar.advance(task, n)

    return bar, factory
