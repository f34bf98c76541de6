"""PNG figures of a report (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _save(fig, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def correlation_vs_param(table: pd.DataFrame, param: str, out: Path, title: str = "") -> Path:
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
    ax.legend(fontsize=8)
    return _save(fig, out)


def heatmap(table: pd.DataFrame, rows: str, cols: str, out: Path, title: str = "") -> Path:
    """A grid of correlation over two swept parameters (e.g. lambda x t)."""
    grid = table.pivot_table(index=rows, columns=cols, values="value", aggfunc="mean").sort_index().sort_index(axis=1)
    fig, ax = plt.subplots(figsize=(1.1 * grid.shape[1] + 2, 0.7 * grid.shape[0] + 1.8))
    im = ax.imshow(grid.to_numpy(dtype=float), cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
        ax.text(j, i, "nan" if np.isnan(v) else f"{v:.3f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im, ax=ax)
    ax.set_title(title)
    return _save(fig, out)


def score_distributions(scores: pd.DataFrame, metric_cols: list[str], human_col: str, out: Path) -> Path:
    """Histograms of each metric's scores next to the human scores, all z-scored."""
    cols = [human_col] + list(metric_cols)
    fig, axes = plt.subplots(1, len(cols), figsize=(2.6 * len(cols), 2.6), squeeze=False)
    for ax, col in zip(axes[0], cols):
        x = scores[col].to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        if len(x) > 1 and x.std() > 0:
            x = (x - x.mean()) / x.std()
        ax.hist(x, bins=30, color="tab:orange" if col == human_col else "tab:blue")
        ax.set_title(col.removeprefix("score.").removeprefix("human.") + (" (human)" if col == human_col else ""),
                     fontsize=9)
        ax.set_xlabel("z-score", fontsize=8)
    return _save(fig, out)


def speed_vs_quality(table: pd.DataFrame, out: Path, title: str = "") -> Path:
    """Samples/s against correlation, one labelled point per row (ContrastScore Fig. 1)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(table["samples_per_second"], table["value"])
    for _, r in table.iterrows():
        ax.annotate(str(r["label"]), (r["samples_per_second"], r["value"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("samples / second (log)")
    ax.set_ylabel("correlation (AVG)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _save(fig, out)
