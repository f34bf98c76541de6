"""Shared pieces of the methods: reading log-probs and turning per-token values into scores."""

from __future__ import annotations

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.engine.stats import TokenStats

NORMS = ("sum", "mean", "sqrt")  # length normalisations of the sum (config: method.norm)
POOLINGS = ("min", "max")  # reductions over the time steps (CDM's Min- / Max-Pooled; cdm's method.pooling)


def logp(stats: TokenStats, temperature: float, clamp: float | None = None) -> np.ndarray:
    """log p_T(y_t) per token, clipped to [clamp, 0] first when ``clamp`` is given (the released
    ContrastScore code clamps at -20)."""
    lp = stats.lp(temperature)
    if clamp is not None:
        lp = np.clip(lp, float(clamp), 0.0)
    return lp


def floor_log(values: np.ndarray, floor: float | None) -> np.ndarray:
    """Guard log(0): values below log(floor) (> 0, as its Param checks) become log(floor)."""
    return values if floor is None else np.maximum(values, np.log(floor))


def scored_mask(offsets: np.ndarray, skip_first: bool) -> np.ndarray:
    """Which flat tokens count: all (the paper, w_t = 1) or, with ``skip_first``, the released code's
    mask, without each item's first."""
    n = int(offsets[-1])
    mask = np.ones(n, dtype=bool)
    if skip_first:
        mask[offsets[:-1][np.diff(offsets) > 0]] = False  # each non-empty item's first token
    return mask


def aggregate(values: np.ndarray, offsets: np.ndarray, norm: str = "sum", skip_first: bool = False) -> np.ndarray:
    """Per item, the scored tokens' values summed and normalised (``sum``, ``mean``, ``sqrt`` of the
    count, as the released code) or pooled (``min`` / ``max``); an item with no scored token gets 0 (the
    count clamped to 1, as in the released code)."""
    if norm not in NORMS + POOLINGS:
        raise ConfigError(f"norm must be one of {NORMS + POOLINGS}, got {norm!r}")
    offsets = np.asarray(offsets, dtype=np.int64)
    n_items = len(offsets) - 1
    item_of_token = np.repeat(np.arange(n_items), np.diff(offsets))
    mask = scored_mask(offsets, skip_first)
    idx = item_of_token[mask]
    counts = np.bincount(idx, minlength=n_items)
    if norm in POOLINGS:  # the scored tokens lie item after item, ``counts`` each
        out = np.zeros(n_items, dtype=np.float64)
        nonempty = counts > 0
        if nonempty.any():
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[nonempty]
            ufunc = np.minimum if norm == "min" else np.maximum
            out[nonempty] = ufunc.reduceat(np.asarray(values, dtype=np.float64)[mask], starts)
        return out
    sums = np.zeros(n_items, dtype=np.float64)
    np.add.at(sums, idx, values[mask])
    counts = np.maximum(counts, 1).astype(np.float64)
    if norm == "mean":
        return sums / counts
    return sums / np.sqrt(counts) if norm == "sqrt" else sums


def per_item(values: np.ndarray, offsets: np.ndarray, skip_first: bool = False) -> list[np.ndarray]:
    """The scored tokens' values of each item, as one array per item (what a learned pooler reads)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    mask = scored_mask(offsets, skip_first)
    return [np.asarray(values[a:b][mask[a:b]], dtype=np.float64) for a, b in zip(offsets[:-1], offsets[1:])]


def n_scored(offsets: np.ndarray, skip_first: bool) -> np.ndarray:
    lengths = np.diff(np.asarray(offsets, dtype=np.int64))
    return np.maximum(lengths - 1, 0) if skip_first else lengths
