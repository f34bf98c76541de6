"""Benchmark: cscore's encoder-decoder pass (``scorers/engine/seq2seq.py``) against a plain per-source
transformers loop, side by side in one process, on the lengths of real slices (not a test).

    python scripts/bench_seq2seq.py [--arch t5-small] [--summeval-docs 2] [--mqm-segments 12]
                                    [--threads N] [--repeats N] [--device cpu] [--only summeval]

Model: a randomly initialised T5 with the architecture numbers of t5-small or t5-base (their
config.json: d_model, d_ff, layers, heads, d_kv, a 32,128-token vocabulary; throughput does not
depend on weight values, nothing is downloaded), float32 on a CPU, bfloat16 on CUDA. Items: the
SummEval and MQM slices of ``bench_prefix.py`` as BARTScore / T5Score score them: the encoder
reads the source text, the decoder the hypothesis; texts are tokenised with the packaged SmolLM2
tokenizer (no T5 tokenizer offline) and ids folded into T5's vocabulary (id mod 32,128): the
lengths are close to, not equal to, T5's own.

  * per-source -- the plain loop: one batch = one source's hypotheses (the source repeated per
                  hypothesis, right padding), the model's own forward (encoder once per row,
                  full-vocabulary logits at every target position), log_softmax(z / T) per
                  hypothesis and gather, at the contrast score's three temperatures;
  * cscore     -- ``seq2seq.compute``: token-budget batches, one encoder row per source, the LM
                  head on target positions only, the blocked statistics of ``head.py``.

Every variant runs ``--repeats`` times, interleaved, after a warm-up; the best time counts (the
machine may be shared). Prints samples/s, the ratio, tokens and the largest difference of the
log-probabilities, |a - b| / (1 + |b|) (float32: within 1e-4, else FAIL).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prefix import TEMPS, as_stats, keep_stats, padded_batch, slice_examples, source_batches  # noqa: E402

from cscore.scorers.engine import seq2seq  # noqa: E402
from cscore.scorers.engine.pass_options import PassOptions  # noqa: E402
from cscore.scorers.models.models import load_model  # noqa: E402

# config.json of t5-small / t5-base: d_model, d_ff, layers (encoder = decoder), heads, d_kv, vocabulary
T5_ARCH = {"t5-small": (512, 2048, 6, 8, 64, 32128), "t5-base": (768, 3072, 12, 12, 64, 32128)}
PAD, EOS, START = 0, 1, 0  # T5's pad, </s>, decoder start (= pad)


def random_t5(name: str, device, dtype):
    from transformers import T5Config, T5ForConditionalGeneration

    d_model, d_ff, layers, heads, d_kv, vocab = T5_ARCH[name]
    config = T5Config(d_model=d_model, d_ff=d_ff, num_layers=layers, num_decoder_layers=layers, num_heads=heads,
                      d_kv=d_kv, vocab_size=vocab, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=START)
    torch.manual_seed(0)
    with torch.device(device):
        model = T5ForConditionalGeneration(config).to(dtype)
    return model.eval().requires_grad_(False)


def t5_items(examples, tokenizer, vocab: int, max_length: int) -> list[tuple[list[int], list[int]]]:
    """(encoder ids, target ids) per row: source / hypothesis ids folded into the vocabulary, each
    ending with EOS (the source cut to ``max_length``)."""
    def ids(text: str) -> list[int]:
        return [2 + t % (vocab - 2) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]

    return [(ids(s)[:max_length - 1] + [EOS], ids(h) + [EOS])
            for s, h in zip(examples["source"], examples["hypothesis"])]


@torch.inference_mode()
def per_source_loop(model, items):
    """The plain loop: per source one batch of its hypotheses through the model's own forward."""
    device = next(model.parameters()).device
    per: list = [None] * len(items)
    tokens = 0
    for batch in source_batches(items):
        enc, enc_mask = padded_batch([items[i][0] for i in batch], PAD, device)
        dec, dec_mask = padded_batch([[START] + items[i][1][:-1] for i in batch], PAD, device)
        tokens += int(enc_mask.sum() + dec_mask.sum())
        logits = model(input_ids=enc, attention_mask=enc_mask, decoder_input_ids=dec,
                       decoder_attention_mask=dec_mask).logits
        # keep_stats reads item i's row from column len(prompt) - 1: prompt [] + 1 puts it at 0
        keep_stats(per, logits, batch, [([0], items[i][1]) for i in range(len(items))], TEMPS)
    return as_stats([p[0] for p in per], [p[1] for p in per], items, TEMPS), tokens


