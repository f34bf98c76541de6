"""What `scripts/reliability.py` and `scripts/reliability_shards.py` both use: a `cscore run`
subprocess with time-stamped output (`Job`), the checks of a run directory and a cache against the
uninterrupted run, and one row of the table (`Tally`). Imports neither of them."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.scorers.store.cache import CacheEntryError, StatsCache


class Job:
    """A `cscore run` subprocess whose output lines are time-stamped as they come."""

    def __init__(self, args: list[str], cwd: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        self.start = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.perf_counter() - self.start, line.rstrip("\n")))

    def seen(self, text: str) -> int:
        return sum(text in line for _, line in list(self.lines))

    def wait(self, timeout: float = 600) -> int:
        rc = self.proc.wait(timeout)
        self.reader.join(10)
        return rc

    @property
    def output(self) -> str:
        return "\n".join(line for _, line in self.lines)


def score_frame(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / rundir.SCORES)
    return df[["id", "hypothesis"] + rundir.score_columns(df.columns)]


def same_scores(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if (
        list(a.columns) != list(b.columns)
        or list(a["id"]) != list(b["id"])
        or list(a["hypothesis"]) != list(b["hypothesis"])
    ):
        return False
    return all(
        np.array_equal(a[c].to_numpy(), b[c].to_numpy(), equal_nan=True) for c in rundir.score_columns(a.columns)
    )


def entry_states(cache_dir: Path) -> tuple[set[str], int]:
    """(keys whose entry verifies, entries that do not verify: read as complete would be a finding)."""
    from cscore.cli.cache_cmd import payload_of

    cache = StatsCache(cache_dir)
    good, bad = set(), 0
    for key in cache.keys():
        try:
            cache.read(key, payload_of(cache.meta(key)))
            good.add(key)
        except (CacheEntryError, FileNotFoundError, TypeError):  # TypeError: meta.json names no payload type
            bad += 1
    return good, bad


class Tally:
    """One row of the table."""

    def __init__(self, case: str):
        self.case, self.iterations, self.signals = case, 0, 0
        self.states: collections.Counter = collections.Counter()
        self.findings: list[str] = []
        self.lost = self.recomputed = self.bad_read = self.unequal = self.resumed = 0

    def add(self, finding: str):
        self.findings.append(finding)

    def row(self) -> dict:
        return {"case": self.case, "iterations": self.iterations, "signals": self.signals,
                "states": dict(self.states), "lost": self.lost, "recomputed": self.recomputed,
                "corrupt_read_as_complete": self.bad_read, "final_differs": self.unequal,
                "items_resumed": self.resumed,
                "findings": self.findings}
