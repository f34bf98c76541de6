"""Benchmark: cscore's statistics pass against lm-evaluation-harness's HF ``loglikelihood``, side by
side in one process on the same strings with the same weights (not a test; lm_eval is never a
dependency of cscore). Install lm_eval beside the installed torch / transformers, in a venv of its own:

    python -m venv --system-site-packages /work/wt/lmeval-venv
    /work/wt/lmeval-venv/bin/pip install lm_eval
    OMP_NUM_THREADS=1 /work/wt/lmeval-venv/bin/python scripts/bench_lmeval.py [--summeval-docs 2]
        [--repeats 2] [--lmeval-batch 1] [--float64] [--profile]

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
``--repeats`` alternations, lm-eval and cscore taking turns), and the ratio: the structural one
(items/s) and per fed token (tokens/s by the real tokens each side fed: a shared prompt once for
cscore, every context for lm-eval), by wall and by CPU seconds, beside the bound the arithmetic
sets on the per-token ratio (``flops.py``'s count per fed token: the body's matrix products, the
LM head where each side computes it, lm-eval's HF forward at every position, cscore's at the
hypothesis tokens only, and attention by allowed (query, key) pairs, longer for cscore, whose
hypotheses each see the whole prompt). ``--profile`` adds one pass of each side under
torch.profiler, self CPU time per fed token by group (body matrix products / rest, attention,
head matrix products / statistics).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from contextlib import ExitStack, contextmanager

import numpy as np
import torch

from cscore.data import load_examples
from cscore.data.prompts import build
from cscore.scorers.api import ModelPair
from cscore.scorers.engine import engine, flops, packed_attention
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
        self.lengths: list[int] = []  # real tokens of each sequence fed
        self.handle = model.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        self.padded += int(ids.numel())
        self.real += int(mask.sum()) if mask is not None else int(ids.numel())
        self.lengths.extend(mask.sum(-1).tolist() if mask is not None else [ids.shape[-1]] * ids.shape[0])

    def take(self) -> tuple[int, int, list[int]]:
        out, self.real, self.padded, self.lengths = (self.real, self.padded, self.lengths), 0, 0, []
        return out


def cscore_sums(pair: ModelPair, prompts, hyps) -> tuple[np.ndarray, list[list[int]], dict]:
    """Summed log p of each hypothesis (temperature 1), its scored token ids and the pass's report."""
    got = pair.statistics(prompts, hyps, temperatures=(1.0,), models=["expert"])
    st = got.stats["expert"]
    lp = st.lp(1.0)
    sums = np.array([lp[st.item(i)].sum() for i in range(st.n_items)])
    ids = [st.token_ids[st.item(i)].tolist() for i in range(st.n_items)]
    report = next(iter(got.reports.values()))
    return sums, ids, {"real": report.tokens, "padded": report.padded_tokens, "flops": report.flops,
                       "cached": report.cached}


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


def split_flops(c: flops.Costs, total: float, tokens: int, headed: int) -> dict:
    """FLOPs per fed token: body matrix products, LM head at the ``headed`` positions, attention (the rest
    of ``total``, flops.py's count by allowed (query, key) pairs)."""
    body, head = c.body * tokens, c.head * headed
    return {"body": body / tokens, "head": head / tokens, "attention": (total - body - head) / tokens,
            "total": total / tokens}


