"""Soft pairwise accuracy (SPA; Thompson et al. 2024, WMT24 system level) and PCE = 1 - SPA, step by
step as mt-metrics-eval's ``mt_metrics_eval/pce.py`` (float32 sums, 1000 flips from
``default_rng(4)``, ``>=``, no smoothing); docs/reports.md "Soft pairwise accuracy" gives the
formula. The flips are an argument, so a test can pass all 2^N of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

PERMUTATIONS = 1000  # mt-metrics-eval's default num_permutations
SEED = 4  # mt-metrics-eval's default seed


@dataclass
class Spa:
    value: float           # SPA = 1 - pce
    pce: float             # mean |p_human - p_metric| over system pairs
    p_human: np.ndarray    # (systems x systems): p(i better than j) in both triangles, NaN diagonal
    p_metric: np.ndarray


def sign_flips(n_segments: int, permutations: int = PERMUTATIONS, seed: int = SEED) -> np.ndarray:
    """(permutations x n_segments) float32 of -1 / +1, drawn as mt-metrics-eval draws them."""
    coins = np.rint(np.random.default_rng(seed).random(size=(permutations, n_segments), dtype=np.float32))
    return coins * np.float32(2.0) - np.float32(1.0)


def pairwise_p_values(scores, flips: np.ndarray) -> np.ndarray:
    """p(i better than j) for every ordered pair of systems: the share of ``flips`` whose delta is >= the observed."""
    x = np.asarray(scores, dtype=np.float64).astype(np.float32)
    n_sys = x.shape[0]
    totals = np.sum(x, axis=1)
    flipped = np.matmul(flips, x.T)  # (permutations x systems) float32
    i, j = np.nonzero(~np.eye(n_sys, dtype=bool))
    hits = np.count_nonzero(flipped[:, i] - flipped[:, j] >= totals[i] - totals[j], axis=0)
    out = np.full((n_sys, n_sys), np.nan)
    out[i, j] = hits / flips.shape[0]
    return out


def spa(human, metric, permutations: int = PERMUTATIONS, seed: int = SEED, flips=None) -> Spa:
    """SPA of ``metric`` against ``human``, both (systems x segments); ``flips`` replaces the drawn sign flips."""
    h, m = np.asarray(human, dtype=np.float64), np.asarray(metric, dtype=np.float64)
    if h.shape != m.shape or h.ndim != 2:
        raise ValueError(f"human {h.shape} and metric {m.shape} must be the same (systems x segments) shape")
    if flips is None:
        flips = sign_flips(h.shape[1], permutations, seed)
    p_h, p_m = pairwise_p_values(h, flips), pairwise_p_values(m, flips)
    upper = np.triu_indices(h.shape[0], 1)
    pce = float(np.mean(np.abs(p_h - p_m)[upper])) if upper[0].size else float("nan")
    return Spa(1.0 - pce, pce, p_h, p_m)


@dataclass
class Matrices:
    systems: list          # sorted names
    segments: list         # in order of first appearance
    human: np.ndarray      # (systems x segments)
    metric: np.ndarray
    n_dropped: int         # segments left out: some system lacks a finite human or metric score


def matrices(df: pd.DataFrame, metric_col: str, human_col: str) -> Matrices:
    """The long table as (systems x segments) matrices over the segments every system has finite scores for."""
    frame = df[["system", "group", human_col, metric_col]]
    if frame.duplicated(["system", "group"]).any():
        raise ValueError("several rows share a system and a group: SPA needs one score per system and segment")
    segments = list(pd.unique(frame["group"]))
    h = frame.pivot(index="system", columns="group", values=human_col).reindex(columns=segments).sort_index()
    m = frame.pivot(index="system", columns="group", values=metric_col).reindex(index=h.index, columns=segments)
    hv, mv = h.to_numpy(dtype=np.float64), m.to_numpy(dtype=np.float64)
    keep = (np.isfinite(hv) & np.isfinite(mv)).all(axis=0)
    return Matrices(list(h.index), [s for s, k in zip(segments, keep) if k], hv[:, keep], mv[:, keep],
                    int((~keep).sum()))


def pairs_table(mat: Matrices, res: Spa) -> pd.DataFrame:
    """One row per pair of systems i < j: the two p-values SPA compares."""
    i, j = np.triu_indices(len(mat.systems), 1)
    return pd.DataFrame({"system_a": np.asarray(mat.systems, dtype=object)[i],
                         "system_b": np.asarray(mat.systems, dtype=object)[j],
                         "p_human": res.p_human[i, j], "p_metric": res.p_metric[i, j]})
