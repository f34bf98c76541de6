"""The LM head on final hidden states and the per-token statistics read from its logits, shared
by the statistics engine, its seq2seq path, the judge and the token-budget probe."""

from __future__ import annotations

import math
from typing import Sequence

import torch

HEAD_CHUNK_ELEMENTS = 1 << 24  # logits computed per LM-head chunk (rows x vocab)


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


STATS_ROWS = 4  # logit rows per block of token_statistics and CPU thread: a block and its scratch stay in L2
# z/T is raised to this before exp: exp(-80) < 2e-35 changes a sum >= 1 by less than float64's
# rounding even over a whole vocabulary, while torch's CPU exp takes a ~10x slower path for inputs
# under float32's underflow (about -87), where most of a large vocabulary lies at low T
EXP_FLOOR = -80.0


def stats_rows(logits: torch.Tensor) -> int:
    """Rows per block of ``token_statistics``: on a CPU ``STATS_ROWS`` per thread (each operation
    on a block is split over the threads, and every split is a barrier: blocks too small for the
    thread count are mostly waiting), on an accelerator all rows at once."""
    if logits.device.type != "cpu":
        return max(logits.shape[0], 1)
    return STATS_ROWS * max(1, torch.get_num_threads())


def _exact_inverse(t: float) -> bool:
    """Whether 1/t is exact, i.e. t is a power of two (0.5, 2, ...)."""
    mantissa, _ = math.frexp(t)
    return mantissa == 0.5


def token_statistics(logits: torch.Tensor, targets: torch.Tensor, temperatures: Sequence[float]):
    """(logp, logp_max) of shape [n_temps, n] from float32 logits [n, V], in blocks of rows
    (``stats_rows``): each block is shifted by its row maxima once, then per temperature one exp
    into a reused scratch block and a sum written straight into the [n_temps, n] result (the max
    of z/T is 0 after the shift, so the log of that sum is logsumexp(z/T) without logsumexp's own
    max and subtraction passes; inputs under ``EXP_FLOOR`` are raised to it). The few operations
    over all rows (log, the target's logit) run once after the blocks, not per block."""
    n, vocab = logits.shape
    rows = min(stats_rows(logits), max(n, 1))
    lse = logits.new_empty((len(temperatures), n))
    row_max = logits.new_empty((n, 1))
    shifted_all, scratch_all = logits.new_empty((rows, vocab)), logits.new_empty((rows, vocab))
    for s in range(0, n, rows):
        block = logits[s:s + rows]
        k = block.shape[0]
        shifted, e = shifted_all[:k], scratch_all[:k]
        torch.amax(block, dim=-1, keepdim=True, out=row_max[s:s + k])
        torch.sub(block, row_max[s:s + k], out=shifted)  # <= 0, the max is 0
        for j, t in enumerate(temperatures):
            if t == 1.0:
                torch.clamp(shifted, min=EXP_FLOOR, out=e)
            elif _exact_inverse(t):  # x * (1/t) == x / t exactly; a product is ~2.5x faster than a quotient
                torch.mul(shifted, 1.0 / t, out=e).clamp_(min=EXP_FLOOR)
            else:
                torch.div(shifted, t, out=e).clamp_(min=EXP_FLOOR)
            torch.sum(e.exp_(), dim=-1, out=lse[j, s:s + k])
    lse.log_()
    z_target = logits.gather(1, targets[:, None]) - row_max  # the target's shifted logit, as in the block
    lp = torch.stack([z_target[:, 0] / t for t in temperatures]) - lse
    return lp, lse.neg_()
