"""Benchmark: cscore's statistics pass against lm-evaluation-harness's HF ``loglikelihood``, side by
side in one process on the same strings with the same weights (not a test; lm_eval is never a
dependency of cscore). Install lm_eval beside the installed torch / transformers, in a venv of its own:

    python -m venv --system-site-packages /work/wt/lmeval-venv
    /work/wt/lmeval-venv/bin/pip install lm_eval
    OMP_NUM_THREADS=1 /work/wt/lmeval-venv/bin/python scripts/bench_lmeval.py [--summeval-docs 2]
        [--repeats 2] [--lmeval-batch 1] [--float64]

The strings: SummEval's first ``--summeval-docs`` documents with all their summaries (16 each), read by
cscore's loader, with the prompts cscore builds for them (the paper prompt, ending in "Summary:\\n").
The model: the expert of ``pair=smollm2`` (the packaged SmolLM2 GGUF, converted once by cscore into
$CSCORE_CACHE/models); lm-eval's ``HFLM`` loads that same folder. One thread on both sides
(``torch.set_num_threads(1)``), float32. cscore runs the expert alone at temperature 1 (what
``loglikelihood`` computes), with its defaults (prefix sharing, token budget 4096); lm-eval with
``--lmeval-batch`` (its default: 1).

The boundary convention differs: lm-eval moves the context's trailing whitespace into the
continuation (``_encode_pair``), so for the prompt's final newline it scores the newline token too;
cscore scores the hypothesis tokens alone (ContrastScore's Eq. 1). The exactness is printed both
ways: as given (the difference is the newline's log-probability) and with cscore given lm-eval's
boundary (prompt.rstrip(), the whitespace + hypothesis), where the scored tokens are the same ones
(checked) and the sums must agree to float32 rounding. ``--float64`` adds a float64 forward of the
same tokens as the reference both are measured against.

Reported: per item the relative difference of the summed log-probability (max and median), the
tokens each side fed to the model (real, and with padding), seconds per side (median over
``--repeats`` alternations, lm-eval and cscore taking turns), and the ratio.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch

from cscore.data import load_examples
from cscore.data.prompts import build
from cscore.scorers.api import ModelPair
from cscore.scorers.models import gguf

SPEC = "gguf:smollm2"  # conf/pair/smollm2.yaml's expert


def summeval_slice(n_docs: int) -> tuple[list[str], list[str]]:
    """(prompts, hypotheses) of the first ``n_docs`` SummEval documents, every summary of each."""
    examples, _ = load_examples("summeval")
    groups = list(dict.fromkeys(examples["group"]))[:n_docs]
    examples = examples[examples["group"].isin(groups)].reset_index(drop=True)
    prompts, _ = build(examples)
    return prompts, list(examples["hypothesis"])


def lmeval_boundary(prompts: list[str], hyps: list[str]) -> tuple[list[str], list[str]]:
    """The (context, continuation) lm-eval scores for (prompt, hypothesis): the prompt's trailing
    whitespace moved to the front of the hypothesis."""
    contexts = [p.rstrip() for p in prompts]
    return contexts, [p[len(c):] + h for p, c, h in zip(prompts, contexts, hyps)]


class Fed:
    """Tokens fed to a model's forward: real (attention mask, else every position) and with padding."""

    def __init__(self, model):
        self.real = self.padded = 0
        self.handle = model.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        self.padded += int(ids.numel())
        self.real += int(mask.sum()) if mask is not None else int(ids.numel())

    def take(self) -> tuple[int, int]:
        out, self.real, self.padded = (self.real, self.padded), 0, 0
        return out


def cscore_sums(pair: ModelPair, prompts, hyps) -> tuple[np.ndarray, list[list[int]], dict]:
    """Summed log p of each hypothesis (temperature 1), its scored token ids and the pass's report."""
    got = pair.statistics(prompts, hyps, temperatures=(1.0,), models=["expert"])
    st = got.stats["expert"]
    lp = st.lp(1.0)
    sums = np.array([lp[st.item(i)].sum() for i in range(st.n_items)])
    ids = [st.token_ids[st.item(i)].tolist() for i in range(st.n_items)]
    report = next(iter(got.reports.values()))
    return sums, ids, {"real": report.tokens, "padded": report.padded_tokens}


def lmeval_sums(lm, prompts, hyps) -> np.ndarray:
    from lm_eval.api.instance import Instance

    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(p, h), idx=i)
                for i, (p, h) in enumerate(zip(prompts, hyps))]
    return np.array([ll for ll, _ in lm.loglikelihood(requests, disable_tqdm=True)])


@torch.inference_mode()
def float64_sums(model, lm, prompts, hyps) -> np.ndarray:
    """The reference: lm-eval's tokens (context + continuation), a float64 forward, log_softmax in float64."""
    model64 = model.double()
    out = []
    try:
        for p, h in zip(prompts, hyps):
            ctx, cont = lm._encode_pair(p, h)
            ids = torch.tensor([ctx + cont])
            logits = model64(input_ids=ids).logits[0, len(ctx) - 1:-1]
            out.append(float(torch.log_softmax(logits, -1).gather(-1, torch.tensor(cont)[:, None]).sum()))
    finally:
        model.float()
    return np.array(out)


