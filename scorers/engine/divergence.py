"""The distributional statistics of a pass's heads at the positions that predict hypothesis tokens
(``stats.DIST_NAMES``): each head's entropy, and between the expert head and each other head the two
cross-entropies, the two KL divergences and the Jensen-Shannon divergence, per temperature T (both
distributions at T). Read from logits the pass already has, in blocks of rows, in float64: O(vocab)
per token and head, no full distribution kept."""

from __future__ import annotations

from typing import Sequence

import torch

from cscore.scorers.engine.head import prepared

BLOCK_ELEMENTS = 1 << 20  # float64 logits per block (rows x vocab) of each head
TINY = 1e-300  # m below this counts as it in log m (m = 0: m log m = 0); float64's smallest normal ~2e-308


def block_rows(vocab: int) -> int:
    return max(1, BLOCK_ELEMENTS // max(1, vocab))


def entropy(logp: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """-sum_v p(v) log p(v) per row, from ``logp`` [rows, V] and its exp ``p``."""
    return -(p * logp).sum(-1)


def cross(le: torch.Tensor, pe: torch.Tensor, la: torch.Tensor, pa: torch.Tensor,
          h_e: torch.Tensor, h_a: torch.Tensor) -> dict[str, torch.Tensor]:
    """The pair's statistics per row from the expert's and the amateur's log-probabilities, their
    exps and their entropies: KL(p||q) = H(p, q) - H(p) and JSD = H(m) - (H(pe) + H(pa)) / 2 with
    m = (pe + pa) / 2 (float64: the differences lose nothing a tolerance of 1e-5 sees unless the
    divergence is below ~1e-10 of the entropies)."""
    xent_ea, xent_ae = -(pe * la).sum(-1), -(pa * le).sum(-1)
    m = (pe + pa).mul_(0.5)
    h_m = -(m * m.clamp(min=TINY).log_()).sum(-1)
    return {"xent_ea": xent_ea, "xent_ae": xent_ae, "kl_ea": xent_ea - h_e, "kl_ae": xent_ae - h_a,
            "jsd": h_m - 0.5 * (h_e + h_a)}


def shifted_block(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """A block of one head's logits in float64 (soft-capped as ``token_statistics`` reads them),
    less each row's maximum (one shift serves every temperature)."""
    z = prepared(logits, cap).to(torch.float64)
    return z - z.amax(dim=-1, keepdim=True)


def at_temperature(shifted: torch.Tensor, t: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p_T, p_T) of a shifted block: one exp, its sum normalising both."""
    a = shifted / t
    e = a.exp()
    total = e.sum(-1, keepdim=True)
    return a.sub_(total.log()), e.div_(total)


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
        shifted = {h: shifted_block(z[s:s + rows], caps.get(h)) for h, z in logits.items()}
        for j, t in enumerate(temperatures):
            lp = {h: at_temperature(block, t) for h, block in shifted.items()}
            ent = {h: entropy(*lp[h]) for h in lp}
            for h in lp:
                out[h]["entropy"][j, s:s + rows] = ent[h]
            for h in others:  # others is empty when expert is None
                e = str(expert)
                for name, value in cross(*lp[e], *lp[h], ent[e], ent[h]).items():
                    out[h][name][j, s:s + rows] = value
    return out
