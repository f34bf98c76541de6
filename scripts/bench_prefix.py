"""Benchmark: prefix sharing in the statistics engine against a paper-style loop, side by side
in one process on real data (not a test).

    python scripts/bench_prefix.py [--pair smollm2] [--summeval-docs 2] [--mqm-segments 12]
                                   [--threads N] [--repeats N] [--skip-paper] [--kv-cache]
                                   [--device cuda] [--arch qwen_3b_0.5b] [--per-source 1,4,16,64]
                                   [--distribution]

Slices: SummEval, whole documents with all their summaries (16 each); MQM (the default WMT21
TED zh-en file), whole segments with every system. Prompts are the paper prompts of
``cscore.data.prompts``. The pair is the configured one (default ``pair=smollm2``: the
``gguf:smollm2`` expert and an early exit of it as the amateur). Per slice:

  * paper   -- a faithful paper-style loop: batches of 16 items in input order, right padding,
               the full-vocabulary logits over the whole sequence, log_softmax, gather; the
               expert and the amateur each in their own forward pass (for an early exit, the
               truncated model); no prefix reuse;
  * per-source -- the stronger paper-style loop: one batch = one source's hypotheses (right
               padding, so little of it), full-vocabulary logits at every position, the early
               exit from ``output_hidden_states`` of the same pass;
  * plain fwd -- a plain transformers forward of the expert (logits at every position, nothing
               else) over the per-source batches: the per-token reference for cscore's pass;
  * unshared -- cscore's engine, ``prefix_sharing=False`` (token-budget batches, LM head on
               scored positions only, the early exit read from the expert's pass);
  * shared  -- cscore's engine with prefix sharing (the default);
  * shared+dist -- (--distribution) the shared pass keeping the distributional statistics too
               (entropy, cross-entropies, KL, JSD: ``distribution=True``); its extra over ``shared`` is printed
  * kv      -- (--kv-cache) the alternative to packing, for comparison only: each distinct
               prompt run once with a key/value cache, the cache expanded over its hypotheses.

GPU mode (``--arch qwen_3b_0.5b``, also qwen_7b_0.5b / qwen_7b_3b): expert and amateur are
randomly initialised Qwen2 models built from the Qwen2.5 architecture numbers (``ARCH``; no
download: throughput does not depend on weight values), bfloat16 on CUDA, the paper's batch of
16 for the paper-style loop; samples/s printed next to ContrastScore Table 7 (Qwen 3B + 0.5B,
H100, batch 16: 44.06 SummEval, 153.99 MT). Texts are tokenised with the packaged SmolLM2
tokenizer unless ``--tokenizer`` names another (a local Qwen2.5 folder or a hub id in the local
cache gives Qwen's own lengths); ``--arch-layers N`` shrinks both models to N layers and
``--arch-vocab N`` their vocabulary for a CPU smoke run of that path; ``--save-arch DIR`` writes
the pair to DIR/expert and DIR/amateur (for `cscore run`, e.g. ``scripts/bench_shards.py``) and
stops. The models are built in the target dtype (no float32 copy first).

``--per-source 1,4,16,64``: throughput as the number of hypotheses per source grows, on
``--summeval-docs`` documents (k hypotheses per document, the document's summaries taken in turn,
so 64 is each of its 16 summaries four times).

It checks the scores agree: the expert's and the amateur's log-probability scores within
1e-4 relative in float32 (FAIL otherwise); the contrast scores' difference is printed beside
them (Eq. 5 amplifies float32 rounding where p_exp ~ gamma p_ama: "amplified" marks a contrast
difference over 1e-4 with agreeing log-probabilities) and prints samples/s, the
ratios, the tokens the forward passes processed (padding included in brackets) and the peak
resident memory above the baseline (CPU: sampled RSS after malloc_trim; CUDA: max allocated), then
the tokens/s of cscore's passes and of the per-source loop next to the plain forward's (by wall
clock and by this process's CPU time), and every pass's TFLOP/s and MFU (cscore's passes by the
useful FLOPs of their reports; the baselines by what their forwards compute on real tokens, a
full-vocabulary head at every position; MFU needs a known GPU: ``flops.PEAK_TFLOPS``). The
machine may be shared: every variant runs ``--repeats`` times, interleaved, after a warm-up,
and the best time counts; with one thread the CPU seconds are the least disturbed by other jobs.
On a loaded small CPU, ``--threads 1`` is faster than torch's default for this 135M model
(threads wait on each other).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import platform
import threading
import time
from dataclasses import replace

import numpy as np
import torch

from cscore.data import load_examples
from cscore.data.prompts import build
from cscore.scorers import methods
from cscore.scorers.api import ModelPair
from cscore.scorers.engine import engine, flops
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.runtime_defaults import MAX_LENGTH, TOKEN_BUDGET
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.models.anatomy import decoder_base

_DEFAULTS = methods.with_defaults("contrast", {})
TEMPS = tuple(sorted({1.0, float(_DEFAULTS["t_exp"]), float(_DEFAULTS["t_ama"])}))  # the contrast score's

def pair_spec(name: str) -> tuple[str, str | None, object]:
    from omegaconf import OmegaConf

    import cscore.conf

    cfg = OmegaConf.load(os.path.join(os.path.dirname(cscore.conf.__file__), "pair", f"{name}.yaml"))
    return cfg.expert.path, cfg.amateur.get("path"), cfg.amateur.get("early_exit")


class PeakMemory:
    """Peak memory above the start while the block runs: CUDA max allocated, else RSS sampled
    every 5 ms from /proc/self/statm."""

    def __init__(self, device: torch.device):
        self.device, self.peak, self._stop = device, 0, threading.Event()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _sample(self):
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.rss() - self.base)

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            gc.collect()
            try:  # hand memory freed by the previous run back to the OS, so RSS starts low
                ctypes.CDLL("libc.so.6").malloc_trim(0)
            except OSError:
                pass
            self.base = self.rss()
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated() - self.base
        else:
            self._stop.set()
            self.thread.join()
            self.peak = max(self.peak, self.rss() - self.base)


@torch.inference_mode()
def paper_loop(model, items, temps, batch_size: int = 16, pad_id: int = 0):
    """Per item (log p_T(y_t), log max p_T) [n_temps, len]: batches of ``batch_size`` in input
    order, right padding, the full-vocabulary logits of every position, log_softmax(z / T), gather."""
    device = next(model.parameters()).device
    lp, lpm, tokens = [], [], 0
    for s in range(0, len(items), batch_size):
        chunk = items[s:s + batch_size]
        ids, mask = padded_batch([p + h for p, h in chunk], pad_id, device)
        tokens += ids.numel()
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
        per_t = [torch.log_softmax(logits / t, dim=-1) for t in temps]
        for r, (p, h) in enumerate(chunk):
            target = torch.tensor(h, device=device)[:, None]
            rows = [x[r, len(p) - 1:len(p) - 1 + len(h)] for x in per_t]
            lp.append(np.stack([x.gather(1, target).squeeze(1).double().cpu().numpy() for x in rows]))
            lpm.append(np.stack([x.max(dim=-1).values.double().cpu().numpy() for x in rows]))
    return lp, lpm, tokens


def source_batches(items) -> list[list[int]]:
    """Item indices grouped by prompt ids, in first-seen order: one batch per source."""
    groups: dict[tuple, list[int]] = {}
    for i, (p, _) in enumerate(items):
        groups.setdefault(tuple(p), []).append(i)
    return list(groups.values())


def padded_batch(seqs, pad_id, device):
    width = max(len(x) for x in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, x in enumerate(seqs):
        ids[r, :len(x)] = torch.tensor(x)
        mask[r, :len(x)] = 1
    return ids.to(device), mask.to(device)


@torch.inference_mode()
def per_source_loop(expert, items, temps, exit_layer=None, amateur=None, pad_id: int = 0):
    """The stronger paper-style baseline: one batch = one source's hypotheses (right padding),
    the full-vocabulary logits at every position (the model's own output), then per hypothesis
    log_softmax(z / T) of its positions and gather; an early-exit amateur from
    ``output_hidden_states`` of the same pass (final norm + LM head on layer k), a separate
    amateur model in its own pass. Returns ({expert, amateur}: TokenStats, real tokens)."""
    device = next(expert.parameters()).device
    per = {"expert": [None] * len(items), "amateur": [None] * len(items)}
    tokens = 0
    for batch in source_batches(items):
        ids, mask = padded_batch([items[i][0] + items[i][1] for i in batch], pad_id, device)
        tokens += int(mask.sum())
        res = expert(input_ids=ids, attention_mask=mask, output_hidden_states=exit_layer is not None)
        keep_stats(per["expert"], res.logits, batch, items, temps)
        res["logits"] = None  # frees them before the amateur's pass (``del res.logits`` leaves the dict's reference)
        if exit_layer is not None:
            z = expert.get_output_embeddings()(decoder_base(expert).norm(res.hidden_states[exit_layer]))
            keep_stats(per["amateur"], z, batch, items, temps)
        elif amateur is not None:
            keep_stats(per["amateur"], amateur(input_ids=ids, attention_mask=mask).logits, batch, items, temps)
    return {name: as_stats([v[0] for v in vals], [v[1] for v in vals], items, temps)
            for name, vals in per.items() if vals[0] is not None}, tokens


def keep_stats(out, logits, batch, items, temps) -> None:
    """log p_T of each hypothesis token and log max p_T, from one row's logits per item."""
    for r, i in enumerate(batch):
        p, h = items[i]
        z = logits[r, len(p) - 1:len(p) - 1 + len(h)].float()
        target = torch.tensor(h, device=z.device)[:, None]
        per_t = [torch.log_softmax(z / t, dim=-1) for t in temps]
        out[i] = (np.stack([x.gather(1, target).squeeze(1).double().cpu().numpy() for x in per_t]),
                  np.stack([x.max(dim=-1).values.double().cpu().numpy() for x in per_t]))


@torch.inference_mode()
def plain_forward(model, items, pad_id: int = 0) -> int:
    """A plain transformers forward of ``model`` (logits at every position, nothing else) over
    the per-source batches; returns the real (not padding) tokens it processed."""
    device = next(model.parameters()).device
    tokens = 0
    for batch in source_batches(items):
        ids, mask = padded_batch([items[i][0] + items[i][1] for i in batch], pad_id, device)
        model(input_ids=ids, attention_mask=mask)
        tokens += int(mask.sum())
    return tokens


def as_stats(lp, lpm, items, temps) -> TokenStats:
    offsets = np.concatenate([[0], np.cumsum([len(h) for _, h in items])])
    token_ids = np.concatenate([np.asarray(h, dtype=np.int64) for _, h in items])
    return TokenStats(temps, offsets, token_ids, np.concatenate(lp, axis=1), np.concatenate(lpm, axis=1))


@torch.inference_mode()
def kv_cache_pass(model, items, k: int | None, temps, hyp_batch: int = 16):
    """The key/value-cache alternative (comparison only; float64-exact against the engine was
    checked while choosing): every distinct prompt once with use_cache=True, then its
    hypotheses in batches of ``hyp_batch`` with the prompt's cache copied over the batch."""
    from transformers import DynamicCache

    from cscore.scorers.engine.engine import LayerTap
    from cscore.scorers.engine.head import head_logits, token_statistics

    base = decoder_base(model)
    device = next(model.parameters()).device
    tap = LayerTap(model, k) if k else None
    groups: dict[tuple, list[int]] = {}
    for i, (p, _) in enumerate(items):
        groups.setdefault(tuple(p), []).append(i)
    out = {"expert": [None] * len(items), "amateur": [None] * len(items)}
    tokens = 0
    try:
        for prompt, members in groups.items():
            n_p = len(prompt)
            res = base(input_ids=torch.tensor([prompt], device=device), use_cache=True)
            tokens += n_p
            cache = res.past_key_values
            last = {"expert": res.last_hidden_state[:, -1]}
            if tap:
                last["amateur"] = tap.normed()[:, -1]
            kv = [(layer.keys, layer.values) for layer in cache.layers]
            for s in range(0, len(members), hyp_batch):
                chunk = members[s:s + hyp_batch]
                width = max(len(items[i][1]) for i in chunk)
                ids = torch.zeros((len(chunk), width), dtype=torch.long)
                mask = torch.ones((len(chunk), n_p + width), dtype=torch.long)
                for r, i in enumerate(chunk):
                    h = items[i][1]
                    ids[r, :len(h)] = torch.tensor(h)
                    mask[r, n_p + len(h):] = 0
                tokens += ids.numel()
                pos = torch.arange(n_p, n_p + width)[None].expand(len(chunk), width)
                batch_cache = DynamicCache(ddp_cache_data=[(kk.expand(len(chunk), -1, -1, -1),
                                                            vv.expand(len(chunk), -1, -1, -1)) for kk, vv in kv])
                final = base(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                             past_key_values=batch_cache, use_cache=True).last_hidden_state
                hidden = {"expert": final}
                if tap:
                    hidden["amateur"] = tap.normed()
                for name, states in hidden.items():
                    for r, i in enumerate(chunk):
                        h = items[i][1]
                        picked = torch.cat([last[name], states[r, :len(h) - 1]])
                        lp, lpm = token_statistics(head_logits(model, picked), torch.tensor(h, device=device), temps)
                        out[name][i] = (lp.double().cpu().numpy(), lpm.double().cpu().numpy())
    finally:
        if tap:
            tap.close()
    return {
        name: as_stats([v[0] for v in vals], [v[1] for v in vals], items, temps)
        for name, vals in out.items()
        if k or name == "expert"
    }, tokens


# Qwen2.5 architecture numbers (the models' config.json): hidden, intermediate, layers, heads,
# key/value heads, vocabulary, tied embeddings.
ARCH = {"qwen2.5-0.5b": (896, 4864, 24, 14, 2, 151936, True), "qwen2.5-1.5b": (1536, 8960, 28, 12, 2, 151936, True),
        "qwen2.5-3b": (2048, 11008, 36, 16, 2, 151936, True), "qwen2.5-7b": (3584, 18944, 28, 28, 4, 152064, False)}
ARCH_PAIRS = {"qwen_3b_0.5b": ("qwen2.5-3b", "qwen2.5-0.5b"), "qwen_7b_0.5b": ("qwen2.5-7b", "qwen2.5-0.5b"),
              "qwen_7b_3b": ("qwen2.5-7b", "qwen2.5-3b")}
TABLE7 = {"summeval": 44.06, "mqm": 153.99}  # ContrastScore Table 7: Qwen 3B + 0.5B, H100, batch 16, samples/s


def random_qwen(name: str, device, dtype, layers: int | None = None, vocab: int | None = None):
    """A randomly initialised Qwen2 causal LM with ``name``'s architecture numbers, built in
    ``dtype`` (no float32 copy first: the 3B in float32 is 12.4 GB and a minute to convert)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, inter, n_layers, heads, kv, n_vocab, tied = ARCH[name]
    config = Qwen2Config(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers or n_layers,
                         num_attention_heads=heads, num_key_value_heads=kv, vocab_size=vocab or n_vocab,
                         tie_word_embeddings=tied, max_position_embeddings=32768, rope_theta=1e6,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters created in the target dtype (buffers that need float32 ask for it)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    return model.eval().requires_grad_(False)


def synthetic_pair(arch: str, device: str, dtype: str, layers: int | None,
                   tokenizer: str = "gguf:smollm2", vocab: int | None = None) -> ModelPair:
    """Random Qwen-shaped expert and amateur wrapped as a ModelPair, with ``tokenizer``'s
    tokenizer (a model spec: the packaged SmolLM2 by default; a local Qwen2.5 folder or a cached
    hub id gives Qwen's own sequence lengths). Only the tokenizer and config are read. ``vocab``:
    a smaller vocabulary than the architectures' (a smoke run's memory)."""
    from cscore.scorers.models.models import LoadedModel, auto_device, auto_dtype, load_model

    tok = load_model(tokenizer, lazy=True).tokenizer
    vocab = vocab or min(ARCH[name][5] for name in ARCH_PAIRS[arch])
    if len(tok) > vocab:
        raise SystemExit(f"--tokenizer {tokenizer}: {len(tok)} tokens, more than the models' vocabulary of {vocab}")
    dev = auto_device(device)
    dt = auto_dtype(dtype, dev)
    expert, amateur = (random_qwen(name, dev, dt, layers, vocab) for name in ARCH_PAIRS[arch])
    wrap = [LoadedModel(m, tok, f"random {name}{f' ({layers} layers)' if layers else ''}", dev, dt,
                        info={"class": "Qwen2ForCausalLM"}) for m, name in zip((expert, amateur), ARCH_PAIRS[arch])]
    return ModelPair(*wrap)


def save_pair(pair: ModelPair, folder: str) -> None:
    """The random pair as two model folders a `cscore run` (and its shard workers) can load:
    ``pair.expert.path=DIR/expert pair.amateur.path=DIR/amateur``."""
    for name, lm in (("expert", pair.expert), ("amateur", pair.amateur)):
        lm.model.save_pretrained(os.path.join(folder, name))
        pair.tokenizer.save_pretrained(os.path.join(folder, name))
    print(f"saved {pair.expert.name} and {pair.amateur.name} to {folder}/expert, {folder}/amateur")


def per_source_items(examples, k: int, n_docs: int):
    """k hypotheses for each of the first ``n_docs`` documents (its summaries in turn)."""
    rows = []
    for group in list(dict.fromkeys(examples["group"]))[:n_docs]:
        doc = examples[examples["group"] == group]
        rows += [doc.iloc[j % len(doc)] for j in range(k)]
    import pandas as pd

    return pd.DataFrame(rows).reset_index(drop=True)


def run_judge(examples, pair: ModelPair, args) -> None:
    """The CD-judge pass (scorers/judge/judge.py) on G-Eval-style coherence prompts (range 1-5, the
    expert's chat template), with and without prefix sharing; the kept statistics must agree."""
    from omegaconf import OmegaConf

    import cscore.conf
    from cscore.data import judge_prompts
    from cscore.run.kinds.judge import encode_contexts
    from cscore.scorers.judge import judge
    from cscore.scorers.judge.parse import continuation_prefixes, score_tokens

    jp = OmegaConf.to_container(OmegaConf.load(os.path.join(os.path.dirname(cscore.conf.__file__), "judge_prompt",
                                                            "geval.yaml")))
    tok = pair.tokenizer
    chat = judge_prompts.chat_renderer(tok, jp.get("role", "user"), jp.get("generation_prompt", True))
    texts, spans = judge_prompts.build(examples, jp, aspect="coherence", lo=1, hi=5, chat=chat)
    tokens = score_tokens(tok, 1, 5)
    prefixes = continuation_prefixes(tokens)
    _, contexts, _ = encode_contexts(tok, texts, spans, prefixes, 2048)
    ama = pair.amateur
    scale = judge.Scale(list(range(1, 6)), [tuple(tokens[v]) for v in range(1, 6)], prefixes, len(texts),
                        lambda t: tok.decode([t]))
    budget = args.token_budget if args.token_budget == "auto" else int(args.token_budget)
    kw = dict(asst=ama.exit_layer if ama.parent is pair.expert else ama.model, pad_id=tok.pad_token_id or 0)
    print(f"\n== CD-judge pass, SummEval {args.summeval_docs} documents x all summaries: {len(contexts)} contexts, "
          f"{sum(map(len, contexts))} tokens")
    judge.compute(pair.expert.model, contexts[:1 + len(prefixes)], replace(scale, n_items=1),
                  options=PassOptions(token_budget=budget), **kw)  # warm-up
    got = {}
    for name, share in (("unshared", False), ("shared", True)):
        start = time.perf_counter()
        stats, rep = judge.compute(pair.expert.model, contexts, scale,
                                   options=PassOptions(token_budget=budget, prefix_sharing=share), **kw)
        got[name] = (time.perf_counter() - start, stats, rep)
        print(f"  {name}: {got[name][0]:.2f} s, {rep.tokens} tokens [{rep.padded_tokens} padded]", flush=True)
    a, b = got["unshared"][1], got["shared"][1]
    same = bool((a.main_top == b.main_top).all() and (a.asst_top == b.asst_top).all())
    diff = float(np.nanmax(np.abs(a.score_a - b.score_a))) if np.isfinite(a.score_a).any() else 0.0
    print(f"  shared vs unshared: {got['unshared'][0] / got['shared'][0]:.2f}x; same argmax tokens: {same}; "
          f"max |log p| difference of the score tokens: {diff:.1e}")


def slice_examples(name: str, n_groups: int):
    examples, _ = load_examples(name)
    groups = list(dict.fromkeys(examples["group"]))[:n_groups]
    return examples[examples["group"].isin(groups)].reset_index(drop=True)


def slice_runs(pair: ModelPair, inputs, items, args) -> list:
    """(name, function) per way of computing the statistics; a function returns the result of
    ``pair.statistics`` or (statistics, tokens processed)."""
    pad = pair.tokenizer.pad_token_id or 0
    budget = args.token_budget if args.token_budget == "auto" else int(args.token_budget)
    ama = pair.amateur
    exit_layer = ama.exit_layer if ama.parent is pair.expert else None

    def stats_of(sharing, distribution=False):
        return pair.statistics(inputs=inputs, temperatures=TEMPS, token_budget=budget,
                               padding_side="right", prefix_sharing=sharing, distribution=distribution)

    def paper():
        lp_e, lpm_e, t_e = paper_loop(pair.expert.model, items, TEMPS, args.batch_size, pad_id=pad)
        lp_a, lpm_a, t_a = paper_loop(ama.model, items, TEMPS, args.batch_size, pad_id=pad)
        got = {"expert": as_stats(lp_e, lpm_e, items, TEMPS), "amateur": as_stats(lp_a, lpm_a, items, TEMPS)}
        return got, t_e + t_a

    def dense():  # packed rows under the dense block-causal mask instead of packed_attention
        engine.SPARSE_PACKED = False
        try:
            return stats_of(True)
        finally:
            engine.SPARSE_PACKED = True

    def sparse():  # packed rows through packed_attention also on CUDA (the default there: the dense mask)
        saved, engine.PACKED_CUDA = engine.PACKED_CUDA, "sparse"
        try:
            return stats_of(True)
        finally:
            engine.PACKED_CUDA = saved

    def flex():  # packed rows through flex_attention with a block mask (compiled on CUDA)
        saved = engine.PACKED_CPU, engine.PACKED_CUDA
        engine.PACKED_CPU = engine.PACKED_CUDA = "flex"
        try:
            return stats_of(True)
        finally:
            engine.PACKED_CPU, engine.PACKED_CUDA = saved

    paper_loop(pair.expert.model, items[:2], TEMPS, pad_id=pad)  # warm-up: first-call allocations and kernels
    pair.statistics(inputs=type(inputs)(inputs.items[:2]), temperatures=TEMPS, token_budget=budget)
    runs = [] if args.skip_paper else [("paper", paper)]
    runs += [("per-source", lambda: per_source_loop(pair.expert.model, items, TEMPS, exit_layer,
                                                    None if exit_layer else ama.model, pad)),
             ("plain fwd", lambda: (None, plain_forward(pair.expert.model, items, pad))),
             ("unshared", lambda: stats_of(False)), ("shared", lambda: stats_of(True))]
    optional = {"shared+dist": (args.distribution, lambda: stats_of(True, distribution=True)),
                "dense-mask": (args.dense_too, dense), "sparse": (args.sparse_too, sparse)}
    runs += [(name, fn) for name, (wanted, fn) in optional.items() if wanted]
    if args.flex_too:
        flex()  # warm-up: on CUDA the first calls compile flex_attention and the mask
        runs.append(("flex", flex))
    if args.kv_cache and exit_layer:
        runs.append(("kv", lambda: kv_cache_pass(pair.expert.model, items, exit_layer, TEMPS)))
    if args.passes:
        keep = set(args.passes.split(","))
        runs = [(name, fn) for name, fn in runs if name in keep]
    return runs


USEFUL: dict[str, float | None] = {}  # name -> useful FLOPs of cscore's passes (scorers/engine/flops.py)
MODEL_FLOPS: dict[str, float | None] = {}  # name -> FLOPs the baselines' forwards compute on real tokens


def forward_flops(model, items, heads: int = 1) -> float | None:
    """FLOPs of a plain forward of every item alone (prompt + hypothesis, causal), with ``heads``
    full-vocabulary heads at every position, counted as ``flops.row_flops`` counts (padding left out)."""
    c = flops.costs(model)
    if c is None:
        return None
    return float(sum(flops.row_flops(c, len(p) + len(h), [], heads, scored=len(p) + len(h)) for p, h in items))


def baseline_flops(pair: ModelPair, items) -> dict[str, float | None]:
    """The paper loop (expert and amateur, one head each), the per-source loop (an early exit's
    second head in the expert's pass, else the amateur's own forward) and the plain forward."""
    ama = pair.amateur.model
    exit_layer = pair.amateur.exit_layer if pair.amateur.parent is pair.expert else None
    expert = forward_flops(pair.expert.model, items)
    amateur = None if exit_layer else forward_flops(ama, items)
    both = None if expert is None or amateur is None else expert + amateur
    return {"paper": both if not exit_layer else None, "plain fwd": expert,
            "per-source": forward_flops(pair.expert.model, items, heads=2) if exit_layer else both}


def time_runs(runs, device, repeats: int) -> dict:
    """name -> (best wall seconds, best process CPU seconds, statistics, tokens, tokens text,
    peak memory), the runs interleaved ``repeats`` times (a shared machine's load hits all alike)."""
    results: dict = {}
    for _ in range(repeats):
        for name, fn in runs:
            with PeakMemory(device) as mem:
                start, cpu = time.perf_counter(), time.process_time()
                got = fn()
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            if isinstance(got, tuple):
                stats, tokens = got
                tok = f"{tokens} [real]" if name in ("per-source", "plain fwd") else f"{tokens} [padded]"
            else:
                stats, tokens = got.stats, sum(r.tokens for r in got.reports.values())
                useful = [r.flops for r in got.reports.values()]
                USEFUL[name] = None if None in useful else float(sum(useful))
                tok = " + ".join(f"{r.tokens} [{r.padded_tokens}]" for r in got.reports.values())
            old = results.get(name)
            results[name] = (min(wall, old[0]) if old else wall, min(cpu, old[1]) if old else cpu, stats, tokens, tok,
                             max(mem.peak, old[5]) if old else mem.peak)
            print(f"  {name}: {wall:.2f} s ({cpu:.2f} s CPU)", flush=True)
    return results


def run_slice(label, examples, pair: ModelPair, args) -> dict:
    prompts, spans = build(examples)
    inputs = pair.encode(prompts, list(examples["hypothesis"]), source_spans=spans, max_length=args.max_length)
    items = [(it.prompt_ids, it.hyp_ids) for it in inputs.items]
    n_prompts = len({tuple(p) for p, _ in items})
    total = sum(len(p) + len(h) for p, h in items)
    print(f"\n== {label}: {len(items)} items, {n_prompts} distinct prompts, {total} prompt+hypothesis tokens "
          f"(prompt {sum(len(p) for p, _ in items) / total:.0%})")
    MODEL_FLOPS.update(baseline_flops(pair, items))  # the same three names every slice
    results = time_runs(slice_runs(pair, inputs, items, args), pair.expert.device, args.repeats)
    table7 = TABLE7.get(label.split(",")[0].lower())
    if args.arch and table7:
        print(f"  ContrastScore Table 7 (H100, Qwen 3B + 0.5B, batch 16): {table7} samples/s")
    print_slice(results, len(items), args)
    if pair.amateur.parent is pair.expert and hasattr(pair.expert.model.config, "intermediate_size"):
        print_bound(pair.expert.model, items, TOKEN_BUDGET if args.token_budget == "auto" else int(args.token_budget))
    return {name: len(items) / r[0] for name, r in results.items() if r[2] is not None}


def matmul_flops(model) -> tuple[int, int]:
    """Matrix-product FLOPs per token of a Llama-style decoder (q, k, v, o and the gated MLP of
    every layer) and of its LM head, from the config; attention's own products (they depend on
    the lengths) left out."""
    c = model.config
    d = c.hidden_size
    head_dim = getattr(c, "head_dim", None) or d // c.num_attention_heads
    q, kv = c.num_attention_heads * head_dim, c.num_key_value_heads * head_dim
    body = 2 * c.num_hidden_layers * (d * (2 * q + 2 * kv) + 3 * d * c.intermediate_size)
    return body, 2 * d * model.get_output_embeddings().weight.shape[0]


def print_bound(model, items, token_budget: int) -> None:
    """What the arithmetic allows: a plain forward costs body + one head per token; the shared
    pass body per token plus, for each hypothesis token, two full-vocabulary heads (the expert's
    and the early exit's); the per-source loop body + two heads at every position."""
    body, head = matmul_flops(model)
    real = sum(len(p) + len(h) for p, h in items)
    shared = sum(r.length for r in engine.plan_rows(items, token_budget, True))
    f = sum(len(h) for _, h in items) / shared
    per_token = body + 2 * f * head
    print(f"bound by matrix-product FLOPs (attention left out): body {body / 1e6:.0f} M/token, head {head / 1e6:.0f} M;"
          f" shared pass {per_token / 1e6:.0f} M/token ({f:.0%} of its {shared} tokens are hypothesis tokens, two heads"
          f" each): tokens/s vs plain forward <= {(body + head) / per_token:.2f}x; samples/s vs per-source <= "
          f"{real * (body + 2 * head) / (shared * per_token):.2f}x")


def print_slice(results: dict, n: int, args) -> None:
    """The samples/s table (ratios against both baselines) and the tokens/s of cscore's pass
    beside a plain forward's, by wall-clock time and by this process's CPU time."""
    base = results[next(n for n in ("unshared", "shared", "per-source") if n in results)][2]

    def rel_diff(method, stats, **kw):
        a, b = methods.score(method, stats, **kw), methods.score(method, base, **kw)
        return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))

    def vs(name, seconds):
        return f"{results[name][0] / seconds:9.2f}x" if name in results else f"{'-':>10s}"

    print(f"{'':10s} {'seconds':>8s} {'CPU s':>8s} {'samples/s':>10s} {'vs paper':>10s} {'vs per-src':>10s} "
          f"{'peak MiB':>9s}  max rel. diff: log p | contrast  tokens (padded)")
    for name, (wall, cpu, stats, _, tok, peak) in results.items():
        if stats is None:
            continue
        lp = max(rel_diff("single", stats), rel_diff("single", stats, model="amateur"))
        con = rel_diff("contrast", stats)
        # the check is on the log-probabilities the engine computes; Eq. 5 amplifies their float32
        # rounding where p_exp ~ gamma p_ama (docs/concepts.md, Numerics), so a contrast difference above the
        # tolerance with agreeing log-probabilities is marked, not failed
        flag = " FAIL" if lp > args.tolerance else (" (amplified)" if con > args.tolerance else "")
        print(f"{name:10s} {wall:8.2f} {cpu:8.2f} {n / wall:10.3f} {vs('paper', wall)} {vs('per-source', wall)} "
              f"{peak / 2**20:9.0f}  {lp:.1e} | {con:.1e}{flag}  {tok}")
    print_mfu(results, args)
    if "shared+dist" in results and "shared" in results:
        (w, c), (wd, cd) = results["shared"][:2], results["shared+dist"][:2]
        print(f"distributional statistics (issue 49): shared+dist {wd:.2f} s ({cd:.2f} s CPU) vs shared {w:.2f} s "
              f"({c:.2f} s CPU): +{wd / w - 1:.1%} wall, +{cd / c - 1:.1%} CPU")
    for name in ("shared", "unshared", "per-source"):
        if name not in results or "plain fwd" not in results:
            continue
        _, _, _, tokens, _, _ = results[name]
        w, c = (tokens / results[name][k] / (results["plain fwd"][3] / results["plain fwd"][k]) for k in (0, 1))
        print(f"tokens/s {name:10s} {tokens / results[name][0]:8.1f} ({tokens} tokens) vs plain forward "
              f"{results['plain fwd'][3] / results['plain fwd'][0]:8.1f} (real tokens): {w:.2f}x wall, {c:.2f}x CPU")


