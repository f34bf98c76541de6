"""What a shard of the judge's first-step pass keeps of its contexts (``runtime.shards``): per
context the two argmaxes, the score tokens' a and z, its Pareto front (ragged) and, for ranges
with multi-token values, its chain rows, as ``item_partials.ItemCheckpoint`` arrays. The merge
puts them back where ``judge._judge_batch`` puts them, so the statistics it assembles are the
unsharded pass's, bit for bit.

This module does not import torch."""

from __future__ import annotations

import numpy as np

from cscore.scorers.store.item_partials import SIZES, Layout

CHAIN_ROWS = ("chain_a", "chain_z", "lse_z", "lse_c")  # per context (the others are the same for all)
FRONT = ("front_ids", "front_a", "front_z")


def first_step_layout(n_values: int, chain: dict | None) -> Layout:
    """The arrays of a first-step partial (``chain``: ``judge.chain_buffers``' or None)."""
    fixed = {"main_top": (), "asst_top": (), "score_a": (n_values,), "score_z": (n_values,), SIZES: ()}
    if chain is not None:
        fixed.update({name: tuple(chain[name].shape[1:]) for name in CHAIN_ROWS})
    return Layout(fixed, FRONT)


def context_rows(found, own: list[int]) -> dict[str, np.ndarray]:
    """The arrays of the contexts ``own`` (``found`` as ``judge._judge_batch`` fills it)."""
    main_top, asst_top, score_a, score_z, fronts, chain = found
    rows = {"main_top": main_top[own], "asst_top": asst_top[own], "score_a": score_a[own], "score_z": score_z[own],
            SIZES: np.asarray([len(fronts[i][0]) for i in own], dtype=np.int64)}
    for k, name in enumerate(FRONT):
        rows[name] = np.concatenate([fronts[i][k] for i in own])
    rows["front_ids"] = rows["front_ids"].astype(np.int64)
    if chain is not None:
        rows.update({name: chain[name][own] for name in CHAIN_ROWS})
    return rows


def found_of(checkpoint, chain: dict | None) -> tuple:
    """``found`` (main_top, asst_top, score_a, score_z, fronts, chain) of a checkpoint holding every
    context (``chain``: the pass's chain buffers, its per-context rows filled here)."""
    fixed, ragged = checkpoint.gather()
    fronts = [(ids.astype(np.int64), a, z) for ids, a, z in zip(*(ragged[name] for name in FRONT))]
    if chain is not None:
        chain = {**chain, **{name: fixed[name] for name in CHAIN_ROWS}}
    return (fixed["main_top"].astype(np.int64), fixed["asst_top"].astype(np.int64), fixed["score_a"],
            fixed["score_z"], fronts, chain)
