"""Run the test tiers in random orders, to find tests that depend on which tests ran before them.

    python scripts/random_order.py                               # fast tier, seeds 1 2 3, two workers
    python scripts/random_order.py --tier slow --seeds 11        # the slow tier once
    python scripts/random_order.py --workers 0 --seeds 5         # one process (no xdist)

Each run is ``python -m pytest -q -m TIER --random-order-seed=SEED [-n WORKERS]`` (the
pytest-random-order plugin of the test extra: the modules in a random order and the tests of each
module in a random order, so a module-scoped fixture is still built once). A test that passes in
the usual order and fails here reads state another test left (a cache, a folder, an environment
variable, a process-wide memo): make its fixture own that state. Re-run a failure with the seed
printed: the same seed gives the same order. The closing lines list every run's pytest summary
and the failed tests; the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIERS = {"fast": "not slow and not lint", "slow": "slow and not lint", "lint": "lint", "all": "not lint"}


def command(tier: str, seed: int, workers: int, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", TIERS[tier], f"--random-order-seed={seed}",
           "-p", "no:cacheprovider"]
    if workers:
        cmd += ["-n", str(workers)]
    return cmd + extra


def summary(log: str) -> tuple[str, list[str]]:
    """pytest's closing line and the ids of the failed / errored tests."""
    closing = re.compile(r"\b(passed|failed|error|no tests ran)\b.* in [\d.]+s")
    ends = [x.strip("= ") for x in log.splitlines() if closing.search(x)]
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", log, re.M)))
    return (ends[-1] if ends else "(no pytest summary)"), failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", choices=sorted(TIERS), default="fast")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers; 0: one process")
    parser.add_argument("--logs", type=Path, default=None, help="write each run's output here")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    results = []
    for seed in args.seeds:
        cmd = command(args.tier, seed, args.workers, args.pytest_args)
        print("running:", " ".join(cmd[1:]), flush=True)
        start = time.monotonic()
        run = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line, failed = summary(run.stdout)
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
            (args.logs / f"{args.tier}-seed{seed}-n{args.workers}.log").write_text(run.stdout)
        results.append((seed, run.returncode, line, failed, time.monotonic() - start))
        print(f"seed {seed}: exit {run.returncode}: {line}", flush=True)
    print(f"\n{args.tier} tier in random order, {args.workers or 'no'} xdist workers:")
    for seed, rc, line, failed, seconds in results:
        print(f"  seed {seed}: exit {rc} after {seconds:.0f} s: {line}")
        for test in failed:
            print(f"    {test}")
    return int(any(rc not in (0, 5) for _, rc, _, _, _ in results))


if __name__ == "__main__":
    sys.exit(main())
