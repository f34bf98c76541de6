"""Benchmark: seconds to align a cross-family pair's tokens into units (and sum the statistics
over them) next to the seconds of the two forward passes that made the statistics.

    python scripts/bench_align.py [--data summeval] [--split dev] [--dev-ids FILE]
                                  [--expert gguf:gemma3-270m] [--amateur gguf:smollm2] [--repeat 3]

``--dev-ids`` is ``split.dev_ids`` of ``cscore run``: the groups listed in the file are dev (e.g. the
CD-judge paper's 10 SummEval documents), so the bench reads the passes such a run cached.

The passes go through the statistics cache (the default one, as `cscore run` uses): a pass already
cached is not run again and its seconds are those recorded when it was computed.
"""

from __future__ import annotations

import argparse
import platform
import time

from cscore import ModelPair
from cscore.data import load_examples, splits
from cscore.data.prompts import build
from cscore.scorers.engine import align
from cscore.scorers.store.cache import StatsCache, default_root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--data", default="summeval")
    ap.add_argument("--split", default="dev", help="all | dev | test (dev: 10 %% of the documents, seed 0)")
    ap.add_argument("--dev-ids", default=None, help="a file of group ids that form dev (as split.dev_ids)")
    ap.add_argument("--expert", default="gguf:gemma3-270m")
    ap.add_argument("--amateur", default="gguf:smollm2")
    ap.add_argument("--repeat", type=int, default=3, help="alignment timings (the best one is reported)")
    args = ap.parse_args()

    examples, _ = load_examples(args.data)
    if args.dev_ids:
        examples = splits.select_labelled(splits.label_by_ids(examples, args.dev_ids), args.split)
    else:
        examples = splits.select(examples, args.split)
    prompts, spans = build(examples)
    pair = ModelPair.load(args.expert, args.amateur, lazy=True)
    if not pair.aligned:
        raise SystemExit("the two models share a tokenizer: nothing to align")
    inputs = pair.encode(prompts, list(examples["hypothesis"]), source_spans=spans)
    stats = pair.statistics(inputs=inputs, temperatures=[0.5, 1.0, 1.5], cache=StatsCache(default_root()))
    ids = {r: [it.hyp_ids for it in inputs.for_role(r)] for r in ("expert", "amateur")}
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        units = align.align(stats.tokenizers, inputs.hypotheses, ids)
        for role in ("expert", "amateur"):
            align.unit_stats(stats.stats[role], units.index[role], units.offsets)
        best = min(best, time.perf_counter() - start)
    passes = {name: rep.seconds for name, rep in stats.reports.items()}
    n_tok = {r: sum(map(len, v)) for r, v in ids.items()}
    print(f"{args.data} split={args.split}: {len(examples)} items; hypothesis tokens {n_tok}; "
          f"{units.n_units} units")
    print(f"alignment + unit sums: {best:.3f} s (best of {args.repeat})")
    for name, seconds in passes.items():
        print(f"pass {name}: {seconds:.1f} s" + (" (read from the cache; computed earlier)"
                                                  if stats.reports[name].cached else ""))
    print(f"alignment / passes: {best / max(sum(passes.values()), 1e-9):.2%}; machine: {platform.platform()}, "
          f"{platform.processor() or platform.machine()}")


if __name__ == "__main__":
    main()
