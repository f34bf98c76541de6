"""The hint a long pass on a CPU prints: the quick slice that would take about a minute, and bfloat16 where
the CPU has the units for it."""

from __future__ import annotations

import math
from typing import Callable

from cscore.scorers.engine.cpu import bf16_units

LONG = 120.0  # seconds of a pass after which the quick slice is suggested


def quick_slice(run, groups: int | None = None) -> Callable[[float], str | None]:
    """The progress bar's ``hint`` for a run of ``groups`` groups: on a CPU, after LONG seconds of a pass, the
    ``split.dev_fraction`` that would take about a minute, and ``runtime.dtype=bfloat16`` where it is faster."""
    def hint(seconds: float) -> str | None:
        if seconds < LONG or run.passes.torch_device().type != "cpu":
            return None
        text = "; ".join(n for n in (dev_slice(run, groups, seconds), bf16_note(run.passes.dtype)) if n)
        return (text if text.startswith("long on a CPU") else f"long on a CPU: {text}") if text else None

    return hint


def dev_slice(run, groups: int | None, seconds: float) -> str | None:
    """The quick slice of a pass that takes ``seconds``, or None where the run is that small already."""
    now = run.split.dev_fraction if run.split.use == "dev" and not run.split.dev_ids else 1.0
    least = 1.0 / round(groups / now) if groups else 0.01  # one group of the whole data
    fraction = max(least, now * 60.0 / seconds)
    digit = 10 ** math.floor(math.log10(fraction))
    fraction = math.ceil(round(fraction / digit, 9)) * digit  # one significant digit, rounded up
    if fraction >= now:
        return None
    return (f"long on a CPU: split.use=dev split.dev_fraction={fraction:.1g} runs a slice of whole groups "
            f"(about {seconds * fraction / now:.0f}s for this pass)")


def bf16_note(dtype: str) -> str | None:
    """A float32 run (``runtime.dtype`` auto or float32) on a CPU with bfloat16 units: say so."""
    units = bf16_units() if dtype in ("auto", "float32", "fp32") else None
    if not units:
        return None
    return (f"this CPU has bfloat16 units ({units}): runtime.dtype=bfloat16 runs faster, with scores that "
            f"differ slightly from float32's (docs/performance.md, bfloat16 on a CPU)")