def print_per_token(got: dict, c: flops.Costs) -> None:
    """Tokens/s by the real tokens each side fed (a shared prompt once for cscore, every context for
    lm-eval), wall and CPU, beside the bound the arithmetic sets: the FLOPs each side computes per
    fed token (lm-eval's HF forward: the full-vocabulary head at every position; cscore's: at the
    hypothesis tokens only, and longer attention: each hypothesis sees the whole prompt)."""
    lm_tokens, cs_tokens, lm_lengths = got["lm_fed"][0], got["cs_fed"]["real"], got["lm_fed"][2]
    lm_total = sum(flops.row_flops(c, n, [], 1, scored=n) for n in lm_lengths)
    scored = sum(len(ids) for ids in got["cs_ids"])
    per = {"lm-eval": split_flops(c, lm_total, lm_tokens, lm_tokens),
           "cscore": split_flops(c, got["cs_fed"]["flops"], cs_tokens, scored)}
    print("per fed token (M FLOPs: body | head | attention | total):")
    for side, f in per.items():
        print(f"  {side:8s} {f['body'] / 1e6:6.0f} | {f['head'] / 1e6:5.1f} | {f['attention'] / 1e6:5.1f} | "
              f"{f['total'] / 1e6:6.1f}")
    bound = per["lm-eval"]["total"] / per["cscore"]["total"]
    for clock in ("", " CPU"):
        t_lm, t_cs = statistics.median(got["lm-eval" + clock]), statistics.median(got["cscore" + clock])
        rate_lm, rate_cs = lm_tokens / t_lm, cs_tokens / t_cs
        print(f"by {'CPU' if clock else 'wall'} seconds: structural (items/s) {t_lm / t_cs:.2f}x; per fed token "
              f"{rate_cs:.0f} vs {rate_lm:.0f} tokens/s: {rate_cs / rate_lm:.2f}x, the arithmetic's bound "
              f"{bound:.2f}x; GFLOP/s cscore {rate_cs * per['cscore']['total'] / 1e9:.1f}, lm-eval "
              f"{rate_lm * per['lm-eval']['total'] / 1e9:.1f} ({rate_cs / rate_lm / bound:.2f}x)")


MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}


@contextmanager
def labelled(owner, name: str, label: str, item: bool = False):
    """``owner.name`` (``owner[name]`` with ``item``) run inside a profiler range named ``label``."""
    orig = owner[name] if item else getattr(owner, name)

    def wrapped(*args, **kwargs):
        with torch.profiler.record_function(label):
            return orig(*args, **kwargs)
    if item:
        owner[name] = wrapped
    else:
        setattr(owner, name, wrapped)
    try:
        yield
    finally:
        if item:
            owner[name] = orig
        else:
            setattr(owner, name, orig)


def group_of(evt) -> str:
    """An op's group: the innermost labelled range around it (attention, body, head), matrix
    products apart from the rest in the body and the head; "outside" the model otherwise."""
    parent = evt.cpu_parent
    while parent is not None and parent.name not in ("attention", "body", "head"):
        parent = parent.cpu_parent
    region = parent.name if parent is not None else "outside"
    if region in ("body", "head"):
        return f"{region} {'matmul' if evt.name in MATMULS else 'other'}"
    return region


