"""Benchmark: cost of a sweep point that reads the statistics cache vs the first run that
computed the statistics, measured side by side in one process.

    python scripts/bench_sweep.py [--model gguf:smollm2] [--items 48]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from cscore import ModelPair
from cscore.data import load_examples
from cscore.data.prompts import build
from cscore.scorers.store.cache import StatsCache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--model", default="gguf:smollm2")
    ap.add_argument("--items", type=int, default=48)
    args = ap.parse_args()

    examples, _ = load_examples("demo")
    examples = examples.iloc[: args.items]
    prompts, spans = build(examples)
    pair = ModelPair.load(args.model, amateur_early_exit="auto")
    inputs = pair.encode(prompts, list(examples["hypothesis"]), source_spans=spans)
    with tempfile.TemporaryDirectory() as tmp:
        cache = StatsCache(Path(tmp))
        start = time.perf_counter()
        first = pair.statistics(inputs=inputs, cache=cache)
        first.score("contrast", gamma=0.1)
        t_first = time.perf_counter() - start

        start = time.perf_counter()
        point = pair.statistics(inputs=inputs, cache=cache)  # what a sweep job does: read, then score
        scores = point.score("contrast", gamma=0.3)
        t_point = time.perf_counter() - start
        assert all(r.cached for r in point.reports.values())
        assert (scores == first.score("contrast", gamma=0.3)).all()
    print(f"model {args.model}, {len(inputs.items)} items")
    print(f"first run (forward pass + cache write + score): {t_first:8.3f} s")
    print(f"sweep point (cache read + score):               {t_point:8.3f} s = {100 * t_point / t_first:.3f} % "
          "of the first run")


if __name__ == "__main__":
    main()
