"""How long a worker process takes to start, by the two ways a local supervisor could start one
(issue 40: prefer an existing supervisor to run/workers.py's, or say why not): submitit's
``LocalExecutor`` (hydra-submitit-launcher's; a controller process, then the task, which unpickles
the function; its result read back from a pickle) and ``subprocess.Popen`` of the interpreter (what
run/workers.py does: ``cscore run`` with the worker's overrides). Each worker runs nothing (no cscore
import), so the figure is the supervisor's own cost, paid once per worker before its imports.

    python scripts/bench_worker_start.py --repeats 5

Prints, per way, the seconds until the worker's code runs and until the parent has its end, as
medians. Figures: docs/measured/figures.yaml (startup), argued in docs/scaling.md."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def noop(t0: float) -> float:
    return time.time() - t0


def through_submitit(folder: str) -> tuple[float, float]:
    import submitit

    executor = submitit.LocalExecutor(folder=folder)
    executor.update_parameters(timeout_min=5)
    t0 = time.time()
    started = executor.submit(noop, t0).result()
    return started, time.time() - t0


def through_popen() -> tuple[float, float]:
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", "import sys, time; print(time.time() - float(sys.argv[1]))", str(t0)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout), time.time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    got: dict[str, list[tuple[float, float]]] = {"submitit LocalExecutor": [], "subprocess.Popen": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):  # in turn, so a change in the machine's load hits both alike
            got["submitit LocalExecutor"].append(through_submitit(folder))
            got["subprocess.Popen"].append(through_popen())
    for way, runs in got.items():
        print(f"{way}: worker's code runs after {statistics.median(r[0] for r in runs):.2f} s, its end seen after "
              f"{statistics.median(r[1] for r in runs):.2f} s (median of {len(runs)})")


if __name__ == "__main__":
    main()
