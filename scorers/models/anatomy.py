"""Where the parts of a transformers causal LM are: its decoder stack, the decoder layers, the final norm."""

from __future__ import annotations

import inspect

from torch import nn

from cscore.errors import ConfigError


def decoder_base(model: nn.Module) -> nn.Module:
    """The decoder stack under the LM head (``model.model`` for most causal LMs, Gemma-3 under 4.x too)."""
    base = getattr(model, "model", None)
    if base is None:
        base = getattr(model, str(model.base_model_prefix))
    assert isinstance(base, nn.Module), type(base)
    return base


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    layers = getattr(decoder_base(model), "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ConfigError(f"early exit needs a decoder with a `layers` list; {type(model).__name__} has none")
    return layers


def layer_list(model: nn.Module) -> list[nn.Module]:
    """The decoder layers where the model has a ``layers`` list, else none (progress ticks only)."""
    layers = getattr(decoder_base(model), "layers", None)
    return list(layers) if isinstance(layers, nn.ModuleList) else []


def final_norm(model: nn.Module) -> nn.Module:
    """The norm applied to the last layer's output before the LM head."""
    norm = decoder_base(model).norm
    assert isinstance(norm, nn.Module), type(norm)
    return norm


def is_encoder_decoder(model: nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))


_CACHE_KEYWORDS: dict[type, str] = {}  # per model class, read once


def cache_attribute(base) -> str:
    """The keyword and output field of the decoder's KV cache: ``cache`` (transformers >= 5) or ``past_key_values``;
    read once per model class (cdm's sampler asks every token)."""
    cls = type(base)
    if cls not in _CACHE_KEYWORDS:
        try:
            params = inspect.signature(cls.forward).parameters
        except (TypeError, ValueError, AttributeError):
            params = {}  # type: ignore[assignment]
        _CACHE_KEYWORDS[cls] = "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"
    return _CACHE_KEYWORDS[cls]
