"""Host-to-device copies that do not wait for the device (pinned, non-blocking, on CUDA: a plain
``.to("cuda")`` synchronises the stream)."""

from __future__ import annotations

import torch


def upload(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
