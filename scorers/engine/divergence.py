"""A joint pass's per-token statistics in float64 (``stats.ROW_NAMES``) per temperature: each head's
log p(target), log max p and entropy, and against the expert head the cross-entropies, KLs and JSD.
With d = z - max, e = exp(d/T), S = sum e: H(p) = log S - <d, e>/(T S), H(p, q) = log S_q - <d_q, e_p>/(T S_p),
H(m) = log(S_p + r S_q) - <log w, e_p/S_p + e_q/S_q>/2 with w = e_p + r e_q, r = S_p / S_q
(docs/methods/distributional.md). Two cache-sized loops over the vocabulary, each sum a matrix product."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from cscore.scorers.engine import native
from cscore.scorers.engine.head import prepared
from cscore.scorers.engine.head_stream import target_in_block

CPU_CHUNK = 16384  # vocabulary entries per chunk on a CPU (one row at a time): its blocks stay in L2
HEAD_BLOCK = 8192  # a linear head's logits per column block on a CPU (a faster product than wider ones)
BLOCK_ELEMENTS = 1 << 20  # on an accelerator: rows x vocabulary per block, the whole vocabulary a chunk
MAX_POWER = 8  # 1/T = k * base with k <= this reads powers of exp(d * base) instead of its own exp
FLOOR = -690.0  # d/T raised to this where exp would underflow: a normal float64 (> 1e-300), log w finite
PAIR = ("xent_ea", "xent_ae", "kl_ea", "kl_ae", "jsd")

Plan = list[tuple[float, dict[int, list[int]]]]


def groups(temperatures: Sequence[float]) -> Plan:
    """(base, {power k: [temperatures with 1/T = k * base]}) per group (one exp each), greedily largest."""
    left = sorted(range(len(temperatures)), key=lambda j: -temperatures[j])
    out = []
    while left:
        best: tuple[float, dict[int, int]] = (1.0 / temperatures[left[0]], {left[0]: 1})
        for d in range(1, MAX_POWER + 1):
            base = 1.0 / temperatures[left[0]] / d
            ks = {j: round(1.0 / temperatures[j] / base) for j in left}
            fit = {j: k for j, k in ks.items()
                   if 1 <= k <= MAX_POWER and abs(1.0 / temperatures[j] / base - k) <= 1e-12 * k}
            if len(fit) > len(best[1]):
                best = (base, fit)
        powers: dict[int, list[int]] = {}
        for j, k in best[1].items():
            powers.setdefault(k, []).append(j)
        out.append((best[0], powers))
        left = [j for j in left if j not in best[1]]
    return out


def power_steps(one: torch.Tensor, powers: dict[int, list[int]], slots: Sequence[torch.Tensor]) -> list[tuple]:
    """The steps raising ``one`` = exp(d * base) to each power of ``powers`` into ``slots``: (out, a, b)
    for ``torch.mul``, (out, a, None) for a copy."""
    have = {1: one}
    steps: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]] = []

    def get(k: int) -> torch.Tensor:
        if k not in have:
            a, b = get(k // 2), get(k - k // 2)
            have[k] = slots[powers[k][0]] if k in powers else torch.empty_like(one)
            steps.append((have[k], a, b))
        return have[k]

    for k, js in powers.items():
        for j in js:
            if slots[j].data_ptr() != get(k).data_ptr():
                steps.append((slots[j], have[k], None))
    return steps


def by_blocks(device: torch.device) -> bool:
    """Whether rows go in blocks over the whole vocabulary (an accelerator), not one at a time in chunks."""
    return device.type != "cpu"


def chunks(vocab: int, device: torch.device) -> list[tuple[int, int]]:
    """(start, end) column ranges, ``CPU_CHUNK`` wide on a CPU."""
    step = vocab if by_blocks(device) else CPU_CHUNK
    return [(c, min(c + step, vocab)) for c in range(0, vocab, step)]


def pieces(blocks: list[torch.Tensor], c0: int, c1: int) -> list[tuple[int, int, int, int]]:
    """(block, first, last column, offset in the chunk) of the blocks holding columns c0..c1."""
    out, at = [], 0
    for b, z in enumerate(blocks):
        lo, hi = max(c0, at), min(c1, at + z.shape[1])
        if lo < hi:
            out.append((b, lo - at, hi - at, lo - c0))
        at += z.shape[1]
    return out


class View(NamedTuple):
    """One block's buffers for r rows and a chunk of c columns."""
    d: torch.Tensor  # [r, H + 1, c]: d * scale per head, then ones
    d_h: list  # d's rows per head [r, c]
    heads: torch.Tensor  # [r, H, c]: d's rows of the heads
    one: torch.Tensor  # [r, H, c]: exp(d * base)
    steps: list  # per group, ``power_steps`` into e per temperature [r, H, c]
    e_h: list  # e per head [r, n_t, c]
    flat_t: torch.Tensor  # [r, c, n_t * H]: e, its rows (temperature, head), transposed
    w: torch.Tensor  # [r, n_t, c]: log w


