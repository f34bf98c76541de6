"""The shard plan (``runtime.shards``): which shard owns which unit of a pass. A unit is whatever is
never split between shards: a statistics batch, a prompt's decode tree, a CDM negative group. The
units come in plan order (longest first), each with its cost (padded tokens, characters); each goes
to the shard with the least cost so far. Every shard deals the same plan alike, so no shard needs
to hear from another; the deal fixes which shard's partials hold an item, never its numbers.

This module does not import torch or the engine: a ``Shard`` is handed to the engine as the part
of the plan the process runs (a checkpoint's ``part``, an ``engine.passes.PlanPart``), which asks it
for the items other processes run and the progress's detail; the engine knows nothing of shards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def deal(costs: Sequence[int], n: int) -> list[int]:
    """The shard of each unit: units in plan order (longest first), each to the shard with the
    least cost so far (padded tokens; ties: the lowest index). Every shard deals the same plan alike."""
    loads = [0] * n
    owner = []
    for c in costs:
        k = min(range(n), key=lambda s: (loads[s], s))
        owner.append(k)
        loads[k] += int(c)
    return owner


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``."""

    index: int
    count: int

    def owners(self, costs: Sequence[int]) -> list[int]:
        """Whose each unit is (the units' ``costs`` in plan order)."""
        return deal(costs, self.count)

    def mine(self, units: Sequence, costs: Sequence[int]) -> list:
        """This shard's units, in plan order."""
        return [u for u, owner in zip(units, self.owners(costs)) if owner == self.index]

    def foreign(self, units: Sequence[Sequence[int]], costs: Sequence[int], n_items: int) -> np.ndarray:
        """The items (of ``n_items``) in other shards' units (``units``: each a list of item indices)."""
        out = np.zeros(n_items, dtype=bool)
        for members, owner in zip(units, self.owners(costs)):
            if owner != self.index:
                out[list(members)] = True
        return out

    def detail(self, mine: int, planned: int) -> str:
        """The progress's detail of a shard's pass: ``mine`` of the ``planned`` batches are its."""
        return f"shard {self.index} of {self.count}: {mine:,} of {planned:,} batches"
