"""A loaded model as the scorers use it: the module (loaded lazily), its tokenizer and its identity."""

from __future__ import annotations

import logging
import time
from typing import Callable

import torch
from torch import nn

log = logging.getLogger(__name__)


class LoadedModel:
    """A model ready for scoring with its tokenizer and ``info``; the weights may load on first use."""

    def __init__(self, model: nn.Module | None, tokenizer, name: str, device: torch.device, dtype: torch.dtype,
                 info: dict | None = None, *, config=None, loader: Callable[[], nn.Module] | None = None):
        if model is None and loader is None:
            raise ValueError("give a model or a loader")
        self._model, self._loader = model, loader
        self.tokenizer, self.name, self.device, self.dtype = tokenizer, name, device, dtype
        self.load_seconds = 0.0
        self.info = {} if info is None else info
        self.parent: LoadedModel | None = None  # for an early exit: the full model it is cut from (``cut``)
        self.exit_layer: int | None = None
        self.is_encoder_decoder = bool(self.info.get("encoder_decoder", False))
        self.config = config if config is not None else getattr(model, "config", None)
        self.reused = False  # handed out by the process's model pool with its weights already in memory
        self.touched = False  # the weights were used (since the pool last handed this model out)

    def cut(self, k: int, info: dict, config, loader: Callable[[], nn.Module]) -> LoadedModel:
        """The early exit of this model after its first ``k`` layers (its weights: ``loader``)."""
        part = LoadedModel(None, self.tokenizer, f"{self.name}[:{k}]", self.device, self.dtype, info, config=config,
                           loader=loader)
        part.parent, part.exit_layer = self, k
        return part

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> nn.Module:
        self.touched = True
        if self._model is None:
            if self._loader is None:
                raise RuntimeError(f"{self.name}: its weights were released (a later job's pair does not use it)")
            start = time.perf_counter()
            self._model = self._loader()
            self._loader = None
            self.load_seconds = time.perf_counter() - start
            if self.parent is None:
                log.info("%s: weights loaded in %.1fs", self.name, self.load_seconds)
        return self._model

    def status(self) -> str:
        """How this job had the weights: "loaded", "reused", "not loaded" or "not used" (an earlier job's)."""
        root = self.parent or self
        if not root.loaded:
            return "not loaded"
        if root.reused:
            return "reused" if root.touched else "not used"
        return "loaded"

    def release(self) -> None:
        """Drop the weights (a later ``model`` access is an error)."""
        self._model = None
        self._loader = None


def eos_ids(config, tokenizer) -> set[int]:
    """The model config's EOS ids and the tokenizer's (known before the weights load)."""
    got = getattr(config, "eos_token_id", None)
    ids = set(got if isinstance(got, (list, tuple)) else [got]) | {tokenizer.eos_token_id}
    return {int(i) for i in ids if i is not None}