class Block:
    """The reused buffers of a block of ``rows`` (d, exp(d * base), e of every chunk, log w), ``view``s cached."""

    def __init__(self, heads: int, temperatures: Sequence[float], rows: int, cols: int, vocab: int,
                 device: torch.device):
        self.plan, self.heads, self.n_t = groups(temperatures), heads, len(temperatures)
        self.scale = self.plan[0][0]  # d is kept times the first group's base: its exp needs no product
        f64 = torch.float64
        self.d = torch.empty((rows, heads + 1, cols), dtype=f64, device=device)
        self.d[:, heads] = 1.0
        self.cols = cols  # e is kept chunk by chunk, each chunk's block contiguous
        self.e = torch.empty((-(-vocab // cols), rows, self.n_t, heads, cols), dtype=f64, device=device)
        self.one = torch.empty((rows, heads, cols), dtype=f64, device=device)
        self.w = torch.empty((rows, self.n_t, cols), dtype=f64, device=device)
        self.views: dict[tuple[int, int, int], View] = {}

    def view(self, r: int, c0: int, c1: int) -> View:
        if (r, c0, c1) not in self.views:
            c = c1 - c0
            e, one = self.e[c0 // self.cols, :r, :, :, :c], self.one[:r, :, :c]
            by_t = [e[:, j] for j in range(self.n_t)]
            self.views[r, c0, c1] = View(self.d[:r, :, :c], [self.d[:r, h, :c] for h in range(self.heads)],
                                         self.d[:r, :self.heads, :c], one,
                                         [power_steps(one, powers, by_t) for _, powers in self.plan],
                                         [e[:, :, h] for h in range(self.heads)],
                                         e.reshape(r, -1, c).transpose(1, 2), self.w[:r, :, :c])
        return self.views[r, c0, c1]

    def target(self, at: tuple[int, int, int], head: int, off: int, width: int) -> torch.Tensor:
        """Where a head's logit piece of ``width`` columns at ``off`` goes in d, [r, w] (``Run.plan`` keeps it)."""
        whole = self.view(*at).d_h[head]
        return whole if off == 0 and width == whole.shape[-1] else whole[:, off:off + width]

    def fill(self, pieces: list[tuple[torch.Tensor, torch.Tensor, float | None]], shift: torch.Tensor, floor: bool,
             at: tuple[int, int, int]) -> View:
        """d and e of a chunk (``at`` = (r, c0, c1)) from its logit pieces (source, ``target``, soft cap);
        exp's inputs raised to ``FLOOR`` where ``floor``."""
        v = self.view(*at)
        for z, dst, cap in pieces:
            dst.copy_(prepared(z, cap) if cap else z)
        torch.add(shift, v.heads, alpha=self.scale, out=v.heads)  # (z - max) * scale
        for g, ((base, powers), steps) in enumerate(zip(self.plan, v.steps)):
            if g == 0 and not floor:
                torch.exp(v.heads, out=v.one)
            else:
                torch.mul(v.heads, base / self.scale, out=v.one)
                if floor:
                    v.one.clamp_(min=FLOOR / max(powers))
                v.one.exp_()
            for out, a, b in steps:
                torch.mul(a, b, out=out) if b is not None else out.copy_(a)
        return v


def statistics(logits: dict[str, torch.Tensor | Sequence[torch.Tensor]], caps: dict[str, float | None],
               temperatures: Sequence[float], expert: str | None,
               targets: torch.Tensor | None = None) -> dict[str, dict[str, torch.Tensor]]:
    """{head: {name: [n_temps, n] float64}} from logits [n, V] (or column blocks): every head's entropy,
    each non-``expert`` head's pair statistics, and with ``targets`` logp and logp_max."""
    names = list(logits)
    blocks = {h: [z] if isinstance(z, torch.Tensor) else list(z) for h, z in logits.items()}
    vocabs = {h: sum(z.shape[1] for z in b) for h, b in blocks.items()}
    if len(set(vocabs.values())) > 1:
        raise ValueError(f"the heads' vocabularies differ ({vocabs}): no distributional statistics between them")
    first = blocks[names[0]][0]
    n, vocab, device = first.shape[0], vocabs[names[0]], first.device
    spans = chunks(vocab, device)
    x = names.index(expert) if expert is not None and expert in names else None
    others = [i for i in range(len(names)) if x is not None and i != x]
    capped = [caps.get(h) for h in names]
    if not by_blocks(device) and native.usable(blocks):
        return fused(blocks, names, capped, temperatures, x, others, targets)
    maxima = torch.stack([prepared(torch.stack([z.amax(dim=-1) for z in blocks[h]]).amax(0), cap).double()
                          for h, cap in zip(names, capped)], dim=1)  # [n, H]: exp's shift, soft-capped
    run = Run(blocks, names, capped, temperatures, x, others, maxima, spans)
    run.rows(range(n), floor=False)
    bad = ~(run.sums.isfinite().flatten(1).all(1) & run.cross.isfinite().flatten(1).all(1))
    if bad.any():  # exp underflowed to 0 in both models somewhere: those rows again, exp's inputs floored
        run.rows(bad.nonzero()[:, 0].tolist(), floor=True)
    total, out = finish(names, x, others, temperatures, run.sums, run.cross, run.ratio[..., 0], run.block.scale)
    if targets is not None:
        with_logp(out, [blocks[h] for h in names], capped, targets.to(device), maxima, total, temperatures)
    return out


def fused(blocks: dict[str, list[torch.Tensor]], names: list[str], caps: list[float | None],
          temperatures: Sequence[float], x: int | None, others: list[int],
          targets: torch.Tensor | None) -> dict[str, dict[str, torch.Tensor]]:
    """``statistics`` from the native kernel's sums."""
    heads = [[prepared(z, cap) for z in blocks[h]] if cap else blocks[h] for h, cap in zip(names, caps)]
    got = native.statistics(heads, groups(temperatures), len(temperatures), x, others)
    total, de, xo, ox, wl = (got[k].permute(1, 2, 0) for k in ("S", "de", "xo", "ox", "wl"))  # [n_t, ., n]
    s_x = total[:, [x]] if x is not None else total[:, :0]
    h_m = (2.0 * s_x).log() - wl / (2.0 * s_x)  # sum w = 2 S_x: H(m) = log sum w - sum m log w
    out = assemble(names, x, others, inverse(temperatures, 1.0, total.device),
                   {"S": total, "de": de, "xo": xo, "ox": ox, "h_m": h_m})
    if targets is not None:
        with_logp(out, heads, [None] * len(names), targets, got["mx"], total, temperatures)
    return out


def assemble(names: list[str], x: int | None, others: list[int], inv: torch.Tensor,
             sums: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """The statistics from either kernel's ``sums`` [n_t, ., n]: S, de = <d_h, e_h> per head; xo, ox, h_m
    per other head; d is z - max times T * ``inv``."""
    total, de, xo, ox, h_m = (sums[k] for k in ("S", "de", "xo", "ox", "h_m"))
    log_total = total.log()
    ent = [log_total[:, h] - inv * de[:, h] / total[:, h] for h in range(len(names))]
    out = {h: {"entropy": ent[i]} for i, h in enumerate(names)}
    for o, i in enumerate(others):
        assert x is not None
        xent_ea = log_total[:, i] - inv * xo[:, o] / total[:, x]
        xent_ae = log_total[:, x] - inv * ox[:, o] / total[:, i]
        hx, hh = ent[x], ent[i]
        out[names[i]].update(zip(PAIR, (xent_ea, xent_ae, xent_ea - hx, xent_ae - hh, h_m[:, o] - 0.5 * (hx + hh))))
    return out


def inverse(temperatures: Sequence[float], scale: float, device: torch.device) -> torch.Tensor:
    """[n_t, 1] float64: 1 / (T * scale)."""
    return torch.tensor([1.0 / t / scale for t in temperatures], dtype=torch.float64, device=device).view(-1, 1)


def with_logp(out: dict, blocks: list[list[torch.Tensor]], caps: list[float | None], targets: torch.Tensor,
              maxima: torch.Tensor, total: torch.Tensor, temperatures: Sequence[float]) -> None:
    """Put ``logp`` = d(y)/T - log S and ``logp_max`` = -log S first in each head's statistics."""
    inv = inverse(temperatures, 1.0, total.device)
    log_total = total.log()
    for i, h in enumerate(out):
        z_t, at = None, 0
        for z in blocks[i]:  # z[r, targets[r]] from the head's column blocks
            z_t = target_in_block(z, at, targets, z_t)
            at += z.shape[1]
        assert z_t is not None
        z_t = prepared(z_t[:, 0], caps[i]).double()
        out[h] = {"logp": (z_t - maxima[:, i]) * inv - log_total[:, i], "logp_max": -log_total[:, i], **out[h]}


class Run:
    """The torch kernel's two loops over a row's chunks: <d_g, e_(j,h)> and S, then <log w, e_(j,h)> per
    other head (w = e_x + r e_o, proportional to m)."""

    def __init__(self, blocks, names, caps, temperatures, x, others, maxima, spans):
        n, n_h, n_t = maxima.shape[0], len(names), len(temperatures)
        device = maxima.device
        self.blocks, self.names, self.caps, self.x, self.others = blocks, names, caps, x, others
        self.spans, self.n_t, self.n = spans, n_t, n
        self.sums = torch.zeros((n, n_h + 1, n_t * n_h), dtype=torch.float64, device=device)
        self.cross = torch.zeros((n, len(others), n_t, n_t * n_h), dtype=torch.float64, device=device)
        self.ratio = torch.ones((n, len(others), n_t, 1), dtype=torch.float64, device=device)
        cols, vocab = max(c1 - c0 for c0, c1 in spans), spans[-1][1]
        self.step = min(max(n, 1), max(1, BLOCK_ELEMENTS // cols)) if by_blocks(device) else 1
        self.block = Block(n_h, temperatures, self.step, cols, vocab, device)
        self.shift = (-maxima * self.block.scale).unsqueeze(-1)  # [n, H, 1]
        self.widths = [[z.shape[1] for z in self.blocks[h]] for h in names]
        self.pieces = [[pieces(self.blocks[h], c0, c1) for h in names] for c0, c1 in spans]
        self.plans: dict[tuple, list[tuple]] = {}

    def plan(self, where: tuple[int, int, int], span: int) -> list[tuple]:
        """A chunk's logit pieces: (head, block, first, last column, whole block, target in d, soft cap)."""
        if (where, span) not in self.plans:
            self.plans[where, span] = [(g, b, a, z, z - a == self.widths[g][b], self.block.target(where, g, off, z - a),
                                        cap) for g, (parts, cap) in enumerate(zip(self.pieces[span], self.caps))
                                       for b, a, z, off in parts]
        return self.plans[where, span]

    def rows(self, which, floor: bool) -> None:
        """The sums of rows ``which``: a range (``step`` rows at a time) or row indices (rerun from zero)."""
        ranged = isinstance(which, range)
        n_h, x, others = len(self.names), self.x, list(enumerate(self.others))
        bounds = ([(s, min(s + self.step, self.n)) for s in range(which.start, which.stop, self.step)] if ranged
                  else [(s, s + 1) for s in which])
        flat = ranged and self.step == 1  # one row at a time: every row's views at once, no slicing per row
        cut = (lambda t: t.split(1)) if flat else (lambda t: [t[a:b] for a, b in bounds])
        logits = [[cut(z) for z in self.blocks[h]] for h in self.names]
        sums, shift, ratio, cross = (cut(t) for t in (self.sums, self.shift, self.ratio, self.cross))
        for k, (s, e) in enumerate(bounds):
            r = e - s
            if not ranged:
                sums[k].zero_()
                cross[k].zero_()
            for span, (c0, c1) in enumerate(self.spans):
                where = (r, c0, c1)
                pieces = [(logits[g][b][k] if whole else logits[g][b][k][..., a:z], dst, cap)
                          for g, b, a, z, whole, dst, cap in self.plan(where, span)]
                v = self.block.fill(pieces, shift[k], floor, where)
                sums[k].baddbmm_(v.d, v.flat_t)
            if not others:
                continue
            total = sums[k][:, n_h].view(r, self.n_t, n_h)
            pairs = []
            for o, i in others:
                torch.div(total[:, :, x], total[:, :, i], out=ratio[k][:, o, :, 0])
                pairs.append((cross[k][:, o], ratio[k][:, o], i))
            for c0, c1 in self.spans:
                v = self.block.views[r, c0, c1]
                for part, rat, i in pairs:
                    torch.addcmul(v.e_h[x], v.e_h[i], rat, out=v.w).log_()
                    part.baddbmm_(v.w, v.flat_t)


def finish(names: list[str], x: int | None, others: list[int], temperatures: Sequence[float], sums: torch.Tensor,
           cross: torch.Tensor, ratio: torch.Tensor, scale: float) -> tuple[torch.Tensor, dict]:
    """S [n_t, H, n] and the statistics from ``Run``'s sums."""
    n, n_h, n_t = sums.shape[0], len(names), len(temperatures)
    p = sums.view(n, n_h + 1, n_t, n_h).permute(2, 3, 1, 0)  # [n_t, H (e's head), H + 1 (d's head | sum), n]
    total = p[:, :, n_h]  # [n_t, H, n]
    de = torch.stack([p[:, h, h] for h in range(n_h)], dim=1)
    xo, ox, h_m = (torch.zeros((n_t, len(others), n), dtype=sums.dtype, device=sums.device) for _ in range(3))
    for o, i in enumerate(others):
        assert x is not None
        xo[:, o], ox[:, o] = p[:, x, i], p[:, i, x]
        q = cross[:, o].reshape(n, n_t, n_t, n_h).diagonal(dim1=1, dim2=2)  # [n, H, n_t]: <log w_j, e_(j,h)>
        q_x, q_o = q[:, x].t(), q[:, i].t()
        h_m[:, o] = (total[:, x] + ratio[:, o].t() * total[:, i]).log() - 0.5 * (q_x / total[:, x] + q_o / total[:, i])
    return total, assemble(names, x, others, inverse(temperatures, scale, total.device),
                           {"S": total, "de": de, "xo": xo, "ox": ox, "h_m": h_m})
