"""What a command is doing, as it goes: one ``Progress`` for the run's passes and the report's steps.

A pass's reporter (``progress_bar``) is a live rich bar on a terminal, elsewhere a plain line about
every 10 seconds (also while a batch runs long); it prints the pass's planned work first, and once
the pass has run a few seconds, the time it will take. Imports nothing of cscore's layers."""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator


class Progress:
    def __init__(self, bar: Any = None, factory: Callable[[str, int], Callable[[int], None]] | None = None,
                 console=None, every: float = 2.0):
        self.bar, self.factory, self._console, self.every = bar, factory, console, every
        self.start = time.perf_counter()

    @property
    def console(self):
        """Where the steps are said: the console given, else stderr (made when first needed)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True)
        return self._console

    @contextmanager
    def live(self) -> Iterator[Callable[[str, int], Callable[[int], None]] | None]:
        """The passes' ``factory`` while ``bar`` (if any) draws them."""
        if self.bar:
            self.bar.start()
        try:
            yield self.factory
        finally:
            if self.bar:
                self.bar.stop()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def say(self, text: str) -> None:
        self.console.print(f"[{self.elapsed():6.1f}s] {text}", highlight=False, markup=False, soft_wrap=True)

    @contextmanager
    def steps(self, title: str):
        """Yields ``update(done, total, what)`` for the steps of one table."""
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichBar

            bar = RichBar(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("{task.fields[what]}", markup=False), console=self.console,
                          transient=True)
            task = bar.add_task(title, total=None, what="")
            with bar:
                yield lambda done, total, what: bar.update(task, completed=done, total=total, what=what)
        else:
            last = -math.inf

            def update(done: int, total: int, what: str) -> None:
                nonlocal last
                now = time.perf_counter()
                if done in (1, total) or now - last >= self.every:
                    last = now
                    self.say(f"{title} {done}/{total}: {what}")

            yield update
        self.say(f"{title}: done")


EVERY = 10.0  # seconds between plain progress lines
SOON = 5.0  # seconds left under which the estimate is not worth a line
FIRST = 3.0  # seconds of a pass after which its share done gives the first estimate


def rate_text(rate: float) -> str:
    """A rate as the summary prints it: one decimal, two significant digits below 1 (0.044)."""
    if rate == float("inf"):
        return "-"
    return f"{rate:.2g}" if rate < 1 else f"{rate:.1f}"


def work_text(name: str, total: int, counts: dict) -> str:
    """``expert: 160 items, 25,652 tokens to run (70 rows)`` from what a pass announced: this
    command's work (``total`` items), with the items kept from before it (``kept``) named apart."""
    parts = [f"{total:,} items"]
    if counts.get("tokens") is not None:
        parts.append(f"{counts['tokens']:,} tokens")
    if counts.get("steps") is not None:
        parts.append(f"at most {counts['steps']:,} decode steps")
    notes = [counts["detail"]] if counts.get("detail") else []
    if counts.get("kept"):
        notes.append(f"{counts['kept']:,} more items done before this command, kept")
    tail = f" ({'; '.join(notes)})" if notes else ""
    return f"{name}: {', '.join(parts)} to run{tail}"


class Pass:
    """One pass's progress: called with the items it finished; ``work(**counts)`` says what it
    will do (tokens=, steps=, detail=) before it starts."""

    def __init__(self, owner: "Reporter", name: str, total: int):
        self.owner, self.name, self.total = owner, name, total
        self.start = self.last = owner.clock()
        self.done, self.announced, self.warmed = 0, False, False
        self.share = 0.0  # of the planned work, within a batch too (``part``)

    def __call__(self, n: int) -> None:
        self.owner.advance(self, n)

    def part(self, share: float) -> None:
        """The share of the planned work done (0 to 1), told within a batch: the first estimate once the pass
        has run FIRST seconds."""
        with self.owner.lock:
            self.share = min(max(share, 0.0), 1.0)
            seconds = self.owner.clock() - self.start
            if self.announced and not self.warmed and 0 < self.share < 1 and seconds >= FIRST:
                self.warmed = True
                self.owner.warm_up(self, seconds)

    def work(self, **counts) -> None:
        self.announced = True
        if counts.get("items") is not None:  # a part's or a resumed pass's: the items it runs are the total
            self.total = int(counts["items"])
            self.owner.resize(self)
        self.owner.emit(work_text(self.name, self.total, counts))


