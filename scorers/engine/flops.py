"""Useful FLOPs of a statistics pass (matrix products the work needs, from the model's config) and the
model FLOPs utilisation they give (docs/performance.md#useful-flops-and-mfu)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cscore.errors import ConfigError

# Dense peak TFLOP/s per dtype by a substring of the CUDA device name (first match wins). Vendor data sheets.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H200", {"bfloat16": 989.4, "float16": 989.4, "float32": 66.9}),
    ("H100 PCIe", {"bfloat16": 756.0, "float16": 756.0, "float32": 51.2}),
    ("H100 NVL", {"bfloat16": 835.5, "float16": 835.5, "float32": 60.0}),
    ("H100", {"bfloat16": 989.4, "float16": 989.4, "float32": 66.9}),  # SXM
    ("GH200", {"bfloat16": 989.4, "float16": 989.4, "float32": 66.9}),
    ("A100", {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5}),
    ("L40S", {"bfloat16": 362.05, "float16": 362.05, "float32": 91.6}),
    ("A10G", {"bfloat16": 70.0, "float16": 70.0, "float32": 31.2}),
    ("L4", {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3}),
)


@dataclass(frozen=True)
class Costs:
    """FLOPs of one model: per token, per scored position and head, per allowed (query, key) pair."""

    body: int
    head: int
    pair: int
    window_pair: int = 0
    window: int | None = None


def costs(model) -> Costs | None:
    """The per-token costs of a decoder-only transformers model, or None where its config does not say."""
    c = getattr(model, "config", None)
    if c is None or getattr(c, "is_encoder_decoder", False):
        return None
    try:
        from cscore.scorers.models.anatomy import decoder_layers  # torch: only for a model in memory

        d, layers, heads = int(c.hidden_size), int(c.num_hidden_layers), int(c.num_attention_heads)
        ffn = int(c.intermediate_size)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        mlp = getattr(decoder_layers(model)[0], "mlp", None)
    except (AttributeError, IndexError, TypeError, ConfigError):
        return None
    if mlp is None:
        return None
    gated = 3 if any(hasattr(mlp, n) for n in ("gate_proj", "gate_up_proj")) else 2  # (gate,) up, down
    head_dim = int(getattr(c, "head_dim", None) or d // heads)
    q, kv = heads * head_dim, int(getattr(c, "num_key_value_heads", None) or heads) * head_dim
    per_layer = 2 * d * (2 * q + 2 * kv) + 2 * gated * d * ffn
    types = list(getattr(c, "layer_types", None) or ["full_attention"] * layers)
    window = getattr(c, "sliding_window", None)
    n_window = sum(t == "sliding_attention" for t in types) if window else 0
    return Costs(body=layers * per_layer, head=2 * d * vocab, pair=4 * q * (layers - n_window),
                 window_pair=4 * q * n_window, window=int(window) if window and n_window else None)


def causal_pairs(start: int, n: int, window: int | None = None) -> int:
    """Allowed causal (query, key) pairs of ``n`` queries from position ``start`` (within ``window``)."""
    if n <= 0:
        return 0
    if window is None:
        return n * start + n * (n + 1) // 2
    return sum(min(k, window) for k in range(start + 1, start + n + 1))  # keys seen by the query at k - 1


def row_flops(c: Costs, prompt: int, hyps: Sequence[int], scored_heads: int, scored: int | None = None) -> int:
    """Useful FLOPs of a prompt and its hypotheses (lengths), every token scored (or ``scored`` positions)."""
    tokens = prompt + sum(hyps)
    total = c.body * tokens + c.head * scored_heads * (sum(hyps) if scored is None else scored)
    for window, per in ((None, c.pair), (c.window, c.window_pair)):
        if per:
            pairs = causal_pairs(0, prompt, window) + sum(causal_pairs(prompt, h, window) for h in hyps)
            total += per * pairs
    return total


def rows_flops(c: Costs, items, rows, scored_heads: int, last_only: bool = False) -> int:
    """``row_flops`` summed over engine rows; ``last_only``: each member scored at one position."""
    return sum(row_flops(c, len(r.prompt), [len(items[i][1]) for i in r.members], scored_heads,
                         scored=len(r.members) if last_only else None) for r in rows)


def peak_flops(device, dtype) -> float | None:
    """The device's dense peak FLOP/s for ``dtype`` (a torch dtype or its name), or None if unknown."""
    if getattr(device, "type", str(device).split(":")[0]) != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name(device)
    key = str(dtype).removeprefix("torch.")
    for pattern, peaks in PEAK_TFLOPS:
        if pattern in name:
            return peaks[key] * 1e12 if key in peaks else None
    return None


def mfu(flops: float | None, seconds: float | None, peak: float | None) -> float | None:
    """Model FLOPs utilisation: useful FLOPs per second over the device's peak (None if unknown)."""
    if not flops or not seconds or not peak:
        return None
    return flops / seconds / peak
