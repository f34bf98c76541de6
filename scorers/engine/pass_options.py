"""How the forward passes of a run go: one frozen ``PassOptions`` from the run's ``runtime`` section or
the Python API, handed to every pass."""

from __future__ import annotations

from dataclasses import dataclass, fields

from cscore.scorers.engine.runtime_defaults import MAX_LENGTH, TOKEN_BUDGET


@dataclass(frozen=True)
class PassOptions:
    token_budget: int | str = TOKEN_BUDGET  # padded tokens per batch; "auto": the largest that fits (per model)
    padding_side: str = "right"
    prefix_sharing: bool = True  # items with the same prompt run it once (packed rows)
    max_length: int = MAX_LENGTH  # prompt + hypothesis tokens (the encoding's)
    device: str = "auto"
    dtype: str = "auto"
    threads: int | str | None = "auto"  # torch's CPU threads in a pass (engine.threads): as runtime.threads
    # set by the run: the distributional statistics (a joint pass), DoLa's candidate layers (early-exit heads)
    distribution: bool = False
    exits: tuple[int, ...] = ()

    @classmethod
    def of(cls, runtime) -> PassOptions:
        """From the run's typed ``runtime`` section (``cscore.config.run.Runtime``)."""
        return cls(**{f.name: getattr(runtime, f.name) for f in fields(cls)
                      if f.name not in ("distribution", "exits")})

    def key_parts(self, shared: bool) -> dict:
        """What a pass's cache key holds of these options (``shared``: it ran with packed rows)."""
        parts: dict = {"token_budget": self.token_budget, "padding_side": self.padding_side}
        if shared:
            parts["prefix_sharing"] = True
        if self.distribution:  # other keys unchanged
            parts["distribution"] = True
        return parts

    def budget_for(self, model, longest_row: int) -> int:
        """The token budget of a pass of ``model`` (auto: ``budget.resolve``)."""
        from cscore.scorers.engine import budget

        if self.token_budget == budget.AUTO:
            return budget.resolve(model, longest_row=longest_row)
        return int(self.token_budget)

    def torch_device(self):
        """The device ``device`` names (auto: cuda, else mps, else cpu)."""
        from cscore.scorers.models.models import auto_device

        return auto_device(self.device)
