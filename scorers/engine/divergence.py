"""The distributional statistics of a pass's heads at the positions that predict hypothesis tokens
(``stats.DIST_NAMES``): each head's entropy, and between the expert head and each other head the two
cross-entropies, the two KL divergences and the Jensen-Shannon divergence, per temperature T (both
distributions at T). Read from logits the pass already has, in blocks of rows, in float64: O(vocab)
per token and head, no full distribution kept."""

from __future__ import annotations

import math
from typing import Sequence

import torch

from cscore.scorers.engine.head import prepared

BLOCK_ELEMENTS = 1 << 20  # float64 logits per block (rows x vocab) of each head
LOG2 = math.log(2.0)


def block_rows(vocab: int) -> int:
    return max(1, BLOCK_ELEMENTS // max(1, vocab))


def entropy(logp: torch.Tensor) -> torch.Tensor:
    """-sum_v p(v) log p(v) per row, from log-probabilities ``logp`` [rows, V]."""
    return -(logp.exp() * logp).sum(-1)


def cross(le: torch.Tensor, la: torch.Tensor) -> dict[str, torch.Tensor]:
    """The pair's statistics per row from the expert's and the amateur's log-probabilities."""
    pe, pa = le.exp(), la.exp()
    diff = le - la
    mixed = torch.logaddexp(le, la) - LOG2  # log of m = (pe + pa) / 2
    return {"xent_ea": -(pe * la).sum(-1), "xent_ae": -(pa * le).sum(-1),
            "kl_ea": (pe * diff).sum(-1), "kl_ae": -(pa * diff).sum(-1),
            "jsd": 0.5 * ((pe * (le - mixed)).sum(-1) + (pa * (la - mixed)).sum(-1))}


def head_block(logits: torch.Tensor, cap: float | None, t: float) -> torch.Tensor:
    """log p_T of a block of one head's logits, in float64 (soft-capped as ``token_statistics`` reads them)."""
    z = prepared(logits, cap).to(torch.float64)
    return torch.log_softmax(z / t, dim=-1)


def statistics(logits: dict[str, torch.Tensor], caps: dict[str, float | None], temperatures: Sequence[float],
               expert: str | None) -> dict[str, dict[str, torch.Tensor]]:
    """{head: {name: [n_temps, n] float64}}: ``entropy`` of every head and, for each head but
    ``expert`` (None: no expert head in this pass), the pair's statistics against it."""
    n = next(iter(logits.values())).shape[0]
    vocabs = {h: z.shape[1] for h, z in logits.items()}
    if len(set(vocabs.values())) > 1:
        raise ValueError(f"the heads' vocabularies differ ({vocabs}): no distributional statistics between them")
    others = [h for h in logits if expert is not None and h != expert]
    device = next(iter(logits.values())).device
    out = {h: {name: torch.empty((len(temperatures), n), dtype=torch.float64, device=device)
               for name in (("entropy",) + (("xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd") if h in others else ()))}
           for h in logits}
    rows = block_rows(next(iter(vocabs.values())))
    for s in range(0, n, rows):
        for j, t in enumerate(temperatures):
            lp = {h: head_block(z[s:s + rows], caps.get(h), t) for h, z in logits.items()}
            for h, block in lp.items():
                out[h]["entropy"][j, s:s + rows] = entropy(block)
            for h in others:
                for name, value in cross(lp[expert], lp[h]).items():  # type: ignore[index]
                    out[h][name][j, s:s + rows] = value
    return out
