"""One statistics pass with 1 and with N shards (runtime.devices=[cpu,...]: this process computes
shard 0, one worker process each of the others), one thread per process: the command's wall time,
the pass's wall time, the merge's share, and whether the scores are bit-identical.

    python scripts/bench_shards.py                      # SmolLM2 pair, SummEval 4 documents x 16, 1 vs 2
    python scripts/bench_shards.py --docs 1 --per-doc 4 # a check that it runs (not a speed figure)
    python scripts/bench_shards.py --devices cuda:0,cuda:1 --threads 0   # a multi-GPU machine
    python scripts/bench_shards.py --many-batches       # >= 16 batches: 16 documents x 4, budget 1024
    python scripts/bench_shards.py --many-batches --ceiling   # and the most 2 processes gain on this machine
    python scripts/bench_shards.py --set pair.expert.path=DIR/expert --set pair.amateur.path=DIR/amateur
                                                        # any pair, e.g. bench_prefix.py --save-arch DIR's

``--many-batches`` (issue 42 item 3): a workload of at least 16 batches, so each of 2 shards has 8
and the split is even (16 SummEval documents x 4 summaries: 20 packed rows of 600-1000 tokens,
four documents split in two, one row per batch at ``runtime.token_budget=1024``: 20 batches);
``--token-budget`` sets the budget of any slice.
Every run's batch count (metrics.json) is printed, and each pass's MFU where the device's peak is
known (metrics.json's ``mfu``; a sharded pass's over the peak of all its devices together).

First one untimed run of the same command warms what only the first run pays (the GGUF model's
conversion to its cache, the OS's file cache, Python's bytecode). Then 1-shard and N-shard runs
alternate, --repeats times each (so a change in the machine's load hits both alike), each a fresh
`cscore run` with a statistics cache of its own (the pass is computed every time). The command's
wall time (process start-up, imports, model loads, the pass, the merge, the write: what a user
waits for) and the pass's (metrics.json: its wall time, the first shard's start to the merge's end)
are reported as medians. Needs an idle machine: two processes on two busy cores measure the other
users. Figures: docs/scaling.md."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
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
    """One fresh `cscore run` (its own run directory and statistics cache): wall time, speed, scores."""
    out, cache = root / name, root / f"cache_{name}"
    cmd = [sys.executable, "-m", "cscore.cli.main", "run", f"pair={args.pair}", "data=table", f"data.path={data}",
           "data.task=summarization", "data.columns.human=[coherence]", "data.columns.group=group",
           "runtime.progress=false", f"hydra.run.dir={out}", f"cache.dir={cache}", *args.set, *more]
    if args.threads:
        cmd.append(f"runtime.threads={args.threads}")
    if args.token_budget:
        cmd.append(f"runtime.token_budget={args.token_budget}")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)} if args.threads else None
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    speed = json.loads((out / "metrics.json").read_text())["speed"]
    scores = pd.read_parquet(out / "scores.parquet")
    batches = sum(p.get("batches") or 0 for p in speed.get("passes", {}).values())
    return {"wall": wall, "pass": speed.get("score_seconds") or float("nan"), "merge": speed.get("merge_seconds"),
            "batches": batches, "mfu": speed.get("mfu"), "flops": speed.get("useful_flops"),
            "shard_seconds": speed.get("shard_seconds"),
            "scores": scores[[c for c in scores.columns if c.startswith("score.")]]}


def same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return list(a.columns) == list(b.columns) and len(a.columns) > 0 and all(
        np.array_equal(a[c].to_numpy(), b[c].to_numpy()) for c in a.columns)


def measure(args, devices: list[str], root: Path, data: Path) -> tuple[list[dict], list[dict]]:
    """The warm-up, then 1 and N shards alternately, ``--repeats`` times each."""
    one_device = f"runtime.device={devices[0]}"
    many_devices = f"runtime.devices=[{','.join(devices)}]"
    warm = run(args, data, root, "warm", one_device)
    print(f"warm-up (untimed): {warm['wall']:.1f}s, {warm['batches']} batches", flush=True)
    ones, manys = [], []
    for i in range(args.repeats):
        ones.append(run(args, data, root, f"one{i}", one_device))
        manys.append(run(args, data, root, f"many{i}", many_devices))
        print(f"repeat {i + 1}: 1 shard {ones[-1]['wall']:.1f}s wall (pass {ones[-1]['pass']:.1f}s); "
              f"{len(devices)} shards {manys[-1]['wall']:.1f}s wall (pass {manys[-1]['pass']:.1f}s, shards "
              f"{manys[-1]['shard_seconds']}, merge {manys[-1]['merge'] or 0.0:.3f}s)", flush=True)
    return [warm, *ones], manys


def print_mfu(ones: list[dict], manys: list[dict], n_devices: int) -> None:
    """Useful TFLOP/s and MFU of the fastest 1-shard and N-shard pass (metrics.json's figures; the
    N-shard MFU over the N devices' peak)."""
    for label, runs, share in (("1 shard", ones, 1), (f"{n_devices} shards", manys, n_devices)):
        best = min(runs, key=lambda r: r["pass"])
        if not best["flops"]:
            continue
        mfu = f"{best['mfu'] / share:.1%}" if best["mfu"] is not None else "- (no peak known for this device)"
        print(f"{label}: useful {best['flops'] / 1e12:.3f} TFLOP in {best['pass']:.2f}s, "
              f"{best['flops'] / best['pass'] / 1e12:.3f} TFLOP/s; MFU {mfu}")


def _ceiling_worker(seconds_out, barrier, rounds: int) -> None:
    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    # one SmolLM2 decoder layer's matrix products for a 1,024-token row (576 -> 1,536 -> 576, and the
    # attention's 576 x 576 projections), float32: the work a shard's pass spends most of its time in
    x = torch.randn(1024, 576, generator=gen)
    up, down = torch.randn(576, 1536, generator=gen), torch.randn(1536, 576, generator=gen)
    proj = torch.randn(576, 576, generator=gen)
    for _ in range(2):
        (x @ up) @ down
    barrier.wait()
    start = time.perf_counter()
    for _ in range(rounds):
        h = torch.nn.functional.silu(x @ up) @ down
        h = h @ proj @ proj.T
    seconds_out.put(time.perf_counter() - start)


def ceiling(rounds: int = 300) -> None:
    """The most N one-thread processes can gain on this machine, whatever cscore does: a fixed piece
    of the pass's kind of work (float32 matrix products at SmolLM2's shapes) timed in one process
    alone, then in N processes at once. N shards can be at most N x alone / together faster; the
    difference to that is the hardware's (shared cores, caches, memory bandwidth, the neighbours)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    for n in (1, 2):
        out, barrier = ctx.Queue(), ctx.Barrier(n)
        procs = [ctx.Process(target=_ceiling_worker, args=(out, barrier, rounds)) for _ in range(n)]
        for p in procs:
            p.start()
        seconds = [out.get() for _ in procs]
        for p in procs:
            p.join()
        if n == 1:
            alone = seconds[0]
            print(f"ceiling: 1 process alone {alone:.2f}s", flush=True)
        else:
            together = max(seconds)
            print(f"ceiling: {n} processes at once {', '.join(f'{s:.2f}s' for s in seconds)}: each "
                  f"{together / alone:.2f}x slower than alone, so {n} shards can gain at most "
                  f"{n * alone / together:.2f}x on this machine now (load average {os.getloadavg()[0]:.1f})",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="smollm2")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--per-doc", type=int, default=16)
    ap.add_argument("--devices", default="cpu,cpu", help="the sharded run's runtime.devices")
    ap.add_argument("--threads", type=int, default=1, help="runtime.threads of every process (0: leave it out)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each, alternating (medians reported)")
    ap.add_argument("--token-budget", type=int, default=None, help="runtime.token_budget of every run")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="one more override of every run (repeatable), e.g. pair.expert.path=DIR")
    ap.add_argument("--many-batches", action="store_true",
                    help="a workload of >= 16 batches: 16 documents x 4 at token budget 1024 (unless given)")
    ap.add_argument("--ceiling", action="store_true",
                    help="also time a fixed matrix-product workload in 1 process, then 2 at once, before "
                         "and after the runs: the most 2 shards can gain on this machine")
    args = ap.parse_args()
    if args.ceiling:
        ceiling()
    if args.many_batches:
        args.docs, args.per_doc = 16, 4
        args.token_budget = args.token_budget or 1024
    devices = args.devices.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = summeval_slice(args.docs, args.per_doc, root / "slice.csv")
        ones, manys = measure(args, devices, root, data)
    reference = ones[0]["scores"]
    identical = all(same(reference, r["scores"]) for r in [*ones, *manys])
    ones = ones[1:]  # the warm-up is not timed
    med = {name: statistics.median(r[key] for r in runs) for name, runs, key in [
        ("one_wall", ones, "wall"), ("one_pass", ones, "pass"), ("many_wall", manys, "wall"),
        ("many_pass", manys, "pass"), ("merge", manys, "merge")]}
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()} ({platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}), `python scripts/bench_shards.py {' '.join(sys.argv[1:])}`")
    sets = f" ({' '.join(args.set)})" if args.set else ""
    print(f"pair={args.pair}{sets}, SummEval {args.docs} documents x {args.per_doc}, {ones[0]['batches']} batches "
          f"(token budget {args.token_budget or 'default'}), threads={args.threads or 'default'}, "
          f"medians of {args.repeats} alternating runs each, after one untimed warm-up run")
    print(f"1 shard:  {med['one_wall']:.1f}s command wall, pass {med['one_pass']:.1f}s")
    print(f"{len(devices)} shards: {med['many_wall']:.1f}s command wall, pass {med['many_pass']:.1f}s "
          f"(wall: the first shard's start to the merge's end), merge {med['merge']:.3f}s = "
          f"{100 * med['merge'] / med['many_pass']:.2f} % of the pass")
    print_mfu(ones, manys, len(devices))
    print(f"command wall ratio: {med['one_wall'] / med['many_wall']:.2f}x; pass wall ratio: "
          f"{med['one_pass'] / med['many_pass']:.2f}x; scores bit-identical (every run): {identical}")
    if args.ceiling:
        ceiling()
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
