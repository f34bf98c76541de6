"""PNG figures of a report (matplotlib, Agg backend): ``*_figure`` draws, ``save`` writes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from cscore import rundir


SINGLE_PASS_NOTE = ("one forward pass produced every row, so they share one speed:\n"
                    "speed vs quality needs runs with several model pairs")


def save(fig, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()  # also makes room for a legend placed outside the axes
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def correlation_vs_param_figure(table: pd.DataFrame, param: str, title: str = ""):
    """Lines of correlation vs a swept parameter (ContrastScore Fig. 2 / 3). ``table`` has
    columns param, series, value and optionally low / high (a CI band)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for series, part in table.groupby("series", sort=False):
        part = part.sort_values(param)
        ax.plot(part[param], part["value"], marker="o", label=str(series))
        if {"low", "high"} <= set(part.columns) and part["low"].notna().any():
            ax.fill_between(part[param], part["low"], part["high"], alpha=0.15)
    ax.set_xlabel(param)
    ax.set_ylabel("correlation")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # off the bands
    return fig



def heatmap_figure(table: pd.DataFrame, rows: str, cols: str, title: str = ""):
    """A grid of correlation over two swept parameters (e.g. lambda x t)."""
    grid = table.pivot_table(index=rows, columns=cols, values="value", aggfunc="mean",
                             dropna=False).sort_index().sort_index(axis=1)  # keep all-nan cells: they say "nan"
    fig, ax = plt.subplots(figsize=(max(1.1 * grid.shape[1] + 2, 6), 0.7 * grid.shape[0] + 1.8))
    im = ax.imshow(grid.to_numpy(dtype=float), cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
        ax.text(j, i, "nan" if np.isnan(v) else f"{v:.3f}", ha="center", va="center",
                color="0.4" if np.isnan(v) else "w", fontsize=8)
    fig.colorbar(im, ax=ax)
    ax.set_title(title, fontsize=9)
    return fig


def distribution_figure(scores: pd.DataFrame, metric_cols: list[str], human_cols: list[str]):
    """Histograms of the z-scored scores: one panel per human aspect (top row, orange), one per
    metric (bottom row, blue)."""
    ncols = max(len(human_cols), len(metric_cols), 1)
    fig = plt.figure(figsize=(2.6 * ncols, 5.4))
    for row, cols in enumerate((human_cols, metric_cols)):
        for k, col in enumerate(cols):
            ax = fig.add_subplot(2, ncols, row * ncols + k + 1)
            _histogram(ax, scores[col].to_numpy(dtype=float), "tab:orange" if row == 0 else "tab:blue")
            name = col.removeprefix(rundir.SCORE).removeprefix(rundir.HUMAN)
            ax.set_title(f"{name} (human)" if row == 0 else name, fontsize=9)
    return fig


def _histogram(ax, x: np.ndarray, color: str) -> None:
    x = x[np.isfinite(x)]
    if len(x) > 1 and x.std() > 0:
        x = (x - x.mean()) / x.std()
    ax.hist(x, bins=30, color=color)
    ax.set_xlabel("z-score", fontsize=8)



def speed_vs_quality_figure(points: pd.DataFrame, title: str = ""):
    """Samples/s against correlation, one labelled point per distinct forward pass (ContrastScore
    Fig. 1); ``points`` has columns label, samples_per_second, value. With a single pass the
    plot says that it needs several pairs."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(points["samples_per_second"], points["value"])
    for _, r in points.iterrows():
        ax.annotate(str(r["label"]), (r["samples_per_second"], r["value"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    if len(points) < 2:
        ax.text(0.5, 0.04, SINGLE_PASS_NOTE, transform=ax.transAxes, ha="center", va="bottom", fontsize=8,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "grey"})  # below the centred point
    ax.set_xscale("log")
    ax.set_xlabel("samples / second (log)")
    ax.set_ylabel("correlation (AVG)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return fig

