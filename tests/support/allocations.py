"""A dispatch mode that records the most elements of any tensor an operation returns (of one
dtype, or of any): what a test asserts no full-vocabulary copy is made with."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Allocations(TorchDispatchMode):
    def __init__(self, dtype: torch.dtype | None = None):
        super().__init__()
        self.dtype, self.largest = dtype, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(x, torch.Tensor) and (self.dtype is None or x.dtype == self.dtype):
                self.largest = max(self.largest, x.numel())
        return out
