"""The token statistics kind (methods without ``KIND``: single, contrast, cd_score, cdm, ...):
one forward pass per model keeping per-token statistics (cached), every variant a function of them."""

from __future__ import annotations

from cscore.cli.pipeline.kinds.base import REGISTRY, Loaded, MethodKind, Plan, Progress, Scored
from cscore.cli.pipeline.kinds.shared import token_plan, token_score
from cscore.scorers.config.run import RunConfig


@REGISTRY.register
class Token(MethodKind):
    name = "token"
    sections = ("units",)  # "aligned" for a cross-family pair (methods on aligned units)

    def plan(self, run: RunConfig) -> Plan:
        return token_plan(run)

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress, state: dict) -> Scored:
        return token_score(run, loaded, plan, progress, state)
