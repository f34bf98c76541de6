"""What a statistics pass reports (``EngineReport``), and what a cache entry keeps of it (no torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

R = TypeVar("R", bound="EngineReport")


@dataclass
class EngineReport:
    seconds: float  # forward-pass time (for a cache hit: the time of the run that computed it)
    tokens: int  # input tokens processed (prompt + hypothesis, no padding; a shared prompt once per row)
    padded_tokens: int
    batches: int
    cached: bool = False  # read from the statistics cache instead of computed
    fetch_seconds: float | None = None  # time this run spent getting the statistics
    token_budget: int | None = None  # the budget the pass ended with (runtime.token_budget=auto resolved, halvings)
    oom_retries: int = 0  # batches retried with half the budget after an out-of-memory
    resumed: int = 0  # items read from a checkpoint of an interrupted pass, not computed
    # reports of work done together carry one label, their seconds counted once
    shared: str | None = None
    fetch_shared: str | None = None
    flops: float | None = None  # useful FLOPs (scorers/engine/flops.py); None where the model's config does not say

    def record(self) -> dict:
        """What a cache entry keeps of the pass that computed it (its ``extra["report"]``)."""
        return {"seconds": self.seconds, "tokens": self.tokens, "padded_tokens": self.padded_tokens,
                "batches": self.batches, "flops": self.flops}

    @classmethod
    def of_record(cls: type[R], run: dict) -> R:
        """The report of a cache hit, from what ``record`` kept."""
        return cls(run.get("seconds", float("nan")), run.get("tokens", 0), run.get("padded_tokens", 0),
                   run.get("batches", 0), cached=True, flops=run.get("flops"))
