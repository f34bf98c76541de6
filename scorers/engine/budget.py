"""``runtime.token_budget=auto``: the largest batch that fits the device, once per (model, device, dtype):
probed on CUDA (3/4 of what fits), elsewhere estimated to keep activations under a quarter of free memory."""

from __future__ import annotations

import logging

import torch

from cscore.errors import OutOfMemory  # defined in errors.py
from cscore.scorers.engine.head import HEAD_CHUNK_ELEMENTS, head_logits

log = logging.getLogger(__name__)

AUTO = "auto"
CUDA_START = 1 << 16
CPU_MAX = 1 << 13
MIN_BUDGET = 64
_FOUND: dict[tuple, int] = {}


def is_oom(err: BaseException) -> bool:
    """A device (or host allocator) out-of-memory error, as torch raises it."""
    if isinstance(err, torch.OutOfMemoryError):
        return True
    text = str(err)
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def free_device_memory() -> None:
    """Collect garbage and return the allocator's cached blocks (after an out-of-memory error)."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def activation_bytes(config, tokens: int, row: int, dtype: torch.dtype) -> int:
    """A generous estimate of a forward pass's peak activation memory."""
    size = torch.finfo(dtype).bits // 8
    hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "d_model", 0) or 1024)
    inter = int(getattr(config, "intermediate_size", 0) or getattr(config, "d_ff", 0) or 4 * hidden)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "num_heads", 0) or 16)
    per_token = (12 * hidden + 2 * inter) * size
    attention = 2 * heads * row * row * 4 * max(1, tokens // max(row, 1))
    return tokens * per_token + attention + 3 * HEAD_CHUNK_ELEMENTS * 4


def resolve(model, *, longest_row: int) -> int:
    """The budget for ``model`` (a loaded transformers model), found once per process."""
    param = next(model.parameters())
    key = (id(model), param.device.type, param.device.index, param.dtype)
    if key in _FOUND:
        return _FOUND[key]
    probe = param.device.type == "cuda"
    budget = _probe(model, longest_row) if probe else _estimate(model, longest_row)
    log.info("runtime.token_budget=auto: %d tokens per batch on %s (%s)", budget, param.device,
             "probed" if probe else "estimated from free memory")
    _FOUND[key] = budget
    return budget


def _estimate(model, longest_row: int) -> int:
    import psutil

    free = psutil.virtual_memory().available
    param = next(model.parameters())
    budget = CPU_MAX
    while budget > MIN_BUDGET and activation_bytes(model.config, budget, min(budget, longest_row),
                                                   param.dtype) > free // 4:
        budget //= 2
    return budget


@torch.inference_mode()
def _probe(model, longest_row: int) -> int:
    from cscore.scorers.models.anatomy import decoder_base

    param = next(model.parameters())
    budget = CUDA_START
    while budget >= MIN_BUDGET:
        row = max(1, min(budget, longest_row))
        try:
            ids = torch.zeros((max(1, budget // row), row), dtype=torch.long, device=param.device)
            hidden = decoder_base(model)(input_ids=ids, use_cache=False).last_hidden_state
            vocab = model.get_output_embeddings().weight.shape[0]
            head_logits(model, hidden.reshape(-1, hidden.shape[-1])[:max(1, HEAD_CHUNK_ELEMENTS // vocab)])
            del ids, hidden
            torch.cuda.synchronize(param.device)
            return max(MIN_BUDGET, budget * 3 // 4)
        except Exception as err:  # noqa: BLE001 - only out-of-memory is expected here
            if not is_oom(err):
                raise
        torch.cuda.empty_cache()
        budget //= 2
    raise OutOfMemory(f"runtime.token_budget=auto: not even {MIN_BUDGET} tokens fit on {param.device}")
