"""The LM head on final hidden states and the per-token statistics read from its logits, shared
by the statistics engine, its seq2seq path, the judge and the token-budget probe."""

from __future__ import annotations

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


STATS_ROWS = 8  # logit rows per block of token_statistics on a CPU: a block and its scratch stay in cache
# z/T is raised to this before exp: exp(-80) < 2e-35 changes a sum >= 1 by less than float64's
# rounding even over a whole vocabulary, while torch's CPU exp takes a ~10x slower path for inputs
# under float32's underflow (about -87), where most of a large vocabulary lies at low T
EXP_FLOOR = -80.0


def token_statistics(logits: torch.Tensor, targets: torch.Tensor, temperatures: Sequence[float]):
    """(logp, logp_max) of shape [n_temps, n] from float32 logits [n, V], in blocks of rows
    (``STATS_ROWS`` on a CPU, all at once on an accelerator): each block is shifted by its row
    maxima once, then per temperature one exp into a reused scratch block and a sum (the max of
    z/T is 0 after the shift, so the log of that sum is logsumexp(z/T) without logsumexp's own
    max and subtraction passes; inputs under ``EXP_FLOOR`` are raised to it)."""
    n = logits.shape[0]
    rows = STATS_ROWS if logits.device.type == "cpu" else max(n, 1)
    lp = logits.new_empty((len(temperatures), n))
    lpm = logits.new_empty((len(temperatures), n))
    scratch = logits.new_empty((min(rows, n), logits.shape[1]))
    for s in range(0, n, rows):
        block = logits[s:s + rows]
        shifted = block - block.amax(dim=-1, keepdim=True)  # <= 0, the max is 0
        z_target = shifted.gather(1, targets[s:s + rows, None]).squeeze(1)
        e = scratch[:block.shape[0]]
        for j, t in enumerate(temperatures):
            if t == 1.0:
                torch.clamp(shifted, min=EXP_FLOOR, out=e)
            else:
                torch.div(shifted, t, out=e).clamp_(min=EXP_FLOOR)
            e.exp_()
            lse = e.sum(dim=-1).log_()
            lp[j, s:s + rows] = z_target / t - lse
            lpm[j, s:s + rows] = -lse
    return lp, lpm
