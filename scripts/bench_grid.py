"""Benchmark: a decoding judge's (λ, t) multirun with the grid's decodes shared (the first job
decodes every point as one tree, runtime.share_grid=true) against each job decoding its own
point (runtime.share_grid=false), side by side, through `cscore run -m` itself.

    python scripts/bench_grid.py [--method cd_judge_released] [--per-doc 4] [--lam 0.5,1] [--t 1,2]
                                 [--threads 1] [--repeats 1]

Each sweep starts from an empty decode cache (the converted model stays cached: a warm-up run
converts it first, not timed); with --repeats N the two sweeps alternate (A B B A ...). The rows
are the demo set's first --per-doc rows of each of its first two documents. Prints the wall time
of each sweep, the ratio, and whether every output / parse / score column is identical.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from cscore.data.demo import DEMO_FILE

CSCORE = shutil.which("cscore") or "cscore"  # the installed command, as a user runs it


def demo_rows(path: Path, per_doc: int) -> Path:
    lines = [x for x in Path(DEMO_FILE).read_text().splitlines() if x.strip()]
    docs = [json.loads(x)["doc_id"] for x in lines]
    keep = [x for d in sorted(set(docs))[:2] for x in [y for y, e in zip(lines, docs) if e == d][:per_doc]]
    path.write_text("\n".join(keep) + "\n")
    return path


def sweep(args, rows: Path, root: Path, share: bool, tag: str) -> tuple[float, Path]:
    out = root / f"sweep_{tag}"
    cmd = [CSCORE, "run", "-m", f"method={args.method}", f"pair={args.pair}",
           f"data.path={rows}", f"method.lam={args.lam}", f"method.t={args.t}", f"runtime.threads={args.threads}",
           "runtime.progress=false", f"runtime.share_grid={str(share).lower()}", f"cache.dir={root / f'cache_{tag}'}",
           f"hydra.sweep.dir={out}"]
    start = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
    seconds = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"cscore run -m failed ({tag}):\n{res.stderr[-2000:]}")
    return seconds, out


def columns(sweep_dir: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for job in sorted(p for p in sweep_dir.iterdir() if (p / "scores.parquet").is_file()):
        table = pd.read_parquet(job / "scores.parquet")
        out[job.name] = table[[c for c in table.columns if c.startswith(("output.", "parse.", "score."))]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--method", default="cd_judge_released", choices=("cd_judge_released", "cd_judge"))
    ap.add_argument("--pair", default="smollm2")
    ap.add_argument("--per-doc", type=int, default=4)
    ap.add_argument("--lam", default="0.5,1")
    ap.add_argument("--t", default="1,2")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = demo_rows(root / "rows.jsonl", args.per_doc)
        warm = [CSCORE, "run", f"pair={args.pair}", f"data.path={rows}", "cache.enabled=false",
                "runtime.progress=false", f"hydra.run.dir={root / 'warm'}"]
        subprocess.run(warm, capture_output=True, text=True, cwd=root, check=True)  # converts the model once
        n_points = len(args.lam.split(",")) * len(args.t.split(","))
        when = time.strftime("%Y-%m-%d %H:%M")
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, threads {args.threads}; {args.method}, "
              f"pair={args.pair}, {2 * args.per_doc} prompts, {n_points} grid points; {when}")
        times: dict[bool, list[float]] = {True: [], False: []}
        same = True
        for r in range(args.repeats):
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {}
            for share in order:
                seconds, out = sweep(args, rows, root, share, f"{'shared' if share else 'alone'}{r}")
                times[share].append(seconds)
                got[share] = columns(out)
            same &= got[True].keys() == got[False].keys() and all(got[True][j].equals(got[False][j]) for j in got[True])
        shared, alone = min(times[True]), min(times[False])
        print(f"  share_grid=true : {shared:7.1f} s  (runs: {', '.join(f'{x:.1f}' for x in times[True])})")
        print(f"  share_grid=false: {alone:7.1f} s  (runs: {', '.join(f'{x:.1f}' for x in times[False])})")
        print(f"  ratio (false / true, best of each): {alone / shared:.2f}x; outputs identical: {same}")


if __name__ == "__main__":
    main()
