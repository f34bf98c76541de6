"""The distributional statistics of a pass's heads (``stats.DIST_NAMES``), per temperature, in float64:
each head's entropy and, between the expert head and each other head, the cross-entropies, KL divergences
and JSD. With a = z/T - max, e = exp(a), S = sum e: H(p) = log S - <e, a>/S, H(p, q) = log S_q - <e_p, a_q>/S_p,
KL(p||q) = H(p, q) - H(p), JSD = H(m) - (H(p) + H(q))/2 (docs/methods/distributional.md)."""

from __future__ import annotations

from typing import Sequence

import torch

from cscore.scorers.engine.head import prepared

BLOCK_ELEMENTS = 1 << 20  # on an accelerator: float64 logits per block (rows x vocab) of each head
TINY = 1e-300  # m below this counts as it in log m (m = 0: m log m = 0); float64's smallest normal ~2e-308
PAIR = ("xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd")


def block_rows(vocab: int, device: torch.device) -> int:
    """One row at a time on a CPU (measured fastest), blocks of ``BLOCK_ELEMENTS`` on an accelerator."""
    return 1 if device.type == "cpu" else max(1, BLOCK_ELEMENTS // max(1, vocab))


def dot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """<x, y> over the vocabulary of [n_temps, rows, V] blocks, as [n_temps, rows] (one row: ``bmm``)."""
    if x.shape[1] == 1:
        return torch.bmm(x, y.transpose(1, 2)).view(x.shape[0], 1)
    return (x * y).sum(-1)


def power_of(t: float, t_base: float) -> int | None:
    """k in 2..4 with 1/t == k/t_base exactly (in floating point), else None."""
    k = t_base / t
    return int(k) if k in (2.0, 3.0, 4.0) else None


def exp_plan(temperatures: Sequence[float]) -> list[tuple[int, int | None, int]]:
    """(index, base index or None, power) per temperature, larger T first: exp(a/T) is the
    power-th power of an earlier temperature's where 1/T is 2-4 times its 1/T, else an exp."""
    order = sorted(range(len(temperatures)), key=lambda j: -temperatures[j])
    steps: list[tuple[int, int | None, int]] = []
    for n, j in enumerate(order):
        base = next((b for b in order[:n] if power_of(temperatures[j], temperatures[b])), None)
        steps.append((j, base, power_of(temperatures[j], temperatures[base]) or 1 if base is not None else 1))
    return steps


class Buffers:
    """One head's reused blocks: a = z/T - max and e = exp(a) at every temperature [n_temps, rows, V]."""

    def __init__(self, temperatures: Sequence[float], rows: int, vocab: int, device: torch.device):
        self.inv = torch.tensor([1.0 / t for t in temperatures], dtype=torch.float64, device=device).view(-1, 1, 1)
        self.steps = exp_plan(temperatures)
        self.a = torch.empty((len(temperatures), rows, vocab), dtype=torch.float64, device=device)
        self.e = torch.empty_like(self.a)

    def fill(self, logits: torch.Tensor, cap: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(a, e, S) of a block of logits [r, V] (soft-capped as ``token_statistics`` reads them)."""
        r = logits.shape[0]
        z = prepared(logits, cap).to(torch.float64)
        z = z - z.amax(dim=-1, keepdim=True)
        a, e = self.a[:, :r], self.e[:, :r]
        torch.mul(z, self.inv, out=a)
        for j, base, k in self.steps:
            if base is None:
                torch.exp(a[j], out=e[j])
            else:
                torch.mul(e[base], e[base], out=e[j])
                if k == 3:
                    e[j].mul_(e[base])
                elif k == 4:
                    e[j].square_()
        return a, e, e.sum(-1)


def statistics(logits: dict[str, torch.Tensor], caps: dict[str, float | None], temperatures: Sequence[float],
               expert: str | None) -> dict[str, dict[str, torch.Tensor]]:
    """{head: {name: [n_temps, n] float64}}: ``entropy`` of every head and, for each head but
    ``expert`` (None: no expert head in this pass), the pair's statistics against it."""
    first = next(iter(logits.values()))
    (n, vocab), device = first.shape, first.device
    vocabs = {h: z.shape[1] for h, z in logits.items()}
    if len(set(vocabs.values())) > 1:
        raise ValueError(f"the heads' vocabularies differ ({vocabs}): no distributional statistics between them")
    others = [h for h in logits if expert is not None and h != expert]
    rows = min(block_rows(vocab, device), max(n, 1))
    bufs = {h: Buffers(temperatures, rows, vocab, device) for h in logits}
    m, log_m = torch.empty_like(bufs[next(iter(bufs))].a), torch.empty_like(bufs[next(iter(bufs))].a)
    out = {h: {name: torch.empty((len(temperatures), n), dtype=torch.float64, device=device)
               for name in ("entropy", *(PAIR if h in others else ()))} for h in logits}
    for s in range(0, n, rows):
        got = {h: bufs[h].fill(z[s:s + rows], caps.get(h)) for h, z in logits.items()}
        r = next(iter(got.values()))[0].shape[1]
        ent = {}
        for h, (a, e, total) in got.items():
            ent[h] = total.log() - dot(e, a) / total
            out[h]["entropy"][:, s:s + r] = ent[h]
        for h in others:  # others is empty when expert is None
            (a_x, e_x, s_x), (a_h, e_h, s_h) = got[str(expert)], got[h]
            xent_ea = s_h.log() - dot(e_x, a_h) / s_x
            xent_ae = s_x.log() - dot(e_h, a_x) / s_h
            mm, lm = m[:, :r], log_m[:, :r]
            torch.mul(e_x, (0.5 / s_x).unsqueeze(-1), out=mm)
            mm.addcmul_(e_h, (0.5 / s_h).unsqueeze(-1)).clamp_(min=TINY)
            h_m = -dot(mm, torch.log(mm, out=lm))
            hx, hh = ent[str(expert)], ent[h]
            for name, value in zip(PAIR, (xent_ea, xent_ae, xent_ea - hx, xent_ae - hh, h_m - 0.5 * (hx + hh))):
                out[h][name][:, s:s + r] = value
    return out
