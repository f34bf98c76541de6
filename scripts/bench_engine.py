"""Benchmark: what the statistics engine saves, measured side by side in one process.

  1. early-exit amateur read from the expert's pass (layer tap) vs a separate amateur pass;
  2. a gamma sweep point computed from kept statistics vs a fresh forward pass.

    python scripts/bench_engine.py [--model gguf:smollm2] [--items 48] [--repeats 2]
"""

from __future__ import annotations

import argparse
import copy
import platform
import time

import numpy as np
import torch

from cscore import ModelPair
from cscore.data import load_examples
from cscore.data.prompts import build


def timed(fn, repeats):
    best = float("inf")
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--model", default="gguf:smollm2")
    ap.add_argument("--items", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    examples, _ = load_examples("demo")
    examples = examples.iloc[: args.items]
    prompts, spans = build(examples)
    hyps = list(examples["hypothesis"])
    shared = ModelPair.load(args.model, amateur_early_exit="auto")
    separate = ModelPair(shared.expert, shared.amateur)
    separate.amateur = copy.copy(shared.amateur)
    separate.amateur.parent = None  # the truncated model in a pass of its own
    inputs = shared.encode(prompts, hyps, source_spans=spans)
    for m in (shared.expert, shared.amateur, separate.amateur):
        m.model  # load the (lazy) weights before timing

    t_shared, st_shared = timed(lambda: shared.statistics(inputs=inputs), args.repeats)
    t_separate, st_sep = timed(lambda: separate.statistics(inputs=inputs), args.repeats)
    diff = np.abs(st_shared.score("contrast") - st_sep.score("contrast")).max()
    t_sweep, _ = timed(lambda: [st_shared.score("contrast", gamma=g) for g in np.arange(0.05, 1.0, 0.05)],
                       args.repeats)
    per_point = t_sweep / 19

    print(f"machine: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}, "
          f"model {args.model}, {len(hyps)} items, best of {args.repeats}")
    print(f"expert + early-exit amateur, one pass (tap): {t_shared:8.2f} s")
    print(f"expert pass + separate amateur pass:        {t_separate:8.2f} s   ratio {t_separate / t_shared:.2f}x")
    print(f"  max |contrast score difference|: {diff:.2e}")
    print(f"gamma sweep point from kept statistics:      {per_point * 1e3:8.3f} ms  "
          f"= {100 * per_point / t_shared:.4f} % of the forward pass")


if __name__ == "__main__":
    main()