def cscore_pass(model, items, token_budget: int):
    stats, report = seq2seq.compute(model, items, temperatures=TEMPS, pad_id=PAD, heads={"expert": None},
                                    options=PassOptions(token_budget=token_budget))
    return stats["expert"], report.tokens


def run_slice(label: str, model, items, args) -> None:
    n_src = len({tuple(p) for p, _ in items})
    print(f"\n== {label}: {len(items)} items, {n_src} sources, "
          f"{sum(len(p) for p, _ in items)} encoder + {sum(len(h) for _, h in items)} target tokens")
    runs = {"per-source": lambda: per_source_loop(model, items),
            "cscore": lambda: cscore_pass(model, items, args.token_budget)}
    per_source_loop(model, items[:2])  # warm-up
    cscore_pass(model, items[:2], args.token_budget)
    best: dict = {}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start, cpu = time.perf_counter(), time.process_time()
            stats, tokens = fn()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(f"  {name}: {wall:.2f} s ({cpu:.2f} s CPU)", flush=True)
            old = best.get(name)
            best[name] = (min(wall, old[0]) if old else wall, min(cpu, old[1]) if old else cpu, stats, tokens)
    ref = best["per-source"][2]
    print(f"{'':11s} {'seconds':>8s} {'CPU s':>8s} {'samples/s':>10s} {'vs per-src':>10s}  max log p diff  tokens")
    for name, (wall, cpu, stats, tokens) in best.items():
        diff = float(np.max(np.abs(stats.logp - ref.logp) / (1.0 + np.abs(ref.logp))))
        flag = " FAIL" if diff > args.tolerance else ""
        ratio = f"{best['per-source'][0] / wall:9.2f}x ({best['per-source'][1] / cpu:.2f}x CPU)"
        print(f"{name:11s} {wall:8.2f} {cpu:8.2f} {len(items) / wall:10.3f} {ratio}  {diff:.1e}{flag}  {tokens}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--arch", choices=sorted(T5_ARCH), default="t5-small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--summeval-docs", type=int, default=2)
    ap.add_argument("--mqm-segments", type=int, default=12)
    ap.add_argument("--token-budget", type=int, default=4096)
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--only", choices=("summeval", "mqm"), default=None)
    ap.add_argument("--tolerance", type=float, default=None, help="max relative log p difference "
                    "(default 1e-4 float32, 2e-2 bfloat16)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    args.tolerance = args.tolerance or (2e-2 if dtype == torch.bfloat16 else 1e-4)
    model = random_t5(args.arch, device, dtype)
    tok = load_model("gguf:smollm2", lazy=True).tokenizer
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"threads {torch.get_num_threads()}, device {device} {dtype}; random {args.arch}; token budget "
          f"{args.token_budget}; {time.strftime('%Y-%m-%d %H:%M')}")
    vocab = T5_ARCH[args.arch][5]
    if args.only in (None, "summeval"):
        ex = slice_examples("summeval", args.summeval_docs)
        run_slice(f"SummEval, {args.summeval_docs} documents x all summaries", model,
                  t5_items(ex, tok, vocab, args.max_length), args)
    if args.only in (None, "mqm"):
        ex = slice_examples("mqm", args.mqm_segments)
        run_slice(f"MQM, {args.mqm_segments} segments x all systems", model, t5_items(ex, tok, vocab, args.max_length),
                  args)


if __name__ == "__main__":
    main()
