"""The distributional statistics of a pass's heads at the positions that predict hypothesis tokens
(``stats.DIST_NAMES``): each head's entropy, and between the expert head and each other head the two
cross-entropies, the two KL divergences and the Jensen-Shannon divergence, per temperature T (both
distributions at T). Read from logits the pass already has, in float64: O(vocab) per token and head,
no full distribution kept.

With shifted logits a = z/T - max (a <= 0), e = exp(a) and S = sum e, every statistic but H(m) is a
dot product: H(p) = log S - <e, a>/S and H(p, q) = log S_q - <e_p, a_q>/S_p (sums of non-negative
terms); KL(p||q) = H(p, q) - H(p) and JSD = H(m) - (H(p) + H(q))/2 with m = (p + q)/2. Per token,
head and temperature that is one exp over the vocabulary, and per pair one log (of m): the cost."""

from __future__ import annotations

from typing import Sequence

import torch

from cscore.scorers.engine.head import prepared

BLOCK_ELEMENTS = 1 << 20  # on an accelerator: float64 logits per block (rows x vocab) of each head
TINY = 1e-300  # m below this counts as it in log m (m = 0: m log m = 0); float64's smallest normal ~2e-308
PAIR = ("xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd")


def block_rows(vocab: int, device: torch.device) -> int:
    """One row at a time on a CPU (a row's vectors stay in cache; measured fastest), blocks of
    ``BLOCK_ELEMENTS`` on an accelerator (fewer kernel launches)."""
    return 1 if device.type == "cpu" else max(1, BLOCK_ELEMENTS // max(1, vocab))


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """<x, y> per row of [rows, V] blocks, as [rows, 1]."""
    return torch.bmm(x.unsqueeze(-2), y.unsqueeze(-1)).squeeze(-1)


def shifted_block(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """A block of one head's logits in float64 (soft-capped as ``token_statistics`` reads them),
    less each row's maximum (one shift serves every temperature)."""
    z = prepared(logits, cap).to(torch.float64)
    return z - z.amax(dim=-1, keepdim=True)


class Head:
    """One head's block at one temperature: a = shifted / T, e = exp(a), S, log S and H. Given
    ``base``, this head at a temperature T_b with 1/T = k/T_b for an integer k in 2..4 (T = 0.5 from
    T = 1), e is base.e ** k by products: no exp."""

    def __init__(self, shifted: torch.Tensor, t: float, base: tuple[float, Head] | None = None):
        self.a = shifted if t == 1 else shifted * (1.0 / t)
        k = power_of(t, base[0]) if base else None
        if base and k:
            e = base[1].e
            self.e = e * e if k == 2 else (e * e * e if k == 3 else (e * e).square_())
        else:
            self.e = self.a.exp()
        self.s = self.e.sum(-1, keepdim=True)
        self.log_s = self.s.log()
        self.entropy = self.log_s - dot(self.e, self.a) / self.s

    def cross(self, other: Head) -> torch.Tensor:
        """H(p_self, p_other) = -sum p_self log p_other."""
        return other.log_s - dot(self.e, other.a) / self.s


def power_of(t: float, t_base: float) -> int | None:
    """k in 2..4 with 1/t == k/t_base exactly (in floating point), else None."""
    k = t_base / t
    return int(k) if k in (2.0, 3.0, 4.0) else None


def at_temperatures(shifted: torch.Tensor, temperatures: Sequence[float]) -> list[Head]:
    """One head's block at every temperature, each from a power of an earlier one where it can."""
    done: dict[float, Head] = {}
    for t in sorted(temperatures, reverse=True):  # the larger T first: its powers give the smaller
        base = next(((tb, h) for tb, h in done.items() if power_of(t, tb)), None)
        done[t] = Head(shifted, t, base)
    return [done[t] for t in temperatures]


def pair(e: Head, h: Head) -> tuple[torch.Tensor, ...]:
    """(xent_ea, xent_ae, kl_ea, kl_ae, jsd) of expert ``e`` and head ``h``, each [rows, 1]."""
    xent_ea, xent_ae = e.cross(h), h.cross(e)
    m = e.e * (0.5 / e.s)
    m.addcmul_(h.e, 0.5 / h.s)
    h_m = -dot(m, m.clamp_(min=TINY).log())
    return xent_ea, xent_ae, xent_ea - e.entropy, xent_ae - h.entropy, h_m - 0.5 * (e.entropy + h.entropy)


def statistics(logits: dict[str, torch.Tensor], caps: dict[str, float | None], temperatures: Sequence[float],
               expert: str | None) -> dict[str, dict[str, torch.Tensor]]:
    """{head: {name: [n_temps, n] float64}}: ``entropy`` of every head and, for each head but
    ``expert`` (None: no expert head in this pass), the pair's statistics against it."""
    first = next(iter(logits.values()))
    n, device = first.shape[0], first.device
    vocabs = {h: z.shape[1] for h, z in logits.items()}
    if len(set(vocabs.values())) > 1:
        raise ValueError(f"the heads' vocabularies differ ({vocabs}): no distributional statistics between them")
    others = [h for h in logits if expert is not None and h != expert]
    width = len(temperatures)
    ent = {h: torch.empty((n, width), dtype=torch.float64, device=device) for h in logits}
    cross = {h: torch.empty((n, width, len(PAIR)), dtype=torch.float64, device=device) for h in others}
    rows = block_rows(first.shape[1], device)
    for s in range(0, n, rows):
        heads = {h: at_temperatures(shifted_block(z[s:s + rows], caps.get(h)), temperatures)
                 for h, z in logits.items()}
        for j in range(width):
            at = {h: per_t[j] for h, per_t in heads.items()}
            for h, head in at.items():
                ent[h][s:s + rows, j:j + 1] = head.entropy
            for h in others:  # others is empty when expert is None
                cross[h][s:s + rows, j] = torch.cat(pair(at[str(expert)], at[h]), dim=-1)
    out = {h: {"entropy": ent[h].T} for h in logits}
    for h in others:
        out[h].update({name: cross[h][:, :, k].T for k, name in enumerate(PAIR)})
    return out