def print_mfu(results: dict, args) -> None:
    """TFLOP/s and MFU of every pass: cscore's by the useful FLOPs its report counts (heads at
    scored positions only), the baselines' by what their forwards compute (heads at every position)."""
    peak = flops.peak_flops(args.device_used, args.dtype_used)
    for name in results:
        count, what = (USEFUL.get(name), "useful") if name in USEFUL else (MODEL_FLOPS.get(name), "model ")
        if count is None:
            continue
        wall = results[name][0]
        use = flops.mfu(count, wall, peak)
        print(f"{what} FLOPs {name:10s} {count / 1e12:.3f} TFLOP, {count / wall / 1e12:.3f} TFLOP/s; "
              f"MFU {f'{use:.1%}' if use is not None else '- (no peak known for this device)'}"
              f"{f' of {peak / 1e12:.0f} TFLOP/s' if peak else ''}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--pair", default="smollm2")
    ap.add_argument("--arch", choices=sorted(ARCH_PAIRS), default=None,
                    help="random Qwen-shaped expert + amateur instead of --pair (GPU mode)")
    ap.add_argument("--arch-layers", type=int, default=None, help="shrink the --arch models to N layers (smoke run)")
    ap.add_argument("--arch-vocab", type=int, default=None,
                    help="shrink the --arch models' vocabulary to N (smoke run; at least the tokenizer's size)")
    ap.add_argument("--save-arch", default=None, metavar="DIR",
                    help="save the --arch pair (weights, config, tokenizer) to DIR/expert and DIR/amateur and stop")
    ap.add_argument("--tokenizer", default="gguf:smollm2",
                    help="--arch mode: the tokenizer's model spec (e.g. a local Qwen2.5 folder or cached hub id)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="auto: bfloat16 on CUDA, float32 elsewhere")
    ap.add_argument("--batch-size", type=int, default=16, help="the paper-style loop's batch (the paper: 16)")
    ap.add_argument("--summeval-docs", type=int, default=2)
    ap.add_argument("--mqm-segments", type=int, default=12)
    ap.add_argument("--token-budget", default=str(TOKEN_BUDGET), help="an integer or auto")
    ap.add_argument("--max-length", type=int, default=MAX_LENGTH)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1, help="run every variant this often, interleaved; best time")
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--passes", default=None,
                    help="run only these, e.g. 'plain fwd,shared' (names as printed; default: all)")
    ap.add_argument("--kv-cache", action="store_true", help="also time the key/value-cache alternative")
    ap.add_argument("--only", choices=("summeval", "mqm"), default=None)
    ap.add_argument("--per-source", default=None, help="e.g. 1,4,16,64: hypotheses per SummEval document")
    ap.add_argument("--dense-too", action="store_true",
                    help="also time packed rows under the dense block-causal mask (before packed_attention)")
    ap.add_argument("--flex-too", action="store_true",
                    help="also time packed rows through flex_attention with a block mask (engine.PACKED_CUDA=flex)")
    ap.add_argument("--sparse-too", action="store_true",
                    help="also time packed_attention on CUDA (there the engine uses the dense mask)")
    ap.add_argument("--distribution", action="store_true",
                    help="also time the shared pass keeping the distributional statistics (shared+dist)")
    ap.add_argument("--judge", action="store_true", help="time the CD-judge pass with and without sharing")
    ap.add_argument("--tolerance", type=float, default=None,
                    help="max relative contrast-score difference (default 1e-4 float32, 2e-2 bfloat16)")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.arch:
        pair = synthetic_pair(args.arch, args.device, args.dtype, args.arch_layers, args.tokenizer, args.arch_vocab)
        if args.save_arch:
            save_pair(pair, args.save_arch)
            return
        what = f"arch {args.arch}: {pair.expert.name} + {pair.amateur.name}, tokenizer {args.tokenizer}"
    else:
        expert, amateur, exit_ = pair_spec(args.pair)
        pair = ModelPair.load(expert, amateur, amateur_early_exit=exit_, device=args.device,
                              dtype="float32" if args.dtype == "auto" else args.dtype)
        what = (f"pair {args.pair}: {pair.expert.name} + {pair.amateur.name}"
                f"{f' (early exit after {pair.amateur.exit_layer} layers)' if pair.amateur.exit_layer else ''}")
    args.device_used, args.dtype_used = pair.expert.device, pair.expert.dtype
    if args.tolerance is None:
        args.tolerance = 2e-2 if pair.expert.dtype in (torch.bfloat16, torch.float16) else 1e-4
    gpu = torch.cuda.get_device_name(pair.expert.device) if pair.expert.device.type == "cuda" else "no GPU"
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {gpu}, torch "
          f"{torch.__version__} threads {torch.get_num_threads()}, device {pair.expert.device} {pair.expert.dtype}; "
          f"{what}; token budget {args.token_budget}; paper batch {args.batch_size}; {time.strftime('%Y-%m-%d %H:%M')}")
    if args.judge:
        run_judge(slice_examples("summeval", args.summeval_docs), pair, args)
        return
    if args.per_source:
        summeval, _ = load_examples("summeval")
        rows = []
        for k in [int(x) for x in args.per_source.split(",")]:
            got = run_slice(f"SummEval, {args.summeval_docs} documents x {k} hypotheses",
                            per_source_items(summeval, k, args.summeval_docs), pair, args)
            rows.append((k, got))
        print(f"\n== samples/s by hypotheses per source ({args.summeval_docs} SummEval documents)")
        names = list(rows[0][1])
        print(f"{'k':>4s} " + " ".join(f"{n:>10s}" for n in names) + ("  shared/paper" if "paper" in names else ""))
        for k, got in rows:
            ratio = f"  {got['shared'] / got['paper']:11.2f}x" if "paper" in got else ""
            print(f"{k:4d} " + " ".join(f"{got[n]:10.3f}" for n in names) + ratio)
        return
    if args.only in (None, "summeval"):
        run_slice(f"SummEval, {args.summeval_docs} documents x all summaries",
                  slice_examples("summeval", args.summeval_docs), pair, args)
    if args.only in (None, "mqm"):
        run_slice(f"MQM, {args.mqm_segments} segments x all systems", slice_examples("mqm", args.mqm_segments), pair,
                  args)


if __name__ == "__main__":
    main()
