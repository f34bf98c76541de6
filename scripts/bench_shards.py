"""One statistics pass with 1 and with N shards (CPU worker processes, runtime.devices=[cpu,...]),
one thread per worker: wall time, the merge's share, and whether the scores are bit-identical.

    python scripts/bench_shards.py                      # SmolLM2 pair, SummEval 4 documents x 16, 1 vs 2
    python scripts/bench_shards.py --docs 1 --per-doc 4 # a quick look
    python scripts/bench_shards.py --devices cuda:0,cuda:1 --threads 0   # a multi-GPU machine

Each run is a fresh `cscore run` with a cache of its own (nothing read from an earlier run). The
wall time is the command's, model loads and process start-up included: what a user waits for.
Needs an idle machine: two workers on two busy cores measure the other users. Figures: docs/scaling.md."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def summeval_slice(docs: int, per_doc: int, path: Path) -> Path:
    from cscore.data import load_examples

    examples, _ = load_examples("summeval")
    groups = list(dict.fromkeys(examples["group"]))[:docs]
    rows = pd.concat([examples[examples["group"] == g].head(per_doc) for g in groups])
    pd.DataFrame({"source": rows["source"], "hypothesis": rows["hypothesis"], "group": rows["group"],
                  "coherence": rows["human.coherence"] if "human.coherence" in rows else rows["coherence"]}
                 ).to_csv(path, index=False)
    return path


def run(args, data: Path, root: Path, name: str, *more: str) -> dict:
    out, cache = root / name, root / f"cache_{name}"
    cmd = [sys.executable, "-m", "cscore.cli.main", "run", f"pair={args.pair}", "data=table", f"data.path={data}",
           "data.task=summarization", "data.columns.human=[coherence]", "data.columns.group=group",
           "runtime.progress=false", f"hydra.run.dir={out}", f"cache.dir={cache}", *more]
    if args.threads:
        cmd.append(f"runtime.threads={args.threads}")
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    speed = json.loads((out / "metrics.json").read_text())["speed"]
    scores = pd.read_parquet(out / "scores.parquet")
    return {"wall": wall, "speed": speed, "scores": scores[[c for c in scores.columns if c.startswith("score.")]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="smollm2")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--per-doc", type=int, default=16)
    ap.add_argument("--devices", default="cpu,cpu", help="the sharded run's runtime.devices")
    ap.add_argument("--threads", type=int, default=1, help="runtime.threads of every run (0: leave it out)")
    args = ap.parse_args()
    devices = args.devices.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = summeval_slice(args.docs, args.per_doc, root / "slice.csv")
        one = run(args, data, root, "one", f"runtime.device={devices[0]}")
        many = run(args, data, root, "many", f"runtime.devices=[{','.join(devices)}]")
    same = list(one["scores"].columns) == list(many["scores"].columns) and all(
        np.array_equal(one["scores"][c].to_numpy(), many["scores"][c].to_numpy()) for c in one["scores"].columns)
    merge = many["speed"].get("merge_seconds") or 0.0
    pass_seconds = many["speed"].get("score_seconds") or float("nan")
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()} ({platform.machine()}), "
          f"`python scripts/bench_shards.py {' '.join(sys.argv[1:])}`")
    print(f"pair={args.pair}, SummEval {args.docs} documents x {args.per_doc}, threads={args.threads or 'default'}")
    print(f"1 shard:  {one['wall']:.1f}s wall (pass {one['speed'].get('score_seconds') or float('nan'):.1f}s)")
    print(f"{len(devices)} shards: {many['wall']:.1f}s wall (pass {pass_seconds:.1f}s wall, shards "
          f"{many['speed'].get('shard_seconds')}, merge {merge:.3f}s = {100 * merge / pass_seconds:.2f} % of the pass)")
    print(f"wall-time ratio: {one['wall'] / many['wall']:.2f}x; scores bit-identical: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
