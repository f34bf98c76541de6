"""The statistics engine: one forward pass of one model over all items -> TokenStats.

* Items are sorted by length and packed into batches of at most ``token_budget`` padded
  tokens; results go back to the input order, so scores do not depend on batching.
* Position ids are computed from the attention mask, so left and right padding agree.
* The LM head runs only on the hidden states that predict hypothesis tokens, in chunks:
  no full-vocabulary logit tensor is built for the whole sequence.
* Each item is (prompt_ids, hyp_ids); a later prefix-sharing path can feed the prompt
  once per group and the hypotheses after it without changing what is returned.
* Encoder-decoder models take the path of ``seq2seq.py`` (same outputs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from cscore.errors import ConfigError
from cscore.scorers.anatomy import decoder_base, decoder_layers, final_norm, is_encoder_decoder
from cscore.scorers.stats import TokenStats
from cscore.scorers.tokenize import InputError

HEAD_CHUNK_ELEMENTS = 1 << 24  # logits computed per LM-head chunk (rows x vocab)


@dataclass
class EngineReport:
    seconds: float  # forward-pass time (for a cache hit: the time of the run that computed it)
    tokens: int  # input tokens processed (prompt + hypothesis, no padding)
    padded_tokens: int
    batches: int
    cached: bool = False  # read from the statistics cache instead of computed
    fetch_seconds: float | None = None  # time this run spent getting the statistics


def make_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices grouped into batches, longest first; each batch's max_len * size <= budget
    (an item longer than the budget gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches, current, current_max = [], [], 0
    for i in order:
        new_max = max(current_max, lengths[i])
        if current and new_max * (len(current) + 1) > token_budget:
            batches.append(current)
            current, new_max = [], lengths[i]
        current.append(i)
        current_max = new_max
    if current:
        batches.append(current)
    return batches


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """Logits from final hidden states through the model's LM head (at least float32),
    including Gemma-style final logit soft-capping when the config asks for it."""
    logits = model.get_output_embeddings()(hidden)
    if logits.dtype != torch.float64:
        logits = logits.float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def token_statistics(logits: torch.Tensor, targets: torch.Tensor, temperatures: Sequence[float]):
    """(logp, logp_max) of shape [n_temps, n] from float32 logits [n, V]."""
    zmax = logits.max(dim=-1).values
    shifted = logits - zmax[:, None]  # <= 0, the max is 0
    z_target = shifted.gather(1, targets[:, None]).squeeze(1)
    lp, lpmax = [], []
    for t in temperatures:
        lse = torch.logsumexp(shifted / t, dim=-1)
        lp.append(z_target / t - lse)
        lpmax.append(-lse)
    return torch.stack(lp), torch.stack(lpmax)


def _pad_batch(items, idx, pad_id, padding_side, device):
    seqs = [items[i][0] + items[i][1] for i in idx]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    starts = []
    for r, s in enumerate(seqs):
        start = width - len(s) if padding_side == "left" else 0
        ids[r, start:start + len(s)] = torch.tensor(s, dtype=torch.long)
        mask[r, start:start + len(s)] = 1
        starts.append(start)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device), starts


class LayerTap:
    """Keeps the output of decoder layer k-1 (i.e. the hidden state after k layers) during a
    forward pass, so an early-exit head reads it without a second pass."""

    def __init__(self, model, k: int):
        self.norm, self.value = final_norm(model), None
        self.handle = decoder_layers(model)[k - 1].register_forward_hook(self._keep)

    def _keep(self, module, args, output):
        self.value = output[0] if isinstance(output, tuple) else output

    def normed(self) -> torch.Tensor:
        return self.norm(self.value)

    def close(self):
        self.handle.remove()


def check_inputs(items, temperatures: Sequence[float], padding_side: str) -> tuple[float, ...]:
    """The checks every engine pass makes; returns the temperatures as floats."""
    if padding_side not in ("left", "right"):
        raise ConfigError(f"padding_side must be left or right, got {padding_side!r}")
    temperatures = tuple(float(t) for t in temperatures)
    if not temperatures or min(temperatures) <= 0:
        raise ConfigError(f"temperatures must be positive, got {temperatures}")
    for i, (p, h) in enumerate(items):
        if not p or not h:
            raise InputError(f"item {i}: need at least one prompt token and one hypothesis token")
    return temperatures


@torch.inference_mode()
def compute(model, items: Sequence[tuple[list[int], list[int]]], *, temperatures: Sequence[float],
            token_budget: int = 4096, padding_side: str = "right", pad_id: int = 0,
            progress: Callable[[int], None] | None = None, heads: dict[str, int | None] | None = None,
            ) -> tuple[dict[str, TokenStats], EngineReport]:
    """Run ``model`` (a transformers causal LM) once over ``items`` = [(prompt_ids, hyp_ids)]
    (an encoder-decoder model goes to ``seq2seq.compute``: items are (encoder ids, targets)).

    Every hypothesis token is scored, the first included: it is predicted from the last
    prompt token. ``heads`` maps a name to None (the full model) or k (an early exit after
    k decoder layers, then the final norm and LM head: the same numbers as running the
    truncated model, read from the same pass). ``progress`` gets items finished per batch."""
    if is_encoder_decoder(model):
        from cscore.scorers import seq2seq

        return seq2seq.compute(model, items, temperatures=temperatures, token_budget=token_budget,
                               padding_side=padding_side, pad_id=pad_id, progress=progress, heads=heads)
    heads = {"model": None} if heads is None else dict(heads)
    temperatures = check_inputs(items, temperatures, padding_side)
    device = next(model.parameters()).device
    base = decoder_base(model)
    lengths = [len(p) + len(h) for p, h in items]
    hyp_lens = np.array([len(h) for _, h in items], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(hyp_lens)])
    n_tok, n_t = int(offsets[-1]), len(temperatures)
    logp = {h: np.empty((n_t, n_tok), dtype=np.float64) for h in heads}
    logp_max = {h: np.empty((n_t, n_tok), dtype=np.float64) for h in heads}
    token_ids = np.concatenate([np.asarray(h, dtype=np.int64) for _, h in items]) if items else np.zeros(0, np.int64)
    vocab = model.get_output_embeddings().weight.shape[0]
    if n_tok and token_ids.max() >= vocab:
        raise InputError(f"token id {int(token_ids.max())} is outside the model's vocabulary of {vocab}")

    start_time = time.perf_counter()
    batches = make_batches(lengths, token_budget)
    taps = {h: LayerTap(model, k) for h, k in heads.items() if k is not None}
    padded = 0
    try:
        for idx in batches:
            ids, mask, positions, starts = _pad_batch(items, idx, pad_id, padding_side, device)
            padded += ids.numel()
            final = base(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False).last_hidden_state
            hidden = {h: (final if k is None else taps[h].normed()) for h, k in heads.items()}
            _score_batch(model, items, idx, starts, hidden, offsets, temperatures, logp, logp_max, vocab, device)
            if progress is not None:
                progress(len(idx))
    finally:
        for tap in taps.values():
            tap.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start_time
    stats = {h: TokenStats(temperatures, offsets, token_ids, logp[h], logp_max[h]) for h in heads}
    return stats, EngineReport(seconds, int(sum(lengths)), padded, len(batches))


def _score_batch(model, items, idx, starts, hidden, offsets, temperatures, logp, logp_max, vocab, device):
    """Gather the states that predict hypothesis tokens; LM head on those only, in chunks."""
    rows, cols, targets, dest = [], [], [], []
    for r, i in enumerate(idx):
        p, h = items[i]
        first = starts[r] + len(p)  # position of the first hypothesis token
        rows.extend([r] * len(h))
        cols.extend(range(first - 1, first - 1 + len(h)))
        targets.extend(h)
        dest.append(np.arange(offsets[i], offsets[i + 1]))
    row_t, col_t = torch.tensor(rows, device=device), torch.tensor(cols, device=device)
    target_t = torch.tensor(targets, device=device)
    dest = np.concatenate(dest)
    chunk = max(1, HEAD_CHUNK_ELEMENTS // vocab)
    for name, states in hidden.items():
        picked = states[row_t, col_t]
        for s in range(0, len(targets), chunk):
            logits = head_logits(model, picked[s:s + chunk])
            lp, lpm = token_statistics(logits, target_t[s:s + chunk], temperatures)
            logp[name][:, dest[s:s + chunk]] = lp.cpu().numpy()
            logp_max[name][:, dest[s:s + chunk]] = lpm.cpu().numpy()
