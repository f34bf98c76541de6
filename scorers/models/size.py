"""How many parameters a pair's models have (on the meta device), and a warning when the amateur is not
the smaller one."""

from __future__ import annotations

import logging

import torch

from cscore.scorers.models.loaded import LoadedModel

log = logging.getLogger(__name__)
_CHECKED: set[tuple] = set()  # (expert, amateur) pairs checked in this process


def parameters(lm: LoadedModel) -> int | None:
    """The parameters ``lm`` computes with; None where its class cannot be built here."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    if lm.config is None:
        return None
    auto = AutoModelForSeq2SeqLM if lm.is_encoder_decoder else AutoModelForCausalLM
    try:
        with torch.device("meta"):
            model = auto.from_config(lm.config)
    except (ValueError, ImportError, OSError, TypeError, AttributeError, RuntimeError):  # cannot build it here
        return None
    return sum(p.numel() for p in model.parameters())


def readable(n: int) -> str:
    """``n`` parameters in a few characters: 268M, 1.5B, 23,456."""
    if n >= 10**9:
        return f"{n / 1e9:.1f}B"
    if n >= 10**6:
        return f"{n / 1e6:.0f}M"
    return f"{n:,}"


def upside_down(expert: LoadedModel, amateur: LoadedModel) -> str | None:
    """The warning line when ``amateur`` has at least as many parameters as ``expert``, else None."""
    if amateur.parent is expert and amateur.exit_layer != expert.info.get("layers"):
        return None  # an early exit of the expert before its last layer: smaller by construction
    n_ama, n_exp = parameters(amateur), parameters(expert)
    if n_ama is None or n_exp is None or n_ama < n_exp:
        return None
    return (f"amateur {amateur.name} ({readable(n_ama)} parameters) is not smaller than expert {expert.name} "
            f"({readable(n_exp)}): contrastive methods assume a smaller amateur")


def warn_if_upside_down(expert: LoadedModel, amateur: LoadedModel) -> None:
    """Log ``upside_down``'s line, once per process for one pair of models."""
    key = (expert.name, expert.exit_layer, amateur.name, amateur.exit_layer)
    if key in _CHECKED:
        return
    _CHECKED.add(key)
    line = upside_down(expert, amateur)
    if line is not None:
        log.warning(line)
