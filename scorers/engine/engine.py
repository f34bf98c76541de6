"""The statistics engine: one forward pass of one model over all items -> TokenStats, batched under a
token budget (scores do not depend on batching); items sharing a prompt are packed into one row, same
statistics (docs/performance.md#prefix-sharing)."""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from cscore.errors import ConfigError
from cscore.scorers.engine import budget, divergence, flops, head_stream, packed_attention, seq2seq
from cscore.scorers.engine.head import chunk_rows, raw_logits, softcap, token_statistics
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.passes import EngineReport, Outputs, check_inputs, deal, layer_ticks, run_batches
from cscore.scorers.engine.stats import DIST_NAMES, ROW_NAMES, TokenStats
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.engine.transfer import upload
from cscore.scorers.models.anatomy import decoder_base, decoder_layers, final_norm, is_encoder_decoder, layer_list

log = logging.getLogger(__name__)

UNBOUNDED = 1 << 62  # the row length of a model without a sliding window
MAX_PADDING = 0.1  # a batch (packed rows or single items): padding at most this fraction of its tokens
DIST_CHUNK_BYTES = 1 << 27  # a joint pass's logits per CPU row chunk, all heads (SmolLM2: 341 rows, Qwen bf16: 220)


def make_batches(lengths: Sequence[int], token_budget: int, max_padding: float | None = None) -> list[list[int]]:
    """Indices in batches, longest first: max_len * size <= budget (a longer item alone), padding <= ``max_padding``."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    current_max, current_sum = 0, 0
    for i in order:
        new_max = max(current_max, lengths[i])
        padded = new_max * (len(current) + 1)
        if current and (padded > token_budget or
                        (max_padding is not None and padded > (1 + max_padding) * (current_sum + lengths[i]))):
            batches.append(current)
            current, new_max, current_sum = [], lengths[i], 0
        current.append(i)
        current_max = new_max
        current_sum += lengths[i]
    if current:
        batches.append(current)
    return batches


@dataclass
class Row:
    """One sequence of a batch: a prompt and after it the hypotheses (item indices) that share it."""

    prompt: list[int]
    members: list[int]
    length: int  # len(prompt) + the hypotheses' lengths

    @property
    def packed(self) -> bool:
        return len(self.members) > 1


def sharing_window(model) -> int | None:
    """The longest exact packed row for ``model`` (its sliding window, else ``UNBOUNDED``); None: no 4D mask."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return None
    types = getattr(config, "layer_types", None)
    window = getattr(config, "sliding_window", None)
    if types is not None and not any(t != "full_attention" for t in types):
        return UNBOUNDED
    if types is not None and any(t not in ("full_attention", "sliding_attention") for t in types):
        return None  # chunked or other attention patterns: not handled
    return int(window) if window else UNBOUNDED


def row_window(model) -> int | None:
    """``sharing_window``, unbounded where ``packed_attention`` applies the window itself."""
    window = sharing_window(model)
    if window is None or window >= UNBOUNDED or packed_path(model) == "sparse":
        return None if window is None else UNBOUNDED
    log.info("%s: sliding window of %d positions; on this path (a dense packed mask) items longer than it "
             "run unshared (the packed mask would drop the window)", type(model).__name__, window)
    return window


def plan_rows(items, token_budget: int, share: bool, window: int | None = None, subset=None) -> list[Row]:
    """One row per item, or with ``share`` each prompt's items packed first-fit-decreasing into rows of
    at most ``token_budget`` tokens (and ``window`` positions); ``subset``: only these items."""
    indices = range(len(items)) if subset is None else [int(i) for i in subset]
    if not share:
        return [Row(items[i][0], [i], len(items[i][0]) + len(items[i][1])) for i in indices]
    groups: dict[tuple, list[int]] = {}
    for i in indices:
        groups.setdefault(tuple(items[i][0]), []).append(i)
    rows: list[Row] = []
    for key, members in groups.items():
        prompt = list(key)
        if len(members) == 1 or (window is not None and len(prompt) + max(len(items[i][1]) for i in members) > window):
            rows.extend(Row(prompt, [i], len(prompt) + len(items[i][1])) for i in members)
            continue
        open_rows: list[Row] = []
        for i in sorted(members, key=lambda i: (-len(items[i][1]), i)):
            h = len(items[i][1])
            fit = next((row for row in open_rows if row.length + h <= token_budget), None)  # first fit
            if fit is None:
                open_rows.append(Row(prompt, [i], len(prompt) + h))
            else:
                fit.members.append(i)
                fit.length += h
        for row in open_rows:
            row.members.sort()
        rows.extend(open_rows)
    return rows


