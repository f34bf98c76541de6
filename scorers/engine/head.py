"""The LM head on final hidden states and the per-token statistics read from its logits."""

from __future__ import annotations

import math
from typing import Sequence

import torch

HEAD_CHUNK_ELEMENTS = 1 << 24  # logits computed per LM-head chunk (rows x vocab)
STATS_BLOCK_ELEMENTS = 1 << 22  # on an accelerator: logits per block of token_statistics that are converted


def raw_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The LM head's logits in the model's own dtype, not soft-capped (``token_statistics`` caps them)."""
    return model.get_output_embeddings()(hidden)


def softcap(model) -> float | None:
    """Gemma-style final logit soft-capping (``tanh(z / cap) * cap``), or None."""
    return getattr(model.config, "final_logit_softcapping", None) or None


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """Logits from final hidden states (at least float32), soft-capped where the config asks."""
    return prepared(raw_logits(model, hidden), softcap(model))


def prepared(logits: torch.Tensor, cap: float | None, out: torch.Tensor | None = None) -> torch.Tensor:
    """``logits`` at least float32, soft-capped with ``cap``, into ``out`` when given (elementwise)."""
    if out is None:  # a copy where it is capped in place
        out = logits.to(torch.float64 if logits.dtype == torch.float64 else torch.float32, copy=bool(cap))
    else:
        out.copy_(logits)
    return out.div_(cap).tanh_().mul_(cap) if cap else out


def chunk_rows(vocab: int, device: torch.device, itemsize: int) -> int:
    """Rows per LM-head chunk: on a CPU ``HEAD_CHUNK_ELEMENTS`` logits, on CUDA a quarter of free memory."""
    if device.type != "cuda":
        return max(1, HEAD_CHUNK_ELEMENTS // vocab)
    free, _ = torch.cuda.mem_get_info(device)
    return rows_for_memory(free // 4, vocab, itemsize)


def rows_for_memory(budget_bytes: int, vocab: int, itemsize: int) -> int:
    """Head rows whose logits (``itemsize`` bytes each) fit in ``budget_bytes``, in [1, 65536]."""
    return int(min(1 << 16, max(1, budget_bytes // max(1, vocab * itemsize))))


STATS_ROWS = 4  # logit rows per block of token_statistics and CPU thread: a block and its scratch stay in L2
EXP_FLOOR = -80.0  # z/T raised to this: below float64's rounding of a sum >= 1; CPU exp is ~10x slower under -87


def stats_rows(logits: torch.Tensor) -> int:
    """Rows per block of ``token_statistics``: ``STATS_ROWS`` per CPU thread; on an accelerator all, or
    ``STATS_BLOCK_ELEMENTS`` logits where they are converted."""
    if logits.device.type != "cpu":
        if logits.dtype in (torch.float32, torch.float64):
            return max(logits.shape[0], 1)
        return max(1, STATS_BLOCK_ELEMENTS // max(1, logits.shape[1]))
    return STATS_ROWS * max(1, torch.get_num_threads())


def scaled_exp(shifted: torch.Tensor, t: float, out: torch.Tensor) -> torch.Tensor:
    """exp(max(shifted / t, EXP_FLOOR)) into ``out``."""
    if t == 1.0:
        torch.clamp(shifted, min=EXP_FLOOR, out=out)
    elif math.frexp(t)[0] == 0.5:  # t a power of two: x * (1/t) == x / t exactly, and ~2.5x faster
        torch.mul(shifted, 1.0 / t, out=out).clamp_(min=EXP_FLOOR)
    else:
        torch.div(shifted, t, out=out).clamp_(min=EXP_FLOOR)
    return out.exp_()


def token_statistics(logits: torch.Tensor, targets: torch.Tensor, temperatures: Sequence[float],
                     cap: float | None = None):
    """(logp, logp_max) [n_temps, n] from logits [n, V], in blocks of rows shifted by their maxima, one
    exp per temperature (inputs raised to ``EXP_FLOOR``); sums in float32 (float64 for float64)."""
    n, vocab = logits.shape
    work = torch.float64 if logits.dtype == torch.float64 else torch.float32
    convert = logits.dtype != work or bool(cap)
    rows = min(stats_rows(logits), max(n, 1))
    lse = logits.new_empty((len(temperatures), n), dtype=work)
    row_max = logits.new_empty((n, 1), dtype=work)
    shifted_all, scratch_all = logits.new_empty((rows, vocab), dtype=work), logits.new_empty((rows, vocab), dtype=work)
    converted_all = logits.new_empty((rows, vocab), dtype=work) if convert else None
    for s in range(0, n, rows):
        block = logits[s:s + rows]
        k = block.shape[0]
        if converted_all is not None:
            block = prepared(block, cap, out=converted_all[:k])
        shifted, e = shifted_all[:k], scratch_all[:k]
        torch.amax(block, dim=-1, keepdim=True, out=row_max[s:s + k])
        torch.sub(block, row_max[s:s + k], out=shifted)  # <= 0, the max is 0
        for j, t in enumerate(temperatures):
            torch.sum(scaled_exp(shifted, t, e), dim=-1, out=lse[j, s:s + k])
    lse.log_()
    z_target = prepared(logits.gather(1, targets[:, None]), cap) - row_max  # the target's shifted logit
    lp = torch.stack([z_target[:, 0] / t for t in temperatures]) - lse
    return lp, lse.neg_()
