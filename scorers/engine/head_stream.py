"""The LM head's per-token statistics with its weights read once per batch (the CPU path): blocks of
``VOCAB_BLOCK`` matrix rows and a running log-sum-exp per temperature, ``token_statistics`` to float32
rounding (docs/performance.md#the-lm-head-read-once-per-batch)."""

from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from cscore.scorers.engine.head import HEAD_CHUNK_ELEMENTS, prepared, scaled_exp

VOCAB_BLOCK = 4096  # rows of the head matrix per block: 16 MB in bfloat16 at hidden size 2048
STREAM_ROWS = HEAD_CHUNK_ELEMENTS // VOCAB_BLOCK  # hidden rows per pass over the matrix: logits as a row chunk's
# rows are padded to whole tiles of the CPU's matrix kernels: a row's logits the same wherever it stands
ROW_MULTIPLE = 8
TILE_ELEMENTS = 1 << 19  # logits per tile of the statistics and CPU thread: 128 rows of a block (64-300: within 7 %)

BlockLogits = Callable[[torch.Tensor, int, int], torch.Tensor]


def linear_head(model) -> torch.nn.Linear | None:
    """The model's output embeddings if a plain ``nn.Linear`` on the CPU (no hooks), else None."""
    lin = model.get_output_embeddings()
    if type(lin) is not torch.nn.Linear or lin.weight.device.type != "cpu" or "forward" in lin.__dict__:
        return None
    if lin._forward_hooks or lin._forward_pre_hooks:
        return None
    return lin


def linear_blocks(lin: torch.nn.Linear, bias: torch.Tensor | None = None) -> BlockLogits:
    """``lin(hidden)[:, v0:v1]`` (plus ``bias[..., v0:v1]``) from the rows v0..v1 of the matrix alone."""
    def block(hidden: torch.Tensor, v0: int, v1: int) -> torch.Tensor:
        z = F.linear(hidden, lin.weight[v0:v1], None if lin.bias is None else lin.bias[v0:v1])
        return z if bias is None else z + bias[..., v0:v1].to(z.device)
    return block


def streamed_statistics(block_logits: BlockLogits, vocab: int, hidden: torch.Tensor, targets: torch.Tensor,
                        temperatures: Sequence[float], cap: float | None = None):
    """(logp, logp_max) [n_temps, n] as ``token_statistics`` gives them, the head read once per ``STREAM_ROWS``."""
    got = [_stream(block_logits, vocab, hidden[s:s + STREAM_ROWS], targets[s:s + STREAM_ROWS], temperatures, cap)
           for s in range(0, max(1, hidden.shape[0]), STREAM_ROWS)]
    return got[0] if len(got) == 1 else tuple(torch.cat(parts, dim=1) for parts in zip(*got))


def padded(hidden: torch.Tensor) -> torch.Tensor:
    """``hidden`` with zero rows up to a multiple of ``ROW_MULTIPLE``: a row's logits the same wherever it stands."""
    short = -hidden.shape[0] % ROW_MULTIPLE
    return F.pad(hidden, (0, 0, 0, short)) if short else hidden


def target_in_block(z: torch.Tensor, v0: int, targets: torch.Tensor, got: torch.Tensor | None) -> torch.Tensor:
    """z[i, targets[i] - v0] where the target lies in this block of columns from v0, else ``got`` [n, 1]."""
    inside = (targets >= v0) & (targets < v0 + z.shape[1])
    here = z.gather(1, (targets - v0).clamp(0, z.shape[1] - 1).view(-1, 1))
    return here if got is None else torch.where(inside.view(-1, 1), here, got)


def logit_blocks(block_logits: BlockLogits, vocab: int, hidden: torch.Tensor, width: int) -> list[torch.Tensor]:
    """``lin(hidden)`` as column blocks [n, width] (faster on a CPU than one product), rows ``padded``."""
    n = hidden.shape[0]
    hidden = padded(hidden)
    return [block_logits(hidden, v0, min(vocab, v0 + width))[:n] for v0 in range(0, vocab, width)]


def _stream(block_logits: BlockLogits, vocab: int, hidden: torch.Tensor, targets: torch.Tensor,
            temperatures: Sequence[float], cap: float | None):
    """One pass over the head's blocks for all rows of ``hidden``."""
    n = hidden.shape[0]
    hidden = padded(hidden)
    work = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    rows = hidden.shape[0]
    sums = hidden.new_zeros((len(temperatures), rows), dtype=work)
    row_max = hidden.new_full((rows, 1), float("-inf"), dtype=work)
    z_target: torch.Tensor | None = None
    target_col = torch.cat([targets, targets.new_zeros(rows - n)])[:, None]
    tile = max(1, TILE_ELEMENTS * max(1, torch.get_num_threads()) // VOCAB_BLOCK)
    scratch = hidden.new_empty((3, min(tile, rows) * VOCAB_BLOCK), dtype=work)
    for v0 in range(0, vocab, VOCAB_BLOCK):
        z = block_logits(hidden, v0, min(vocab, v0 + VOCAB_BLOCK))
        z_target = target_in_block(z, v0, target_col, z_target)
        for s in range(0, rows, tile):
            _accumulate(z[s:s + tile], cap, row_max[s:s + tile], sums[:, s:s + tile], temperatures, scratch)
    assert z_target is not None
    lse = sums[:, :n].log_()
    shifted_target = prepared(z_target[:n], cap) - row_max[:n]  # the target's shifted logit
    lp = torch.stack([shifted_target[:, 0] / t for t in temperatures]) - lse
    return lp, lse.neg_()


def _accumulate(block: torch.Tensor, cap: float | None, row_max: torch.Tensor, sums: torch.Tensor,
                temperatures: Sequence[float], scratch: torch.Tensor) -> None:
    """Add a tile of logits [k, b] to the running maxima [k, 1] and sums [n_temps, k]."""
    k, b = block.shape
    converted, shifted, e = (scratch[i, :k * b].view(k, b) for i in range(3))
    if block.dtype != scratch.dtype or cap:
        block = prepared(block, cap, out=converted)
    new_max = torch.amax(block, dim=-1, keepdim=True)
    torch.maximum(new_max, row_max, out=new_max)
    grew = torch.where(row_max == new_max, 0.0, row_max - new_max)[:, 0]  # <= 0; 0 where unchanged (also -inf)
    torch.sub(block, new_max, out=shifted)  # <= 0
    for j, t in enumerate(temperatures):
        sums[j].mul_(torch.exp(grew / t)).add_(scaled_exp(shifted, t, e).sum(dim=-1))
    row_max.copy_(new_max)
