"""How the forward passes of a run go: one frozen ``PassOptions`` built once from the run's
``runtime`` section (``of``) or by the Python API (``scorers/api.py``: ``request_of``), handed to every pass
(the statistics pass, its seq2seq path, the judge pass). It gives its own cache-key parts and
resolves ``auto`` in one place each: the device (``torch_device``), the token budget of a loaded
model (``budget_for``); the dtype of a loaded model is ``models.auto_dtype``'s (at load), the
threads ``engine.threads``' (set at the start of a job and around each pass: ``ModelPair.run``)."""

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
    # the distributional statistics too (stats.DIST_NAMES; expert and amateur in one joint pass): set by
    # the run when a method reads them, not a runtime setting
    distribution: bool = False
    # DoLa's candidate layers (methods/dola.py): early-exit heads "layer_<k>" of the expert's pass,
    # each with the distributional statistics against the expert; set by the run, not a runtime setting
    exits: tuple[int, ...] = ()

    @classmethod
    def of(cls, runtime) -> PassOptions:
        """From the run's typed ``runtime`` section (``cscore.config.run.Runtime``)."""
        return cls(**{f.name: getattr(runtime, f.name) for f in fields(cls)
                      if f.name not in ("distribution", "exits")})

    def key_parts(self, shared: bool) -> dict:
        """What a pass's cache key holds of these options (``shared``: it ran with packed rows:
        they batch otherwise, so the key says so; an unshared key is what it always was)."""
        parts: dict = {"token_budget": self.token_budget, "padding_side": self.padding_side}
        if shared:
            parts["prefix_sharing"] = True
        if self.distribution:  # other keys unchanged
            parts["distribution"] = True
        return parts

    def budget_for(self, model, longest_row: int) -> int:
        """The token budget of a pass of ``model``: ``token_budget``, or for auto the largest that
        fits (``budget.resolve``: found once per process and model)."""
        from cscore.scorers.engine import budget

        if budget.is_auto(self.token_budget):
            return budget.resolve(model, longest_row=longest_row)
        return int(self.token_budget)

    def torch_device(self):
        """The device ``device`` names (auto: cuda, else mps, else cpu)."""
        from cscore.scorers.models.models import auto_device

        return auto_device(self.device)