class Reporter:
    """What both kinds of progress share: passes, the work and warm-up lines (``emit``)."""

    def __init__(self, console, clock: Callable[[], float] = time.monotonic,
                 hint: Callable[[float], str | None] | None = None):
        self.console, self.clock, self.hint = console, clock, hint
        self.lock = threading.RLock()
        self.active: Pass | None = None

    def emit(self, text: str) -> None:
        with self.lock:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def factory(self, name: str, total: int) -> Pass:
        with self.lock:
            self.active = Pass(self, name, total)
            return self.active

    def advance(self, p: Pass, n: int) -> None:
        with self.lock:
            p.done += n
            if p.announced and not p.warmed and 0 < p.done < p.total:
                p.warmed = True
                self.warm_up(p, self.clock() - p.start)

    def resize(self, p: Pass) -> None:
        """The pass's total changed (a part's own items)."""

    def warm_up(self, p: Pass, seconds: float) -> None:
        """After the pass's first FIRST seconds or batch: the time it will take, and the slice if long."""
        share = p.share or (p.done / p.total if p.total else 0.0)  # as told (``part``), else items done of all
        left = seconds * (1 - share) / share
        if left < SOON:
            return
        at = (datetime.now() + timedelta(seconds=left)).strftime("%H:%M")
        first = f"{max(share, 0.01):.0%} of its work" if p.share else f"first {p.done} of {p.total} items"
        self.emit(f"{p.name}: {first} in {seconds:.1f}s; about {left:.0f}s left (done about {at})")
        tip = self.hint(seconds + left) if self.hint else None
        if tip:
            self.emit(tip)

    def stop(self) -> None:
        with self.lock:
            self.active = None


class Lines(Reporter):
    """Plain lines: one every ``every`` seconds (``tick``, also run by a heartbeat thread between ``start``
    and ``stop``, so a long batch still gets its lines) and one when the pass ends."""

    def __init__(self, console, every: float = EVERY, clock: Callable[[], float] = time.monotonic,
                 hint: Callable[[float], str | None] | None = None, heartbeat: bool = True):
        super().__init__(console, clock, hint)
        self.every, self.heartbeat = every, heartbeat
        self._stop: threading.Event | None = None

    def advance(self, p: Pass, n: int) -> None:
        with self.lock:
            super().advance(p, n)
            now = self.clock()
            if now - p.last >= self.every or p.done >= p.total:
                self.report(p, now)

    def report(self, p: Pass, now: float) -> None:
        """``scoring with expert: 48/160 items (30%), 4.1 items/s, 27s left`` (``in 39s`` when done); with the
        share of the work told within a batch (``part``): ``5% of the work, about 60s left``."""
        p.last, done, total, seconds, share = now, p.done, p.total, now - p.start, p.share
        rate = done / seconds if seconds > 0 and done else float("inf")
        part = f" ({100 * done / total:.0f}%)" if total else ""
        if done >= total:
            tail = f"done in {seconds:.0f}s"
        elif share > 0 and seconds > 0:
            tail = f"{max(share, 0.01):.0%} of the work, about {seconds * (1 - share) / share:.0f}s left"
        elif done and rate != float("inf"):
            tail = f"about {(total - done) / rate:.0f}s left"
        else:
            tail = f"{seconds:.0f}s so far, time left unknown"
        self.emit(f"scoring with {p.name}: {done}/{total} items{part}, {rate_text(rate)} items/s, {tail}")

    def tick(self) -> None:
        """A line for the running pass if none came for ``every`` seconds (at least a second)."""
        with self.lock:
            p, now = self.active, self.clock()
            if p is not None and p.done < p.total and now - p.last >= max(self.every, 1.0):
                self.report(p, now)

    def start(self) -> None:
        if self.heartbeat and self._stop is None:
            stop = self._stop = threading.Event()
            threading.Thread(target=self._beat, args=(stop,), daemon=True, name="cscore-progress").start()

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(min(1.0, max(0.25, self.every / 4))):
            self.tick()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        super().stop()


class Bar(Reporter):
    """The live rich bar (it redraws itself, elapsed time included); work and warm-up lines above it."""

    def __init__(self, console, hint=None, clock: Callable[[], float] = time.monotonic):
        from rich import progress as rich

        super().__init__(console, clock=clock, hint=hint)
        self.bar = rich.Progress(rich.TextColumn("[bold]{task.description}"), rich.BarColumn(),
                                 rich.MofNCompleteColumn(), rich.TimeElapsedColumn(), rich.TimeRemainingColumn(),
                                 console=console)
        self.tasks: dict[int, rich.TaskID] = {}

    def factory(self, name: str, total: int) -> Pass:
        p = super().factory(name, total)
        self.tasks[id(p)] = self.bar.add_task(f"scoring with {name}", total=total)
        return p

    def advance(self, p: Pass, n: int) -> None:
        super().advance(p, n)
        self.bar.advance(self.tasks[id(p)], n)

    def resize(self, p: Pass) -> None:
        self.bar.update(self.tasks[id(p)], total=p.total)

    def start(self) -> None:
        self.bar.start()

    def stop(self) -> None:
        self.bar.stop()
        super().stop()


def progress_bar(console, setting, hint: Callable[[float], str | None] | None = None):
    """(bar with start() / stop(), factory(name, total) -> advance(n)), or (None, None) when off.
    ``hint(seconds)``: a line suggesting a quicker run for a pass that takes that long, or None."""
    if setting is False or setting is None:
        return None, None
    every = EVERY if setting is True else float(setting)
    reporter = Lines(console, every, hint=hint) if not console.is_interactive else Bar(console, hint=hint)
    return reporter, reporter.factory
