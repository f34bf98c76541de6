"""Encoder-decoder models in the statistics engine: every token of the decoder target (BART's ``<s>`` and
the EOS included) is scored given the source by teacher forcing, as BARTScore and T5Score do; items of one
source share one encoder pass."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from cscore.errors import ConfigError
from cscore.scorers.engine import head_stream
from cscore.scorers.engine.head import chunk_rows, prepared, token_statistics
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.passes import EngineReport, Outputs, check_inputs, deal, run_batches
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.engine.transfer import upload


def decoder_start(model) -> int:
    start = getattr(model.config, "decoder_start_token_id", None)
    if start is None:
        start = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    if start is None:
        raise ConfigError(f"{type(model).__name__} has no decoder_start_token_id in its config")
    return int(start)


def key_part(lm) -> dict:
    """Extra statistics-cache key parts of ``lm`` (a LoadedModel, not loaded for this, or a model)."""
    start = getattr(lm.config, "decoder_start_token_id", None) if hasattr(lm, "loaded") else None
    if start is None:
        start = decoder_start(lm.model if hasattr(lm, "loaded") else lm)
    return {"layout": {"kind": "encoder-decoder", "decoder_start": int(start)}}


def scaled_states(model, states: torch.Tensor) -> torch.Tensor:
    """Decoder states as the LM head reads them (the T5 family scales them: tied embeddings)."""
    if getattr(model.config, "scale_decoder_outputs", False):
        return states * (model.model_dim ** -0.5)
    return states


def raw_logits(model, states: torch.Tensor) -> torch.Tensor:
    """Logits from decoder states as the model computes them, in its own dtype."""
    logits = model.get_output_embeddings()(scaled_states(model, states))
    bias = getattr(model, "final_logits_bias", None)  # BART, Pegasus, Marian, ...
    if bias is not None:
        logits = logits + bias.to(logits.device)
    return logits


def check_head(model, enc_ids: list[int], start: int, device) -> None:
    """The head recipe must give the model's own logits (else: an architecture cscore does not know)."""
    enc = torch.tensor([enc_ids[:8]], device=device)
    dec = torch.tensor([[start]], device=device)
    want = model(input_ids=enc, attention_mask=torch.ones_like(enc), decoder_input_ids=dec).logits[0, -1]
    states = model.get_encoder()(input_ids=enc, attention_mask=torch.ones_like(enc)).last_hidden_state
    out = model.get_decoder()(input_ids=dec, encoder_hidden_states=states, encoder_attention_mask=torch.ones_like(enc),
                              use_cache=False).last_hidden_state
    got = prepared(raw_logits(model, out[0, -1:])[0], None)  # at least float32
    want = want.to(got.dtype)
    if not torch.allclose(got, want, rtol=1e-3, atol=1e-3 * (1.0 + float(want.abs().max()))):
        raise ConfigError(f"cscore does not know how {type(model).__name__} turns decoder states into logits "
                          "(its LM head differs from T5's and BART's)")


