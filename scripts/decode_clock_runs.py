"""Record real decodes' step timings for the decode clock's tests (issue 47): each run is a short
``cscore run`` of a judge decode on the offline models, in a fresh process with an empty cache;
every ``DecodeClock`` it makes is recorded (its plan, each event's kind, tokens and seconds since
the clock's start, and the true total: the last unit's end) to
tests/unit/scorers/engine/clock_runs/<name>.json.

    OMP_NUM_THREADS=1 python scripts/decode_clock_runs.py [--only NAME]

tests/unit/scorers/engine/test_decode_clock.py replays them through ``DecodeClock``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "unit" / "scorers" / "engine" / "clock_runs"
COMMON = ["data=summeval", "split.use=dev", "split.dev_fraction=0.01", "runtime.progress=5"]
RUNS = {
    "greedy_smollm2": ["method=cd_judge", "range=2-6", "runtime.max_length=1024", *COMMON],
    "greedy_smollm2_grid": ["-m", "method=cd_judge", "range=2-6", "runtime.max_length=768", "method.lam=0.1,1",
                            "method.t=1,2", *COMMON],
    "released_smollm2": ["method=cd_judge_released", "runtime.max_length=512", "method.max_new_tokens=16",
                         "method.batch_size=8", *COMMON],
}


SPAN = 2.0  # seconds of prefill layers recorded as one event (the clock's sums are the same)


def thin(events: list[list]) -> list[list]:
    """The events with consecutive prefill layers of one unit merged while their span (from the
    event before them) stays within SPAN seconds: their tokens summed, the last one's time."""
    out: list[list] = []
    for kind, tokens, at in events:
        if kind == "prefill" and len(out) > 1 and out[-1][0] == "prefill" and at - out[-2][2] <= SPAN:
            out[-1] = ["prefill", round(out[-1][1] + tokens, 2), at]
        else:
            out.append([kind, tokens, at])
    return out


def record(target: Path, args: list[str]) -> None:
    """Run ``cscore run args`` here with every DecodeClock recorded to ``target``."""
    from cscore.cli.main import main
    from cscore.scorers.engine import decode_clock

    clocks: list[dict] = []
    cls = decode_clock.DecodeClock
    init, begin, event, end = cls.__init__, cls.begin, cls.event, cls.end

    def rec(clock, kind, tokens, at):
        clock.rec["events"].append([kind, round(tokens, 2), round(at - clock.start, 4)])

    def new_init(self, units, start, *a, **k):
        init(self, units, start, *a, **k)
        self.rec = {"units": [[u.prefill, u.steps, u.rows] for u in units], "prior": self.prior, "events": []}
        clocks.append(self.rec)

    def new_begin(self, at):
        begin(self, at)
        rec(self, "begin", 0, at)

    def new_event(self, kind, tokens, at):
        event(self, kind, tokens, at)
        rec(self, kind, tokens, at)

    def new_end(self, at):
        end(self, at)
        rec(self, "end", 0, at)
        self.rec["total"] = round(at - self.start, 4)

    cls.__init__, cls.begin, cls.event, cls.end = new_init, new_begin, new_event, new_end  # type: ignore[method-assign]
    try:
        main(["run", *args])
    except SystemExit as stop:
        if stop.code:
            raise
    for clock in clocks:
        clock["events"] = thin(clock["events"])
    target.write_text(json.dumps({"command": "cscore run " + " ".join(args), "decodes": clocks,
                                  "load": round(os.getloadavg()[0], 1)}, separators=(",", ":")) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(RUNS))
    ap.add_argument("--record", nargs=2, metavar=("NAME", "TARGET"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.record:
        record(Path(args.record[1]), RUNS[args.record[0]])
        return
    OUT.mkdir(parents=True, exist_ok=True)
    for name in [args.only] if args.only else RUNS:
        with tempfile.TemporaryDirectory() as cwd:
            env = dict(os.environ, CSCORE_STATS_CACHE=str(Path(cwd) / "stats"))
            env.setdefault("CSCORE_SHARED_DATA", str(OUT.parents[4].parent / "shared" / "data"))
            start = time.perf_counter()
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--record", name, str(OUT / f"{name}.json")],
                           cwd=cwd, env=env, check=True)
            print(f"{name}: {time.perf_counter() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
