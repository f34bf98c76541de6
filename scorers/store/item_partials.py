"""Checkpoint partials whose payload is not per-token rows: one entry per item (a judge context, a
decoded prompt), kept as named arrays. ``ItemCheckpoint`` is a ``checkpoint.Checkpoint`` (the same
files ``[s<K>-]<n>-<sha256>.npz``, the same checks: checksum in the name, a header naming this very
pass, positions in range and not repeated; a part's files, ``mark_foreign``), with one position per item.

A ``Layout`` names the arrays: ``fixed`` ones hold one row per item of the file (their trailing
shape given), ``ragged`` ones each item's own run, item after item, their lengths in the fixed
array ``sizes``. ``gather`` gives what the files hold in item order; ``assemble`` (given by the pass)
turns a complete checkpoint into the cache entry's payload.

This module does not import torch."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cscore.scorers.store.checkpoint import Checkpoint

SIZES = "sizes"  # the fixed array with each item's length of the ragged arrays


@dataclass(frozen=True)
class Layout:
    """The arrays of an item partial: ``fixed`` {name: trailing shape}, ``ragged`` names (each
    item's run of ``sizes[item]`` values)."""

    fixed: dict = field(default_factory=dict)
    ragged: tuple = ()

    def record(self) -> dict:
        return {"fixed": {k: list(v) for k, v in sorted(self.fixed.items())}, "ragged": list(self.ragged)}


class ItemCheckpoint(Checkpoint):
    """The partials of a pass with one entry per item (``offsets``: 0..n_items); ``add(items,
    {name: array})`` with the layout's arrays for those items; ``assemble()`` the merged payload."""

    def __init__(self, *args, layout: Layout, assemble: Callable[[ItemCheckpoint], dict] | None = None, **kw):
        super().__init__(*args, **kw)  # as ``Checkpoint``: folder, key, heads, offsets, temperatures, every, ...
        if self.n_tokens != self.n_items:
            raise ValueError("an item partial keeps one position per item")
        self.layout, self._assemble = layout, assemble
        self.header = json.dumps({"pass": json.loads(self.header), "layout": layout.record()}, sort_keys=True)

    def _rows_of(self, z) -> dict:
        names = [*self.layout.fixed, *self.layout.ragged]
        return {name: z[name] for name in names}

    def _check_rows(self, dest: np.ndarray, rows: dict) -> None:
        for name, shape in self.layout.fixed.items():
            if rows[name].shape != (dest.size, *shape):
                raise ValueError(f"{name} of shape {rows[name].shape}, expected {(dest.size, *shape)}")
        if self.layout.ragged:
            sizes = rows[SIZES]
            if sizes.dtype.kind != "i" or (sizes < 0).any():
                raise ValueError("bad sizes")
            for name in self.layout.ragged:
                if rows[name].shape != (int(sizes.sum()),):
                    raise ValueError(f"{name} does not match the sizes")

    def _arrays(self, pending: list) -> dict[str, Any]:
        names = [*self.layout.fixed, *self.layout.ragged]
        return {name: np.concatenate([np.asarray(rows[name]) for _, rows in pending]) for name in names}

    def gather(self) -> tuple[dict[str, np.ndarray], dict[str, list]]:
        """What the files read hold: ({fixed name: rows in item order, rows of items not kept
        undefined}, {ragged name: each item's run, None where not kept})."""
        fixed: dict[str, np.ndarray] = {}
        ragged: dict[str, list] = {name: [None] * self.n_items for name in self.layout.ragged}
        for dest, rows in self.kept:
            for name in self.layout.fixed:
                if name not in fixed:
                    fixed[name] = np.zeros((self.n_items, *rows[name].shape[1:]), dtype=rows[name].dtype)
                fixed[name][dest] = rows[name]
            if self.layout.ragged:
                bounds = np.concatenate([[0], np.cumsum(rows[SIZES])]).astype(np.int64)
                for name in self.layout.ragged:
                    for r, item in enumerate(dest.tolist()):
                        ragged[name][item] = rows[name][bounds[r]:bounds[r + 1]]
        return fixed, ragged

    def assemble(self) -> dict:
        """The merged payload ({head: statistics}) of a checkpoint that holds every item."""
        if self._assemble is None:
            raise ValueError("this item partial has no assemble step")
        return self._assemble(self)


def unit_offsets(n_items: int) -> np.ndarray:
    """The offsets of an item partial: one position per item."""
    return np.arange(n_items + 1, dtype=np.int64)
