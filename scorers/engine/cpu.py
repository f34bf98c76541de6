"""What this CPU offers for bfloat16 (AMX, AVX512-BF16), read from ``/proc/cpuinfo`` without torch."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

BF16_FLAGS = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16"))  # (cpuinfo flag, name shown)


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The flags of the first processor in ``/proc/cpuinfo``; empty where it cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def bf16_units(flags: frozenset[str] | None = None) -> str | None:
    """The bfloat16 units among ``flags`` (default: this CPU's), e.g. "AVX512-BF16", or None."""
    have = cpu_flags() if flags is None else flags
    return " and ".join(name for flag, name in BF16_FLAGS if flag in have) or None