def profiled(run) -> tuple[dict, dict]:
    """Self CPU seconds of ``run()`` by group, and the three costliest ops of each group."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    groups: dict = {}
    ops: dict = {}
    for evt in prof.events():
        if evt.name in ("attention", "body", "head"):
            continue
        g = group_of(evt)
        groups[g] = groups.get(g, 0.0) + evt.self_cpu_time_total / 1e6
        ops.setdefault(g, {})[evt.name] = ops.get(g, {}).get(evt.name, 0.0) + evt.self_cpu_time_total / 1e6
    top = {g: sorted(o.items(), key=lambda kv: -kv[1])[:3] for g, o in ops.items()}
    return groups, top


def profile_sides(lm, pair: ModelPair, prompts, hyps, fed: dict) -> None:
    """One pass of each side under torch.profiler, its time by group per fed token (µs): the body's
    matrix products and the rest of it, attention (cscore's packed_attention, HF's SDPA), the head's
    matrix products and its statistics (cscore: the streamed log-sum-exp; lm-eval: log_softmax,
    outside the model)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    with ExitStack() as stack:
        for name in ("sdpa", packed_attention.NAME):
            stack.enter_context(labelled(ALL_ATTENTION_FUNCTIONS, name, "attention", item=True))
        stack.enter_context(labelled(lm.model.model, "forward", "body"))
        stack.enter_context(labelled(lm.model.lm_head, "forward", "head"))
        stack.enter_context(labelled(engine, "forward", "body"))  # cscore's head stays a plain Linear
        stack.enter_context(labelled(engine, "_score_batch", "head"))
        got = {"lm-eval": profiled(lambda: lmeval_sums(lm, prompts, hyps)),
               "cscore": profiled(lambda: cscore_sums(pair, prompts, hyps))}
    names = sorted(set(got["lm-eval"][0]) | set(got["cscore"][0]))
    print(f"\nprofile, µs per fed token (self CPU time; lm-eval {fed['lm-eval']}, cscore {fed['cscore']} tokens):")
    for g in names:
        row = [got[s][0].get(g, 0.0) * 1e6 / fed[s] for s in ("cscore", "lm-eval")]
        tops = "; ".join(f"{s}: " + ", ".join(f"{n} {t * 1e6 / fed[s]:.0f}" for n, t in got[s][1].get(g, []))
                         for s in ("cscore", "lm-eval"))
        print(f"  {g:13s} cscore {row[0]:7.0f}  lm-eval {row[1]:7.0f}   ({tops})")
    total = [sum(got[s][0].values()) * 1e6 / fed[s] for s in ("cscore", "lm-eval")]
    print(f"  {'total':13s} cscore {total[0]:7.0f}  lm-eval {total[1]:7.0f}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--summeval-docs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="alternations of the two sides; medians reported")
    ap.add_argument("--lmeval-batch", type=int, default=1, help="lm-eval's batch_size (its default: 1)")
    ap.add_argument("--float64", action="store_true", help="also a float64 reference of the same tokens")
    ap.add_argument("--profile", action="store_true", help="also one pass of each side under torch.profiler")
    return ap.parse_args()


def alternate(lm, pair: ModelPair, prompts, hyps, repeats: int) -> dict:
    """The two sides in turn ``repeats`` times (after a warm-up): their seconds, sums and tokens fed."""
    fed = Fed(lm.model)
    lmeval_sums(lm, prompts[:2], hyps[:2]), cscore_sums(pair, prompts[:2], hyps[:2])  # warm-up
    fed.take()
    out: dict = {"lm-eval": [], "cscore": [], "lm-eval CPU": [], "cscore CPU": []}
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        out["lm_sums"] = lmeval_sums(lm, prompts, hyps)
        out["lm-eval"].append(time.perf_counter() - start)
        out["lm-eval CPU"].append(time.process_time() - cpu)
        out["lm_fed"] = fed.take()
        start, cpu = time.perf_counter(), time.process_time()
        out["cs_sums"], out["cs_ids"], out["cs_fed"] = cscore_sums(pair, prompts, hyps)
        out["cscore"].append(time.perf_counter() - start)
        out["cscore CPU"].append(time.process_time() - cpu)
        print(f"  lm-eval {out['lm-eval'][-1]:.2f} s ({out['lm-eval CPU'][-1]:.2f} CPU s), cscore "
              f"{out['cscore'][-1]:.2f} s ({out['cscore CPU'][-1]:.2f} CPU s)", flush=True)
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
    assert not cs_fed["cached"], "cscore's pass came from the statistics cache"
    print(f"\ntokens fed: lm-eval {lm_fed[0]} real ({lm_fed[1]} with padding, batch {args.lmeval_batch}); "
          f"cscore {cs_fed['real']} real ({cs_fed['padded']} with padding; prefix sharing)")
    print(f"seconds (median of {args.repeats}): lm-eval {t_lm:.2f}, cscore {t_cs:.2f}; "
          f"cscore {t_lm / t_cs:.2f}x faster ({len(prompts) / t_lm:.3f} vs {len(prompts) / t_cs:.3f} items/s)")
    print(f"scored tokens per item: lm-eval scores {min(extra)}-{max(extra)} more than cscore (the prompt's "
          f"trailing whitespace); with lm-eval's boundary, the same tokens on {same_tokens}/{len(prompts)} items")
    print_per_token(got, flops.costs(lm.model))
    if args.profile:
        profile_sides(lm, pair, prompts, hyps, {"lm-eval": lm_fed[0], "cscore": cs_fed["real"]})
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