def pad_rows(items, rows, pad_id, padding_side, device, dtype, attn, dense_mask=True):
    """(ids, mask, positions, ``where``: per item (row, last prompt column, first hypothesis column)) of a
    batch. The mask is 2D unless a row is packed, then 4D block-causal, or key-padding only without ``dense_mask``."""
    width = max(r.length for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    seg = torch.full((len(rows), width), -1, dtype=torch.long)  # -1 pad, 0 prompt, j hypothesis j
    where = {}
    for r, row in enumerate(rows):
        start = width - row.length if padding_side == "left" else 0
        n_p = len(row.prompt)
        ids[r, start:start + n_p] = torch.tensor(row.prompt, dtype=torch.long)
        pos[r, start:start + n_p] = torch.arange(n_p)
        seg[r, start:start + n_p] = 0
        col = start + n_p
        for j, i in enumerate(row.members, 1):
            h = items[i][1]
            ids[r, col:col + len(h)] = torch.tensor(h, dtype=torch.long)
            pos[r, col:col + len(h)] = torch.arange(n_p, n_p + len(h))
            seg[r, col:col + len(h)] = j
            where[i] = (r, start + n_p - 1, col)
            col += len(h)
    ids, pos = upload(ids, device), upload(pos, device)
    if not any(row.packed for row in rows):
        return ids, upload((seg >= 0).long(), device), pos, where
    seg = upload(seg, device)  # the [rows, width, width] mask is built where it is used
    if not dense_mask:
        return ids, (seg >= 0)[:, None, None, :], pos, where
    n = torch.arange(width, device=device)
    allow = (n[None, :, None] >= n[None, None, :]) & (seg[:, None, :] >= 0) & (
        (seg[:, None, :] == 0) | (seg[:, None, :] == seg[:, :, None]))
    allow |= torch.eye(width, dtype=torch.bool, device=device)[None]  # a pad query sees itself: no empty softmax row
    allow = allow[:, None]
    if attn != "sdpa":
        allow = torch.zeros(allow.shape, dtype=dtype, device=device).masked_fill_(~allow, torch.finfo(dtype).min)
    return ids, allow, pos, where


def flat_rows(items, rows, device):
    """Packed rows end to end in one unpadded row, as ``pad_rows(dense_mask=False)`` returns them."""
    ids: list[int] = []
    pos: list[int] = []
    where: dict[int, tuple[int, int, int]] = {}
    for row in rows:
        n_p, last_prompt = len(row.prompt), len(ids) + len(row.prompt) - 1
        ids += row.prompt
        pos += range(n_p)
        for i in row.members:
            h = items[i][1]
            where[i] = (0, last_prompt, len(ids))
            ids += h
            pos += range(n_p, n_p + len(h))
    mask = torch.ones((1, 1, 1, len(ids)), dtype=torch.bool, device=device)
    return (upload(torch.tensor([ids], dtype=torch.long), device), mask,
            upload(torch.tensor([pos], dtype=torch.long), device), where)


SPARSE_PACKED = True  # packed rows through packed_attention (False: the dense block-causal mask; benchmarks)
# packed rows of SDPA models: "sparse" (packed_attention), "flex" (flex_attention), "dense" (one masked call)
PACKED_CPU = "sparse"
PACKED_CUDA = "dense"  # on an H100 one dense masked call per layer was faster (docs/performance.md#gpu)


def packed_path(model) -> str:
    """How packed rows of ``model`` run: "sparse", "flex" or "dense" (models packed_attention cannot take)."""
    if not (SPARSE_PACKED and packed_attention.usable(model)):
        return "dense"
    return PACKED_CUDA if next(model.parameters()).device.type == "cuda" else PACKED_CPU


def sparse_packed(model) -> bool:
    """Whether packed rows of ``model`` skip the dense [rows, width, width] mask."""
    return packed_path(model) != "dense"


def run_base(model, ids, mask, positions, items, batch_rows, where):
    """The decoder stack's last hidden state for a batch (packed rows through ``packed_attention``)."""
    switch: Any = nullcontext()
    if mask.dim() == 4 and sparse_packed(model):
        spans: dict[tuple[int, int], tuple[int, int, int]] = {}  # a row's prompt (``flat_rows``: several in row 0)
        hyps = []
        for i, (r, last_prompt, first) in where.items():
            spans.setdefault((r, last_prompt), (r, last_prompt - len(items[i][0]) + 1, len(items[i][0])))
            hyps.append((r, first, len(items[i][1])))
        prompts = list(spans.values())
        if packed_path(model) == "flex":
            packing = packed_attention.flex_mask(prompts, hyps, tuple(ids.shape), ids.device)
        else:
            packing = packed_attention.layout(prompts, hyps, ids.device)
        switch = packed_attention.switched(model, packing)
    elif mask.dim() == 4 and mask.shape[-2] == 1 and mask.shape[-1] > 1:
        raise ValueError("a key-padding-only mask needs a model that takes packed_attention")
    with switch:
        return decoder_base(model)(input_ids=ids, attention_mask=mask, position_ids=positions,
                                   use_cache=False).last_hidden_state


@dataclass(frozen=True)
class Partner:
    """A head of another model (or ``LoadedModel``) in a joint pass, optionally an early exit."""
    source: object
    exit_layer: int | None = None

    @property
    def model(self):
        return self.source if isinstance(self.source, torch.nn.Module) else self.source.model  # type: ignore[attr-defined]


def head_models(model, heads: dict) -> list[tuple[object, list[str]]]:
    """The models of a pass and each one's heads: ``model`` first, then each partner's model."""
    owner = {h: model for h, k in heads.items() if not isinstance(k, Partner)}
    owner.update((h, k.model) for h, k in heads.items() if isinstance(k, Partner))
    groups = by_model(owner)
    return [(model, next((names for m, names in groups if m is model), [])), *(g for g in groups if g[0] is not model)]


def exit_of(k) -> int | None:
    return k.exit_layer if isinstance(k, Partner) else k


class LayerTap:
    """Keeps the hidden state after k decoder layers (k = 0: the embeddings) for an early-exit head; as a
    context manager, closed on exit."""

    def __init__(self, model, k: int):
        self.norm = final_norm(model)
        self.value: torch.Tensor | None = None
        if k == 0:
            self.handle = decoder_layers(model)[0].register_forward_pre_hook(self._keep_input, with_kwargs=True)
        else:
            self.handle = decoder_layers(model)[k - 1].register_forward_hook(self._keep)

    def _keep(self, module, args, output):
        self.value = output[0] if isinstance(output, tuple) else output

    def _keep_input(self, module, args, kwargs):
        self.value = args[0] if args else kwargs["hidden_states"]

    def normed(self, index=None) -> torch.Tensor:
        """The kept state through the final norm; with ``index`` only the positions picked."""
        value = self.kept()
        return self.norm(value if index is None else value[index])

    def kept(self) -> torch.Tensor:
        """The state the last forward pass left at the tapped layer."""
        if self.value is None:
            raise RuntimeError("LayerTap: no forward pass ran through the tapped layer yet")
        return self.value

    def close(self):
        self.handle.remove()

    def __enter__(self) -> LayerTap:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@torch.inference_mode()
def compute(model, items: Sequence[tuple[list[int], list[int]]], *, temperatures: Sequence[float], pad_id: int = 0,
            progress: Callable[[int], None] | None = None, heads: dict[str, int | None] | None = None,
            checkpoint=None, options: PassOptions | None = None) -> tuple[dict[str, TokenStats], EngineReport]:
    """Score every hypothesis token of ``items`` = [(prompt_ids, hyp_ids)] (the first from the last prompt
    token) in one pass of ``model``.
    ``heads``: name -> None (full model) or k (early exit after k layers); ``checkpoint``: batches it
    holds are skipped, computed ones go to its ``add``."""
    opts = options if options is not None else PassOptions()
    if is_encoder_decoder(model):
        if opts.distribution:
            raise ConfigError(f"the distributional statistics ({DIST_NAMES[0]}, KL, JSD) are computed for decoder-only "
                              "models; this pair's expert is an encoder-decoder")
        return seq2seq.compute(model, items, temperatures=temperatures, pad_id=pad_id, progress=progress, heads=heads,
                               checkpoint=checkpoint, options=replace(opts, prefix_sharing=True))
    heads = {"model": None} if heads is None else dict(heads)
    inputs = check_inputs(items, temperatures, opts.padding_side)
    models = head_models(model, heads)
    vocab = checked_vocab(models, items)

    start_time = time.perf_counter()
    window = pass_window([m for m, _ in models], opts.prefix_sharing)
    token_budget = min(opts.budget_for(m, longest_row(items, window is not None)) for m, _ in models)
    out = Outputs(*inputs, heads, checkpoint, rows=row_names(heads, opts.distribution))
    with ExitStack() as stack:  # the early exits' taps, closed at the end
        taps = {h: stack.enter_context(LayerTap(k.model if isinstance(k, Partner) else model,
                                                exit_of(k)))  # type: ignore[arg-type]
                for h, k in heads.items() if exit_of(k) is not None}
        job = PassJob(window, heads, taps, out, vocab, (pad_id, opts.padding_side), progress, checkpoint,
                      [(flops.costs(m), len(names)) for m, names in models], models, opts.distribution)
        processed, padded, n_batches, retries, token_budget, useful = _run_all(model, items, token_budget, job)
    stats = out.fetch()
    return stats, EngineReport(time.perf_counter() - start_time, int(processed), padded, n_batches,
                               token_budget=int(token_budget), oom_retries=retries, flops=useful)


def checked_vocab(models, items) -> int:
    """The vocabulary the pass's heads share, its tokens checked against it."""
    vocabs = {m.get_output_embeddings().weight.shape[0] for m, _ in models}
    if len(vocabs) > 1:
        raise ConfigError(f"the joint pass's models have vocabularies of {sorted(vocabs)} entries: the distributional "
                          "statistics compare the two distributions over one vocabulary")
    vocab = vocabs.pop()
    top = max((max(h) for _, h in items if h), default=-1)
    if top >= vocab:
        raise InputError(f"token id {int(top)} is outside the model's vocabulary of {vocab}")
    return vocab


def row_names(heads: dict, distribution: bool) -> dict[str, tuple[str, ...]]:
    """Each head's rows: logp, logp_max and with ``distribution`` its ``stats.DIST_NAMES``."""
    if not distribution:
        return {h: ROW_NAMES[:2] for h in heads}
    paired = "expert" in heads
    return {h: ROW_NAMES[:2] + (DIST_NAMES if paired and h != "expert" else DIST_NAMES[:1]) for h in heads}


@dataclass(frozen=True)
class PassJob:
    """What one pass's batches share (``compute`` sets it up, ``_run_all`` runs it)."""
    window: int | None  # prefix sharing's row window (None: unshared)
    heads: dict
    taps: dict  # an early exit's LayerTap per head
    out: Outputs
    vocab: int
    pad: tuple[int, str]  # (pad id, padding side)
    progress: Callable[[int], None] | None
    checkpoint: object
    costs: list  # (flops.Costs or None, its heads) per model: the useful FLOPs (``flops.rows_flops``)
    models: list  # (model, its heads) of the pass (``head_models``)
    distribution: bool  # the distributional statistics too (``row_names``)


def _run_all(model, items, token_budget: int, job: PassJob) -> tuple[int, int, int, int, int, float | None]:
    """Score every item into ``job.out``: (tokens, padded, batches, OOM retries, final token budget, useful
    FLOPs or None)."""
    window, out, checkpoint = job.window, job.out, job.checkpoint
    useful: float | None = 0.0 if all(c is not None for c, _ in job.costs) else None
    done = np.zeros(len(items), dtype=bool)
    layers = layer_list(model)
    processed = padded = n_batches = retries = 0
    while not done.all():  # one round; another with half the budget after an out-of-memory
        # the plan is dealt before the first batch (the part of it this process runs), not again after a retry
        batches, members, costs, foreign = planned_batches(items, token_budget, window, checkpoint, job.progress,
                                                           np.flatnonzero(~done), deal_plan=not retries)
        if foreign is not None:
            done |= foreign
        try:  # the share done, layer by layer: an estimate within the first batch
            for batch_rows, ticks in run_batches(batches, members, costs, checkpoint, job.progress, done):
                sources = []
                for m, names in job.models:  # a joint pass: each model on the same rows
                    with layer_ticks(layers if m is model else [], ticks):
                        final, where, size = forward(m, items, batch_rows, job.pad)
                    sources.append((m, where, {h: final.__getitem__ if exit_of(job.heads[h]) is None
                                               else job.taps[h].normed for h in names}))
                    padded += size
                _score_batch(items, sources, out, job.vocab, job.distribution)
                done[list(where)] = True
                processed += sum(r.length for r in batch_rows)
                if useful is not None:
                    useful += sum(flops.rows_flops(c, items, batch_rows, n) for c, n in job.costs if c)
                n_batches += 1
        except Exception as err:  # noqa: BLE001 - out-of-memory is retried, anything else raised
            if not budget.is_oom(err):
                raise
            if len(batch_rows) == 1 and not batch_rows[0].packed:  # one item alone: no smaller batch
                raise budget.OutOfMemory(
                    f"out of memory on one item of {batch_rows[0].length} tokens alone ({type(err).__name__}); "
                    "lower runtime.max_length or use a larger device") from err
            new = max(1, token_budget // 2)
            log.warning("out of memory at token_budget=%d: halved to %d, the batch is retried", token_budget, new)
            token_budget, retries = new, retries + 1
            del err
            if next(model.parameters()).device.type == "cuda":
                torch.cuda.empty_cache()
    return processed, padded, n_batches, retries, token_budget, useful


def forward(model, items, batch_rows: list[Row], pad: tuple[int, str]):
    """One model's decoder on a batch of rows: (its last hidden state, ``where``, padded tokens)."""
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    if packed_path(model) == "sparse" and batch_rows[0].packed:  # packed rows end to end, unpadded
        ids, mask, positions, where = flat_rows(items, batch_rows, device)
    else:
        attn = getattr(getattr(model, "config", None), "_attn_implementation", None)
        ids, mask, positions, where = pad_rows(items, batch_rows, pad[0], pad[1], device, dtype, attn,
                                                dense_mask=not sparse_packed(model))
    return run_base(model, ids, mask, positions, items, batch_rows, where), where, ids.numel()


def pass_window(models, share: bool) -> int | None:
    """The row window of a pass over ``models`` (``row_window``); None: unshared (no ``share``, or a model cannot
    pack)."""
    windows = [row_window(m) for m in models] if share else [None]
    return None if None in windows else min(w for w in windows if w is not None)


def planned_batches(items, token_budget: int, window: int | None, checkpoint, progress, subset=None,
                    deal_plan: bool = True) -> tuple[list[list[Row]], list[list[int]], list[int], np.ndarray | None]:
    """(batches of rows, each one's items, each one's padded tokens, the items other processes run or None) of
    ``items`` (``subset``: only these); ``deal_plan``: tell ``checkpoint`` and ``progress`` the plan (``deal``)."""
    rows = plan_rows(items, token_budget, window is not None, window, subset=subset)
    batches = list(batch_rows_of(rows, token_budget))
    members = [[i for r in b for i in r.members] for b in batches]
    costs = [max(r.length for r in b) * len(b) for b in batches]
    foreign = None
    if deal_plan:  # the tokens of each batch: a packed row's shared prompt once; the plan for the work line
        packed = sum(r.packed for r in rows)
        detail = f"{len(rows):,} row{'s' * (len(rows) != 1)}" + (
            f", {packed:,} packed: a prompt once for its hypotheses" if packed else "")
        if window is not None and window < UNBOUNDED:
            detail += f"; sliding window {window}: longer items unshared"
        foreign = deal(checkpoint, members, costs, progress, tokens=[sum(r.length for r in b) for b in batches],
                       detail=detail)
    return batches, members, costs, foreign


def longest_row(items, share: bool) -> int:
    """The longest sequence a batch may hold: a packed row can fill the budget, else one item."""
    return UNBOUNDED if share else max((len(p) + len(h) for p, h in items), default=1)


def batch_rows_of(rows: list[Row], token_budget: int):
    """Packed rows and single items batch apart, each with padding at most ``MAX_PADDING``."""
    for packed in (True, False):
        part = [r for r in rows if r.packed == packed]
        lengths = [r.length for r in part]
        for batch in make_batches(lengths, token_budget, max_padding=MAX_PADDING):
            yield [part[b] for b in batch]


def _score_batch(items, sources, out: Outputs, vocab, distribution: bool):
    """The LM heads on the states predicting hypothesis tokens; ``sources``: (model, ``where``,
    {head: its states at an index}) per model."""
    first = sources[0][1]
    targets = [t for i in first for t in items[i][1]]
    picked, heads = {}, {}
    for m, where, states_at in sources:
        # every model's rows in the same item order; the prompt's last token predicts the first hypothesis token
        rows = [where[i][0] for i in first for _ in items[i][1]]
        cols = [c for i in first for c in (where[i][1], *range(where[i][2], where[i][2] + len(items[i][1]) - 1))]
        device = next(m.parameters()).device
        index = (upload(torch.tensor(rows), device), upload(torch.tensor(cols), device))
        for h, at in states_at.items():
            picked[h], heads[h] = at(index), m
    lead = next(iter(heads.values())).get_output_embeddings().weight
    target_t = upload(torch.tensor(targets), lead.device)
    streamed = {} if distribution else streamed_heads(heads, picked, target_t, vocab, out.temperatures)
    rest = {h: m for h, m in heads.items() if h not in streamed}
    per_head = {**streamed, **chunked_heads(rest, picked, target_t, vocab, out.temperatures, distribution)}
    out.add(first, {h: per_head[h] for h in heads})


def by_model(heads: dict) -> list[tuple]:
    """(model, its head names) per distinct model of ``heads``: the heads one product computes."""
    return [(m, [h for h, hm in heads.items() if hm is m]) for m in {id(m): m for m in heads.values()}.values()]


def streamed_heads(heads: dict, picked: dict, targets: torch.Tensor, vocab: int, temperatures) -> dict:
    """{head: (logp, logp_max)} of the heads whose matrix streams once per batch (``head_stream``)."""
    got: dict[str, tuple] = {}
    for m, names in by_model(heads):
        lin = head_stream.linear_head(m)
        if lin is None:
            continue
        rows = [picked[h].shape[0] for h in names]
        lp, lpm = head_stream.streamed_statistics(head_stream.linear_blocks(lin), vocab,
                                                  torch.cat([picked[h] for h in names]),
                                                  targets.to(lin.weight.device).repeat(len(names)),
                                                  temperatures, softcap(m))
        got.update(zip(names, zip(lp.split(rows, dim=1), lpm.split(rows, dim=1))))
    return got


def dist_logits(heads: dict, hidden: dict, vocab: int) -> dict:
    """{head: raw logits}, a plain CPU head's as ``divergence.HEAD_BLOCK``-wide column blocks."""
    got: dict = {}
    for m, names in by_model(heads):
        lin = head_stream.linear_head(m)
        if lin is None:
            got.update((h, raw_logits(m, hidden[h])) for h in names)
            continue
        rows = [hidden[h].shape[0] for h in names]
        blocks = head_stream.logit_blocks(head_stream.linear_blocks(lin), vocab, torch.cat([hidden[h] for h in names]),
                                          divergence.HEAD_BLOCK)
        parts = [z.split(rows) for z in blocks]
        got.update((h, [p[k] for p in parts]) for k, h in enumerate(names))
    return got


def chunked_heads(heads: dict, picked: dict, targets: torch.Tensor, vocab: int, temperatures,
                  distribution: bool) -> dict:
    """{head: statistics} from row chunks of ``chunk_rows``."""
    if not heads:
        return {}
    lead = next(iter(heads.values())).get_output_embeddings().weight
    chunk = chunk_rows(vocab, lead.device, lead.element_size())
    if distribution and lead.device.type == "cpu":  # every head's logits of a chunk at once, in their dtype
        chunk = max(1, DIST_CHUNK_BYTES // (len(heads) * vocab * lead.element_size()))
    caps = {h: softcap(m) for h, m in heads.items()}
    got: dict[str, list] = {h: [] for h in heads}
    for s in range(0, len(targets), chunk):
        if distribution:  # logp and logp_max too, in float64 from the same sums
            logits = dist_logits(heads, {h: picked[h][s:s + chunk] for h in heads}, vocab)
            extra = divergence.statistics(logits, caps, temperatures, "expert" if "expert" in heads else None,
                                          targets[s:s + chunk])
            for h in logits:
                got[h].append(tuple(extra[h].values()))
            continue
        for h, m in heads.items():
            got[h].append(token_statistics(raw_logits(m, picked[h][s:s + chunk]), targets[s:s + chunk], temperatures,
                                           caps[h]))
    return {h: tuple(torch.cat(column, dim=1) for column in zip(*parts)) for h, parts in got.items()}
