"""Host-to-device copies that do not wait for the device.

A plain ``tensor.to("cuda")`` from ordinary host memory copies and then synchronises the stream:
the host waits until every kernel queued before it has run, so the device idles while the next
batch is prepared. ``upload`` copies from pinned memory without blocking (torch's pinned-memory
allocator keeps the source alive until the copy has run); elsewhere it is a plain ``.to``."""

from __future__ import annotations

import torch


def upload(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