def rel(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    r = np.abs(a - b) / np.abs(b)
    return float(r.max()), float(np.median(r))


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--summeval-docs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="alternations of the two sides; medians reported")
    ap.add_argument("--lmeval-batch", type=int, default=1, help="lm-eval's batch_size (its default: 1)")
    ap.add_argument("--float64", action="store_true", help="also a float64 reference of the same tokens")
    return ap.parse_args()


def alternate(lm, pair: ModelPair, prompts, hyps, repeats: int) -> dict:
    """The two sides in turn ``repeats`` times (after a warm-up): their seconds, sums and tokens fed."""
    fed = Fed(lm.model)
    lmeval_sums(lm, prompts[:2], hyps[:2]), cscore_sums(pair, prompts[:2], hyps[:2])  # warm-up
    fed.take()
    out: dict = {"lm-eval": [], "cscore": []}
    for _ in range(repeats):
        start = time.perf_counter()
        out["lm_sums"] = lmeval_sums(lm, prompts, hyps)
        out["lm-eval"].append(time.perf_counter() - start)
        out["lm_fed"] = fed.take()
        start = time.perf_counter()
        out["cs_sums"], out["cs_ids"], out["cs_fed"] = cscore_sums(pair, prompts, hyps)
        out["cscore"].append(time.perf_counter() - start)
        print(f"  lm-eval {out['lm-eval'][-1]:.2f} s, cscore {out['cscore'][-1]:.2f} s", flush=True)
    return out


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    import lm_eval
    import transformers
    from lm_eval.models.huggingface import HFLM

    prompts, hyps = summeval_slice(args.summeval_docs)
    contexts, continuations = lmeval_boundary(prompts, hyps)
    folder = gguf.converted_gguf_dir(gguf.gguf_path(SPEC))
    pair = ModelPair.load(SPEC, device="cpu", dtype="float32")
    lm = HFLM(pretrained=str(folder), backend="causal", device="cpu", dtype="float32", batch_size=args.lmeval_batch)
    print(f"machine: {platform.machine()} {platform.processor()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} thread), transformers {transformers.__version__}, lm_eval "
          f"{getattr(lm_eval, '__version__', '?')}; model {folder.name}; {len(prompts)} items "
          f"({args.summeval_docs} SummEval documents)")
    lm_tokens = [lm._encode_pair(p, h) for p, h in zip(prompts, hyps)]
    got = alternate(lm, pair, prompts, hyps, args.repeats)
    lm_out, cs_out, lm_fed, cs_fed = got["lm_sums"], got["cs_sums"], got["lm_fed"], got["cs_fed"]
    matched, matched_ids, _ = cscore_sums(pair, contexts, continuations)
    same_tokens = sum(ids == cont for ids, (_, cont) in zip(matched_ids, lm_tokens))
    extra = [len(cont) - len(ids) for ids, (_, cont) in zip(got["cs_ids"], lm_tokens)]

    t_lm, t_cs = statistics.median(got["lm-eval"]), statistics.median(got["cscore"])
    print(f"\ntokens fed: lm-eval {lm_fed[0]} real ({lm_fed[1]} with padding, batch {args.lmeval_batch}); "
          f"cscore {cs_fed['real']} real ({cs_fed['padded']} with padding; prefix sharing)")
    print(f"seconds (median of {args.repeats}): lm-eval {t_lm:.2f}, cscore {t_cs:.2f}; "
          f"cscore {t_lm / t_cs:.2f}x faster ({len(prompts) / t_lm:.3f} vs {len(prompts) / t_cs:.3f} items/s)")
    print(f"scored tokens per item: lm-eval scores {min(extra)}-{max(extra)} more than cscore (the prompt's "
          f"trailing whitespace); with lm-eval's boundary, the same tokens on {same_tokens}/{len(prompts)} items")
    print("summed log-prob, relative difference per item (max, median):")
    print("  as given (cscore: hypothesis tokens; lm-eval: + the newline)  %.2e  %.2e" % rel(cs_out, lm_out))
    print("  cscore given lm-eval's boundary                               %.2e  %.2e" % rel(matched, lm_out))
    if args.float64:
        ref = float64_sums(lm.model, lm, prompts, hyps)
        n_scored = sum(len(c) for _, c in lm_tokens)
        print("  float64 reference vs lm-eval                                  %.2e  %.2e" % rel(lm_out, ref))
        print("  float64 reference vs cscore (lm-eval's boundary)              %.2e  %.2e" % rel(matched, ref))
        print(f"  mean signed difference per scored token, vs float64: lm-eval {np.sum(lm_out - ref) / n_scored:.2e}, "
              f"cscore {np.sum(matched - ref) / n_scored:.2e}")


if __name__ == "__main__":
    main()