def make_batches(enc_lens: Sequence[int], dec_lens: Sequence[int], groups: Sequence[int], token_budget: int,
                 share: bool = True) -> list[list[int]]:
    """Indices in batches, longest source first, of (encoder rows x longest source) + (items x longest
    target) <= budget padded tokens; with ``share`` one encoder row per source."""
    order = sorted(range(len(enc_lens)), key=lambda i: (-enc_lens[i], groups[i], -dec_lens[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    rows: set[int] = set()
    me, md = 0, 0
    for i in order:
        new_rows = rows | {groups[i] if share else i}
        ne, nd = max(me, enc_lens[i]), max(md, dec_lens[i])
        if cur and len(new_rows) * ne + (len(cur) + 1) * nd > token_budget:
            batches.append(cur)
            cur, new_rows, ne, nd = [], {groups[i] if share else i}, enc_lens[i], dec_lens[i]
        cur.append(i)
        rows, me, md = new_rows, ne, nd
    if cur:
        batches.append(cur)
    return batches


def _pad(seqs: list[list[int]], pad_id: int, device):
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[r, :len(s)] = 1
    return upload(ids, device), upload(mask, device)


@torch.inference_mode()
def compute(model, items: Sequence[tuple[list[int], list[int]]], *, temperatures: Sequence[float], pad_id: int = 0,
            progress: Callable[[int], None] | None = None, heads: dict[str, int | None] | None = None,
            checkpoint=None, options: PassOptions | None = None) -> tuple[dict[str, TokenStats], EngineReport]:
    """Run an encoder-decoder ``model`` once over ``items`` = [(encoder_ids, target_ids)], as
    ``engine.compute`` does (one head, no early exit; ``prefix_sharing``: a source encoded once)."""
    opts = options if options is not None else PassOptions()
    heads = {"model": None} if heads is None else dict(heads)
    if len(heads) != 1 or any(k is not None for k in heads.values()):  # one head, no early exit
        raise ConfigError(f"early exit is for decoder-only models; {type(model).__name__} is an encoder-decoder "
                          "model: give the amateur a smaller model of its family and pair.amateur.early_exit=null")
    name = next(iter(heads))
    inputs = check_inputs(items, temperatures, opts.padding_side)
    device = next(model.parameters()).device
    start_id = decoder_start(model)
    vocab = model.get_output_embeddings().weight.shape[0]
    for i, (p, h) in enumerate(items):
        if max(p) >= vocab or max(h) >= vocab:
            raise InputError(f"item {i}: token id {max(max(p), max(h))} is outside the model's vocabulary of {vocab}")
    enc_lens, dec_lens = [len(p) for p, _ in items], [len(h) for _, h in items]
    first_of: dict[tuple, int] = {}
    groups = [first_of.setdefault(tuple(p), i) for i, (p, _) in enumerate(items)]
    out = Outputs(*inputs, [name], checkpoint)  # one device-to-host copy at the end

    start_time = time.perf_counter()
    if items:
        check_head(model, items[0][0], start_id, device)
    encoder, decoder = model.get_encoder(), model.get_decoder()
    token_budget = opts.budget_for(model, max((e + d for e, d in zip(enc_lens, dec_lens)), default=1))
    batches = make_batches(enc_lens, dec_lens, groups, token_budget, opts.prefix_sharing)
    padded = 0
    costs = [len({groups[i] for i in b}) * max(enc_lens[i] for i in b) + len(b) * max(dec_lens[i] for i in b)
             for b in batches]
    deal(checkpoint, batches, costs, progress, tokens=[sum(enc_lens[i] + dec_lens[i] for i in b) for b in batches],
         detail=f"{len(batches):,} batches")
    for idx, ticks in run_batches(batches, batches, costs, checkpoint, progress):
        keys = [groups[i] if opts.prefix_sharing else i for i in idx]
        uniq = list(dict.fromkeys(keys))
        row = {k: r for r, k in enumerate(uniq)}
        enc_ids, enc_mask = _pad([items[k][0] for k in uniq], pad_id, device)
        dec_ids, dec_mask = _pad([[start_id] + items[i][1][:-1] for i in idx], pad_id, device)
        padded += enc_ids.numel() + dec_ids.numel()
        states = encoder(input_ids=enc_ids, attention_mask=enc_mask).last_hidden_state
        ticks.step(1, 2)  # the encoder's half of the batch
        sel = upload(torch.tensor([row[k] for k in keys]), device)
        with shared_source_projections(decoder, states, sel, len(idx)) as per_item:
            hidden = decoder(input_ids=dec_ids, attention_mask=dec_mask, encoder_hidden_states=per_item,
                             encoder_attention_mask=enc_mask[sel], use_cache=False).last_hidden_state
        _score_batch(model, items, idx, hidden, out, name, vocab, device)
    stats = out.fetch()
    return stats, EngineReport(time.perf_counter() - start_time, int(sum(enc_lens) + sum(dec_lens)), padded,
                               len(batches))


@contextmanager
def shared_source_projections(decoder, states: torch.Tensor, sel: torch.Tensor, n_items: int):
    """The encoder states per item (``states[sel]``); where items share a source, the decoder's plain
    ``nn.Linear`` projections of them run once per source."""
    per_item = _per_item(states, sel, n_items)
    if states.shape[0] == n_items:
        yield per_item
        return
    linears = [m for m in decoder.modules() if type(m) is torch.nn.Linear]
    saved = [m.__dict__.get("forward") for m in linears]

    def projected_once(m, plain):
        def forward(x):
            return _per_item(F.linear(states, m.weight, m.bias), sel, n_items) if x is per_item else plain(x)
        return forward

    for m in linears:
        setattr(m, "forward", projected_once(m, m.forward))  # an instance attribute over the class's method
    try:
        yield per_item
    finally:
        for m, old in zip(linears, saved):
            del m.forward
            if old is not None:
                setattr(m, "forward", old)


def _per_item(x: torch.Tensor, sel: torch.Tensor, n_items: int) -> torch.Tensor:
    """``x[sel]``: a view when one source serves every item, else ``index_select`` (faster than indexing)."""
    return x.expand(n_items, *x.shape[1:]) if x.shape[0] == 1 else x.index_select(0, sel)


def _score_batch(model, items, idx, hidden, out, name, vocab, device):
    """Decoder position j predicts target token j (the start token shifts the target right)."""
    rows, cols, targets = (upload(torch.tensor(x), device) for x in (
        [r for r, i in enumerate(idx) for _ in items[i][1]], [j for i in idx for j in range(len(items[i][1]))],
        [t for i in idx for t in items[i][1]]))
    picked = hidden[rows, cols]
    lin = head_stream.linear_head(model)
    if lin is not None:  # the CPU: the head's matrix read once per batch
        blocks = head_stream.linear_blocks(lin, getattr(model, "final_logits_bias", None))
        lp, lpm = head_stream.streamed_statistics(blocks, vocab, scaled_states(model, picked), targets,
                                                  out.temperatures)
    else:
        chunk = chunk_rows(vocab, picked.device, picked.element_size())
        got = [token_statistics(raw_logits(model, picked[s:s + chunk]), targets[s:s + chunk], out.temperatures)
               for s in range(0, len(targets), chunk)]
        lp, lpm = (torch.cat(parts, dim=1) for parts in zip(*got))
    out.add(idx, {name: (lp, lpm)})
