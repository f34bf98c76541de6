"""The wall time of the commands that should answer at once (issue 42: <= 3 s on an idle machine),
each run as a user types it in a fresh process, from an empty folder; the median of ``--repeats``.

    OMP_NUM_THREADS=1 python scripts/startup_times.py [--repeats 3]

Prints one line per command and the load average before and after (the figures go into
docs/measured/figures.yaml, ``startup``). What they import is checked by tests/test_torch_free.py."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = ["run --help", "run --cfg job", "report missing-folder", "list", "run method.gamma=abc",
            "run methdo.gamma=0.1"]


def seconds(args: list[str], cwd: str) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, capture_output=True)
    return time.perf_counter() - start, done.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"load before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as cwd:
        for command in COMMANDS:
            runs = [seconds(command.split(), cwd) for _ in range(args.repeats)]
            print(f"cscore {command}: {statistics.median(t for t, _ in runs):.2f} s (exit {runs[0][1]})", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
