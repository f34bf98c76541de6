"""Attention for packed rows (``engine.plan_rows``) that skips what the block-causal mask forbids: each
prompt causally on its own, the hypotheses as one batch over (prompt + own keys); the dense mask's numbers. Sliding
windows apply on each token's unpacked position.
Registered with transformers on import; plain SDPA while no layout is set (docs/performance.md#prefix-sharing)."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from cscore.scorers.engine.transfer import upload

NAME = "cscore_packed"
_PACKED: ContextVar = ContextVar("cscore_packed", default=None)  # the batch's Layout or flex_mask (``switched``)


@dataclass
class Layout:
    """Where the segments of a batch of packed rows are: per hypothesis its row, query and key columns
    (the prompt's, then its own), ``allow`` and ``dist`` (unpacked query minus key position); ``real``:
    the real query slots; ``p_*``: the same of the prompts as one batch."""

    prompts: list[tuple[int, int, int]]
    rows: torch.Tensor
    q_cols: torch.Tensor
    k_cols: torch.Tensor
    allow: torch.Tensor
    real: torch.Tensor
    real_rows: torch.Tensor
    real_cols: torch.Tensor
    p_rows: torch.Tensor
    p_cols: torch.Tensor
    p_real: torch.Tensor
    p_real_rows: torch.Tensor
    p_real_cols: torch.Tensor
    dist: torch.Tensor
    _bias: dict = field(default_factory=dict, init=False, repr=False)

    def bias(self, dtype: torch.dtype, window: int | None = None) -> torch.Tensor:
        """``allow`` (within ``window``) as the additive mask (0 / -inf), made once per batch."""
        if (dtype, window) not in self._bias:
            allow = self.allow if window is None else self.allow & (self.dist < window)
            self._bias[dtype, window] = torch.zeros(allow.shape, dtype=dtype, device=allow.device).masked_fill_(
                ~allow, -torch.inf)
        return self._bias[dtype, window]


BATCH_PROMPTS = "cuda"  # where the prompts run as one SDPA call: "cuda" (launch-bound), "always", "never"


def prompt_index(rows: list[tuple[int, int, int]]) -> tuple[torch.Tensor, ...]:
    """(row index, columns [rows, P], real slots, their rows, their columns) of the prompts."""
    row_t, starts, lengths = torch.tensor(rows, dtype=torch.long).unbind(1)
    pos = torch.arange(int(lengths.max()))
    valid = pos < lengths[:, None]
    cols = starts[:, None] + torch.minimum(pos, lengths[:, None] - 1)  # past its end: any column of the row
    real = torch.flatten(valid).nonzero().squeeze(1)
    return row_t, cols, real, row_t[:, None].expand(cols.shape).flatten()[real], cols.flatten()[real]


def layout(rows: list[tuple[int, int, int]], hyps: list[tuple[int, int, int]], device) -> Layout:
    """The ``Layout`` of (row, first column, length) per prompt (``rows``) and per hypothesis."""
    n = len(hyps)
    lh = max(length for _, _, length in hyps)
    pmax = max(p for _, _, p in rows)
    # (first column, length) of each hypothesis's prompt: the last one before it in its row
    prompt_of = [max((s, p) for pr, s, p in rows if pr == r and s < col) for r, col, _ in hyps]
    rows_t, cols, lengths = torch.tensor(hyps, dtype=torch.long).unbind(1)
    starts, p_len = torch.tensor(prompt_of, dtype=torch.long).unbind(1)
    q_pos, k_pos = torch.arange(lh), torch.arange(pmax + lh)
    q_valid, p_valid = q_pos < lengths[:, None], k_pos[:pmax] < p_len[:, None]
    q_cols = (cols[:, None] + q_pos) * q_valid  # a hypothesis's columns, then 0
    k_cols = torch.cat([(starts[:, None] + k_pos[:pmax]) * p_valid, q_cols], dim=1)  # its prompt's, then its own
    k_valid = torch.cat([p_valid, q_valid], dim=1)
    own = (k_pos[None, :] >= pmax) & ((k_pos[None, :] - pmax) <= q_pos[:, None])  # [Lh, P + Lh] causal, own part
    allow = k_valid[:, None, :] & ((k_pos[None, None, :] < pmax) | own[None])
    allow[:, :, 0] |= ~q_valid  # a padding query sees one key: no empty softmax row (its output is dropped)
    # unpacked positions: a prompt key k is at k, an own key at p + (k - pmax), a query q at p + q
    dist = torch.where(k_pos[None, None, :] < pmax, p_len[:, None, None] + q_pos[None, :, None] - k_pos[None, None, :],
                       q_pos[None, :, None] - (k_pos[None, None, :] - pmax))
    dist = dist.masked_fill(~q_valid[:, :, None], 0).to(torch.int32)
    real = torch.flatten(q_valid).nonzero().squeeze(1)
    return Layout(list(rows), *(upload(t, device) for t in (
        rows_t, q_cols, k_cols, allow[:, None], real, rows_t[:, None].expand(n, lh).flatten()[real],
        q_cols.flatten()[real], *prompt_index(list(rows)), dist[:, None])))


def causal(length: int, window: int | None, device) -> dict:
    """SDPA's causal arguments for a prompt of ``length``: ``is_causal``, or a sliding-window mask."""
    if window is None or length <= window:
        return {"is_causal": True}
    n = torch.arange(length, device=device)
    diff = n[:, None] - n[None, :]
    return {"attn_mask": (diff >= 0) & (diff < window)}


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """query [B, H, L, D], key / value [B, Hkv, L, D] -> ([B, L, H, D], None), as transformers' SDPA; under a
    ``flex_mask`` through flex_attention (plain SDPA while no layout or mask is set)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    lay = _PACKED.get()
    if lay is None or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)  # is_causal, when given, among them
    gqa = query.shape[1] != key.shape[1]
    if not isinstance(lay, Layout):  # a flex_mask
        return _flex_attention(query.device.type)(query, key, value, block_mask=lay, scale=scaling,
                                                  enable_gqa=gqa).transpose(1, 2), None
    # enable_gqa with a mask: not on CUDA (SDPA would fall back to its math kernel)
    masked_gqa = gqa and query.device.type != "cuda"
    window = kwargs.get("sliding_window")  # a sliding-window layer's (transformers passes it), else None
    window = int(window) if window else None
    b, h, width, d = query.shape
    out = query.new_zeros((b, width, h, d))  # the layout transformers wants back: no transposed copy
    if BATCH_PROMPTS == "always" or (BATCH_PROMPTS == "cuda" and query.device.type == "cuda"):  # one padded call
        p_rows = lay.p_rows[:, None]
        q, k, v = (x[p_rows, :, lay.p_cols].transpose(1, 2) for x in (query, key, value))  # [R, H(kv), P, D]
        got = F.scaled_dot_product_attention(q, k, v, scale=scaling, enable_gqa=gqa,
                                             **causal(q.shape[2], window, q.device))
        out[lay.p_real_rows, lay.p_real_cols] = got.transpose(1, 2).reshape(-1, h, d)[lay.p_real]
    else:
        for r, s, p in lay.prompts:  # each prompt causally on its own
            ks = slice(s, s + p)
            out[r, ks] = F.scaled_dot_product_attention(query[r:r + 1, :, ks], key[r:r + 1, :, ks],
                                                        value[r:r + 1, :, ks], scale=scaling, enable_gqa=gqa,
                                                        **causal(p, window, query.device))[0].transpose(0, 1)
    rows = lay.rows[:, None]
    q = query[rows, :, lay.q_cols].transpose(1, 2)  # [n, H, Lh, D]
    k, v = (x[rows, :, lay.k_cols].transpose(1, 2) for x in (key, value))
    if gqa and not masked_gqa:  # key/value heads repeated for their query heads where SDPA does not share them
        k, v = (x.repeat_interleave(h // x.shape[1], dim=1) for x in (k, v))
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=lay.bias(q.dtype, window), scale=scaling,
                                         enable_gqa=masked_gqa)  # [n, H, Lh, D]
    out[lay.real_rows, lay.real_cols] = got.transpose(1, 2).reshape(-1, h, d)[lay.real]
    return out, None


def flex_mask(rows: list[tuple[int, int, int]], hyps: list[tuple[int, int, int]], shape: tuple[int, int], device):
    """The block-causal pattern of a batch of packed rows (``shape`` = (rows, width)) as a ``BlockMask``."""
    from torch.nn.attention.flex_attention import create_block_mask

    seg = torch.full(shape, -1, dtype=torch.long)  # -1 padding, 0 prompt, j hypothesis j of its row
    for r, s, p in rows:
        seg[r, s:s + p] = 0
    count: dict[int, int] = {}
    for r, col, length in hyps:
        count[r] = count.get(r, 0) + 1
        seg[r, col:col + length] = count[r]
    seg = upload(seg, device)

    def allowed(b, h, q, kv):
        key, query = seg[b, kv], seg[b, q]
        return ((kv <= q) & (key >= 0) & ((key == 0) | (key == query))) | (q == kv)  # a pad query sees itself

    return create_block_mask(allowed, shape[0], None, shape[1], shape[1], device=device,
                             _compile=torch.device(device).type == "cuda")


@functools.cache
def _flex_attention(device_type: str):
    """flex_attention, compiled on CUDA (its eager form is a reference implementation)."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=True) if device_type == "cuda" else flex_attention


def register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(NAME, attention)


def usable(model) -> bool:
    """SDPA models without attention-logit soft-capping (their attention function is plain SDPA)."""
    config = getattr(model, "config", None)
    return (getattr(config, "_attn_implementation", None) == "sdpa"
            and not getattr(config, "attn_logit_softcapping", None))


@contextmanager
def switched(model, value):
    """Run ``model``'s attention for the block inside through ``attention`` (``value`` a ``Layout`` or a
    ``flex_mask``)."""
    configs = {id(m.config): m.config for m in model.modules() if getattr(m, "config", None) is not None}
    saved = {k: c._attn_implementation for k, c in configs.items()}
    token = _PACKED.set(value)
    try:
        for c in configs.values():
            c._attn_implementation = NAME
        yield
    finally:
        for k, c in configs.items():
            c._attn_implementation = saved[k]
        _PACKED.reset(token)


register()
