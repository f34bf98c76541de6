"""What a command is doing, as it goes: one ``Progress`` for the run's passes and the report's steps.

A run hands its passes ``factory(name, total)`` (each pass gets its ``advance(n)``) inside
``live()``, which starts and stops ``bar``: both come from ``cli.progress.progress_bar`` (a live
rich bar on a terminal, plain lines elsewhere), and the kinds print nothing themselves. The report
says its steps on stderr (``say``, ``steps``): a live bar on a terminal; elsewhere (logs, pipes)
one line for the first and last step of a table and at most one every ``every`` seconds.

This module imports nothing of cscore's layers (cli, metaeval, scorers, data): all of them use it."""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class Progress:
    def __init__(self, bar: Any = None, factory: Callable[[str, int], Callable[[int], None]] | None = None,
                 console=None, every: float = 2.0):
        self.bar, self.factory = bar, factory
        self._console = console
        self.every = every
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
            with self._bar(title) as update:
                yield update
        else:
            yield self._lines(title)
        self.say(f"{title}: done")

    @contextmanager
    def _bar(self, title: str):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[what]}", markup=False), console=self.console,
                  transient=True)
        task = bar.add_task(title, total=None, what="")
        with bar:
            yield lambda done, total, what: bar.update(task, completed=done, total=total, what=what)

    def _lines(self, title: str):
        last = -math.inf

        def update(done: int, total: int, what: str) -> None:
            nonlocal last
            now = time.perf_counter()
            if done in (1, total) or now - last >= self.every:
                last = now
                self.say(f"{title} {done}/{total}: {what}")

        return update
