"""The judge's partials (run by ``store/runner.py``): the first-step pass's per-context arrays and the
decodes' paths as ``checkpoint.ItemCheckpoint`` arrays, merged into the unsplit run's, bit for bit.
This module does not import torch."""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from cscore.scorers.judge.stats import DECODE_FORMAT, DecodedPaths
from cscore.scorers.store.checkpoint import SIZES, ItemCheckpoint, Layout
from cscore.scorers.store.runner import Pending, RowsJob, run_rows

CHAIN_ROWS = ("chain_a", "chain_z", "lse_z", "lse_c")  # per context (the others are the same for all)
FRONT = ("front_ids", "front_a", "front_z")
DECODE_LAYOUT = Layout({SIZES: ()}, ("ids",))


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
    """``found`` of a checkpoint holding every context (``chain``: the pass's chain buffers or None)."""
    fixed, ragged = checkpoint.gather()
    fronts = [(ids.astype(np.int64), a, z) for ids, a, z in zip(*(ragged[name] for name in FRONT))]
    if chain is not None:
        chain = {**chain, **{name: fixed[name] for name in CHAIN_ROWS}}
    return (fixed["main_top"].astype(np.int64), fixed["asst_top"].astype(np.int64), fixed["score_a"],
            fixed["score_z"], fronts, chain)


def _assemble(checkpoint) -> dict:
    _, ragged = checkpoint.gather()
    return {"paths": DecodedPaths.from_lists([ids.tolist() for ids in ragged["ids"]])}


decode_partials = functools.partial(ItemCheckpoint, layout=DECODE_LAYOUT, assemble=_assemble)


def path_rows(paths: list[list[int]]) -> dict[str, np.ndarray]:
    """A unit's paths as a decode partial's arrays."""
    return {SIZES: np.asarray([len(p) for p in paths], dtype=np.int64),
            "ids": np.asarray([t for p in paths for t in p], dtype=np.int64)}


def decodes(cache, parts: dict, plan: tuple[list, list, list], compute: Callable, label: str, coordinator,
            reports: dict | None = None, after: str | None = None) -> dict | Pending:
    """{row: (paths, from the cache, seconds, call id)} of rows decoded on the runner, or ``Pending``.
    ``plan``: (units, their costs, each prompt's length); ``compute(names, units, done)`` decodes them."""
    def each(names, todo, done) -> None:
        compute(names, todo, lambda unit, paths: done(unit, {n: path_rows(p) for n, p in paths.items()}))

    full = {n: {"kind": "judge_decode", "decode_format": DECODE_FORMAT, **p} for n, p in parts.items()}
    units, costs, tokens = plan
    job = RowsJob(full, units, costs, each, len(tokens), tokens, label, decode_partials, DecodedPaths, after=after)
    got = run_rows(cache, job, coordinator, reports)
    if isinstance(got, Pending):
        return got
    return {n: (stats["paths"].paths(), cached, seconds, call) for n, (stats, cached, seconds, call) in got.items()}
