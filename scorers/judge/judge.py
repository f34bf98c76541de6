"""The judge pass: one forward pass of the main model and the assistant over each judge context (a
prompt, or a prompt + a continuation prefix), keeping what ``cscore.scorers.judge.stats.JudgeStats``
needs of the next-token distribution. Batches are planned as in ``engine.compute``.
"""

from __future__ import annotations

import functools
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from cscore.scorers.engine import flops
from cscore.scorers.engine.engine import (
    LayerTap,
    longest_row,
    pad_rows,
    pass_window,
    planned_batches,
    run_base,
    sparse_packed,
)
from cscore.scorers.engine.head import head_logits
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.passes import EngineReport, layer_ticks, run_batches
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.judge.partials import context_rows, first_step_layout, found_of
from cscore.scorers.judge.stats import JudgeStats
from cscore.scorers.models.anatomy import layer_list


def front_mask(a: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(order, keep) per row of a, z [B, V]: the token ids sorted by z (ties by id) and which are on
    the Pareto front of (z, a); a token left out is never chosen by a − c·z, c > 0."""
    order = torch.sort(z, dim=1, stable=True).indices
    a_sorted = a.gather(1, order)
    run = torch.cummax(a_sorted, dim=1).values
    prev = torch.cat([torch.full_like(run[:, :1], -torch.inf), run[:, :-1]], dim=1)
    return order, a_sorted > prev


def batch_to_host(a, z, z_main, z_asst, score_tok):
    """What the host keeps of a batch, in one device-to-host copy: whether all logits are finite, both
    argmaxes, a and z of the score tokens [B, S], and per row its front as (ids, a, z). Token ids travel
    as float64 (exact below 2^53)."""
    order, keep = front_mask(a, z)
    row_counts = keep.sum(dim=1)
    rows, cols = keep.nonzero(as_tuple=True)
    ids = order[rows, cols]
    all_finite = torch.isfinite(z_main).all() & torch.isfinite(z_asst).all()
    parts = [all_finite[None].double(), torch.argmax(z_main, dim=-1).double(), torch.argmax(z_asst, dim=-1).double(),
             row_counts.double(), a[:, score_tok].flatten(), z[:, score_tok].flatten(), ids.double(), a[rows, ids],
             z[rows, ids]]
    flat = torch.cat(parts).cpu().numpy()
    b, n_s, n_f = a.shape[0], len(score_tok), len(ids)
    cut = np.cumsum([1, b, b, b, b * n_s, b * n_s, n_f, n_f])
    finite, main_top, asst_top, counts, sa, sz, f_ids, f_a, f_z = np.split(flat, cut)
    bounds = np.concatenate([[0], np.cumsum(counts.astype(np.int64))])
    fronts = [(f_ids[lo:hi].astype(np.int64), f_a[lo:hi], f_z[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    return (bool(finite[0]), main_top.astype(np.int64), asst_top.astype(np.int64), sa.reshape(b, n_s),
            sz.reshape(b, n_s), fronts)


@dataclass(frozen=True)
class Scale:
    """What the judge pass reads of the score range; ``digit_ids``: the digit tokens, for the chain
    arrays kept where some value is more than one token."""
    values: Sequence[int]
    value_ids: Sequence[tuple[int, ...]]
    prefixes: Sequence[tuple[int, ...]]
    n_items: int
    decode_token: Callable[[int], str]
    digit_ids: Sequence[int] | None = None


def assistant(asst) -> tuple[torch.nn.Module | None, int | None]:
    """(model, exit layer) of an assistant ``asst``: a model (model, None), or an int k (None, k)."""
    if asst is None:
        raise ValueError("give the assistant: a model, or an int k (an early exit of main after k layers)")
    if isinstance(asst, int) and not isinstance(asst, bool):
        return None, asst
    return asst, None


@torch.inference_mode()
def compute(main, contexts: Sequence[list[int]], scale: Scale, *, asst: torch.nn.Module | int, pad_id: int = 0,
            progress: Callable[[int], None] | None = None, options: PassOptions | None = None,
            checkpoint=None) -> tuple[JudgeStats | None, EngineReport]:
    """The judge statistics of ``main`` and the assistant ``asst`` (a model sharing the vocabulary, or
    an int k: main's first k layers). With ``prefix_sharing`` a long shared prefix runs once per packed
    row. ``checkpoint``: a part's; only its batches run and the statistics are None."""
    opts = options if options is not None else PassOptions()
    second, asst_exit = assistant(asst)  # the second model (None: main's early exit)
    value_ids, n_ctx, n_values = scale.value_ids, len(contexts), len(scale.values)
    if n_ctx != scale.n_items * (1 + len(scale.prefixes)):
        raise ValueError("contexts must be n_items x (1 + len(prefixes))")
    for i, c in enumerate(contexts):
        if not c:
            raise InputError(f"judge prompt {i} has no tokens")
    device = next(main.parameters()).device
    vocab = main.get_output_embeddings().weight.shape[0]
    single = np.array([len(ids) == 1 for ids in value_ids])
    score_tok = torch.tensor([ids[0] if len(ids) == 1 else 0 for ids in value_ids], device=device)
    # what ``_judge_batch`` fills per context: (main_top, asst_top, score_a, score_z, fronts, chain)
    found = (np.empty(n_ctx, np.int64), np.empty(n_ctx, np.int64), np.full((n_ctx, n_values), np.nan),
             np.full((n_ctx, n_values), np.nan), [None] * n_ctx, chain_buffers(n_ctx, scale, device))
    start = time.perf_counter()
    window = pass_window([main] if second is None else [main, second], opts.prefix_sharing)
    items = split_shared(contexts) if window is not None else [(c[:-1], c[-1:]) for c in contexts]
    token_budget = opts.budget_for(main, longest_row(items, window is not None))
    batches, members, costs, _ = planned_batches(items, token_budget, window, checkpoint, progress)
    dense = not (sparse_packed(main) and (second is None or sparse_packed(second)))
    pad = functools.partial(pad_rows, pad_id=pad_id, padding_side=opts.padding_side, device=device,
                            dtype=next(main.parameters()).dtype, dense_mask=dense,
                            attn=getattr(main.config, "_attn_implementation", None))
    padded = n_run = tokens = 0
    with LayerTap(main, asst_exit) if asst_exit is not None else nullcontext() as tap:
        for (batch_rows, own), ticks in run_batches(zip(batches, members), members, costs, checkpoint, progress):
            with layer_ticks(layer_list(main), ticks):
                n_padded = _judge_batch((main, second, tap), items, batch_rows, pad, (score_tok, single), found)
            padded, n_run, tokens = padded + n_padded, n_run + 1, tokens + sum(r.length for r in batch_rows)
            if checkpoint is not None:
                checkpoint.add(np.asarray(own, dtype=np.int64), context_rows(found, own))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    stats = None if checkpoint is not None else assembled(scale, found, vocab)
    done = [r for b, own in zip(batches, members) if checkpoint is None or not checkpoint.foreign[own].all() for r in b]
    return stats, EngineReport(seconds, int(tokens), padded, n_run, token_budget=int(token_budget),
                               flops=judge_flops(main, second, items, done))


def first_step_partials(scale: Scale, vocab: int):
    """The checkpoint class of a part of this pass (``runner.PassJob.partials``)."""
    from cscore.scorers.store.checkpoint import ItemCheckpoint

    chain = chain_buffers(scale.n_items * (1 + len(scale.prefixes)), scale, "cpu")

    def assemble(checkpoint) -> dict:
        return {"judge": assembled(scale, found_of(checkpoint, chain), vocab)}

    return functools.partial(ItemCheckpoint, layout=first_step_layout(len(scale.values), chain), assemble=assemble)


def judge_flops(main, asst, items, rows) -> float | None:
    """Useful FLOPs of the first-step pass (the heads at each context's last position only)."""
    total = 0.0
    for model, heads in ((main, 1 if asst is not None else 2), (asst, 1)):
        if model is None:
            continue
        c = flops.costs(model)
        if c is None:
            return None
        total += flops.rows_flops(c, items, rows, heads, last_only=True)
    return total


def _judge_batch(models, items, batch_rows, pad, scoring, found) -> int:
    """Run one batch through both models into ``found``: its padded tokens."""
    main, asst, tap = models  # the main model, the assistant (None: main's early exit, read by ``tap``)
    score_tok, single = scoring  # each value's token (one-token values), which values are one token
    main_top, asst_top, score_a, score_z, fronts, chain = found
    ids, mask, positions, where = pad(items, batch_rows)  # pad_rows with the pass's padding
    device = ids.device
    idx = list(where)
    rows_t = torch.tensor([where[i][0] for i in idx], device=device)
    last = torch.tensor([where[i][2] + len(items[i][1]) - 1 for i in idx], device=device)
    hidden = run_base(main, ids, mask, positions, items, batch_rows, where)
    z_main = head_logits(main, hidden[rows_t, last])
    if tap is not None:
        z_asst = head_logits(main, tap.normed((rows_t, last)))
    else:
        h2 = run_base(asst, ids, mask, positions, items, batch_rows, where)
        z_asst = head_logits(asst, h2[rows_t, last])
    if z_asst.shape[-1] != z_main.shape[-1]:
        raise InputError(f"the assistant has {z_asst.shape[-1]} output logits, the main model "
                         f"{z_main.shape[-1]}: they must share one vocabulary")
    a = torch.log_softmax(z_main.double(), dim=-1)
    finite, main_top[idx], asst_top[idx], sa, sz, got = batch_to_host(a, z_asst.double(), z_main, z_asst,
                                                                       score_tok)
    if not finite:
        raise InputError("a model produced non-finite logits on a judge prompt (check dtype and weights)")
    score_a[idx] = np.where(single, sa, np.nan)
    score_z[idx] = np.where(single, sz, np.nan)
    for r, front in enumerate(got):
        fronts[idx[r]] = front
    if chain is not None:
        keep_chain(chain, idx, a, z_asst.double())
    return ids.numel()


def chain_buffers(n_ctx: int, scale: Scale, device) -> dict | None:
    """The chain arrays of ``JudgeStats`` to fill batch by batch, or None where every value is one token."""
    from cscore.scorers.judge.stats import CHAIN_CS

    if all(len(ids) == 1 for ids in scale.value_ids) or scale.digit_ids is None:
        return None
    digits = {int(d) for d in scale.digit_ids}
    ids = np.asarray(sorted(digits | {int(t) for v in scale.value_ids for t in v}), dtype=np.int64)
    return {"chain_ids": ids, "chain_digit": np.isin(ids, sorted(digits)),
            "chain_a": np.full((n_ctx, len(ids)), np.nan), "chain_z": np.full((n_ctx, len(ids)), np.nan),
            "lse_z": np.full(n_ctx, np.nan), "chain_c": np.asarray(CHAIN_CS, dtype=np.float64),
            "lse_c": np.full((n_ctx, len(CHAIN_CS)), np.nan), "tokens": torch.as_tensor(ids, device=device)}


def keep_chain(chain: dict, idx: list[int], a: torch.Tensor, z: torch.Tensor) -> None:
    """Store a batch's chain values (a = log p_main, z = assistant logits, float64 [B, V])."""
    tok = chain["tokens"]
    lse_c = torch.stack([torch.logsumexp(a - c * z, dim=-1) for c in chain["chain_c"].tolist()], dim=1)
    flat = torch.cat([a[:, tok].flatten(), z[:, tok].flatten(), torch.logsumexp(z, dim=-1), lse_c.flatten()])
    b, n_t = a.shape[0], len(tok)
    got_a, got_z, lse_z, got_c = np.split(flat.cpu().numpy(), np.cumsum([b * n_t, b * n_t, b]))
    chain["chain_a"][idx] = got_a.reshape(b, n_t)
    chain["chain_z"][idx] = got_z.reshape(b, n_t)
    chain["lse_z"][idx] = lse_z
    chain["lse_c"][idx] = got_c.reshape(b, -1)


def assembled(scale: Scale, found, vocab: int) -> JudgeStats:
    """The JudgeStats of a finished pass (``found``: every context's, computed or merged)."""
    main_top, asst_top, score_a, score_z, fronts, chain = found
    sizes = np.array([len(f[0]) for f in fronts], dtype=np.int64)
    front_ids = np.concatenate([f[0] for f in fronts]).astype(np.int64)
    text_ids = np.unique(np.concatenate([front_ids, main_top, asst_top]))
    return JudgeStats(
        n_items=scale.n_items, prefixes=[tuple(p) for p in scale.prefixes],
        values=np.asarray(scale.values, dtype=np.int64), value_ids=[tuple(v) for v in scale.value_ids],
        main_top=main_top, asst_top=asst_top, front_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        front_ids=front_ids, front_a=np.concatenate([f[1] for f in fronts]),
        front_z=np.concatenate([f[2] for f in fronts]), score_a=score_a, score_z=score_z, text_ids=text_ids,
        text_values=np.asarray([scale.decode_token(int(t)) for t in text_ids], dtype=str), vocab=int(vocab),
        **{k: v for k, v in (chain or {}).items() if k != "tokens"})


MIN_SHARED = 8  # a shared prefix shorter than this is not worth a packed row


def split_shared(contexts: Sequence[list[int]]) -> list[tuple[list[int], list[int]]]:
    """Each context as (shared prefix, own suffix), the suffix never empty, grouped so that the tokens
    saved are largest. Singletons: (context[:-1], its last token)."""
    n = len(contexts)
    order = sorted(range(n), key=lambda i: contexts[i])
    lcp = [len(os.path.commonprefix([contexts[order[k]], contexts[order[k + 1]]])) for k in range(n - 1)]
    groups = best_groups(lcp)
    out: list = [None] * n
    for lo, hi in groups:
        members = [order[k] for k in range(lo, hi + 1)]
        shared = min(lcp[lo:hi] + [len(contexts[i]) - 1 for i in members])
        if hi == lo or shared < MIN_SHARED:
            shared = -1  # the last token alone
        for i in members:
            out[i] = (list(contexts[i][:shared]), list(contexts[i][shared:]))
    return out


def best_groups(lcp: list[int]) -> list[tuple[int, int]]:
    """Split sorted positions 0..len(lcp) into runs maximising sum (run size - 1) x min lcp in the run."""
    n = len(lcp) + 1
    if n == 1:
        return [(0, 0)]
    best: dict[tuple[int, int], tuple[int, list]] = {}
    stack = [(0, n - 1, False)]
    while stack:
        lo, hi, ready = stack.pop()
        if lo == hi:
            best[lo, hi] = (0, [(lo, hi)])
            continue
        m = min(range(lo, hi), key=lambda k: (lcp[k], k))
        if not ready:
            stack += [(lo, hi, True), (lo, m, False), (m + 1, hi, False)]
            continue
        left, right = best.pop((lo, m)), best.pop((m + 1, hi))
        whole = (hi - lo) * lcp[m]
        split = left[0] + right[0]
        best[lo, hi] = (whole, [(lo, hi)]) if whole >= split else (split, left[1] + right[1])
    return best[0, n - 1][1]


def first_step(cache, parts: dict, scale, compute, models, coordinator):
    """The judge's first-step pass on the runner: ``Done`` or ``Pending``. Once every part is done it
    is merged here (the decodes read it). ``models``: (main, assistant) as loaded."""
    from cscore.scorers.store.runner import PassJob, Pending, pass_work, run

    main, asst = models
    n_ctx = scale.n_items * (1 + len(scale.prefixes))
    vocab = main.model.get_output_embeddings().weight.shape[0]
    job = PassJob(parts, {"judge": None}, [((), (0,))] * n_ctx, [], compute, "judge",
                  [f"main: {main.name}", f"asst: {asst.name}"], JudgeStats,
                  partials=first_step_partials(scale, vocab))
    work = pass_work(cache, job, coordinator)
    got = run(work, coordinator)
    if isinstance(got, Pending) and got.missing and coordinator.index is not None:
        with work.place.lock(coordinator.index):  # it is still there: its decodes are its own
            got = Pending(coordinator.wait(work.pending, work.place.running, work.label))
    if isinstance(got, Pending) and not got.missing:  # every part done (or merged already): the decodes need it
        got = work.merge()
    return got

