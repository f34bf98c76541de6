"""PNG figures of a report (matplotlib, Agg backend): ``*_figure`` draws, ``save`` writes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from cscore import rundir

SINGLE_PASS_NOTE = ("one forward pass produced every row, so they share one speed:\n"
                    "speed vs quality needs runs with several model pairs")

DPI = 130  # of every saved PNG
PANEL_WIDTH = 2.6  # inches, of a panel of distribution_figure
MAX_LABELLED_X = 8  # a sweep of at most this many values gets one x tick per value


def save(fig, out: Path) -> Path:
    """Writes ``fig`` at ``DPI``, with tight_layout unless it has a layout engine of its own."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points."""
    chars = max(int(width_in * 72 / (0.6 * fontsize)), 20)
    return "\n".join("\n".join(textwrap.wrap(line, chars)) for line in text.split("\n")) if text else text


def correlation_vs_param_figure(table: pd.DataFrame, param: str, title: str = "", caption: str = "",
                                warning: str = ""):
    """Lines of correlation vs a swept parameter (ContrastScore Fig. 2 / 3) from columns param, series, value
    and optionally low / high (error bars)."""
    fig, ax = plt.subplots(figsize=(6, 4.4 if warning else 4))
    groups = list(table.groupby("series", sort=False))
    xs = np.sort(pd.unique(pd.to_numeric(table[param], errors="coerce")))
    xs = xs[np.isfinite(xs)]
    # the n series side by side, evenly around each x over a spread of at most half the smallest step, 6 % of the axis
    spread = min(0.5 * np.diff(xs).min(), 0.06 * (xs.max() - xs.min())) if len(xs) > 1 else 0.0
    n = len(groups)
    for k, (series, part) in enumerate(groups):
        part = part.sort_values(param)
        x = part[param].to_numpy(dtype=float) + (0.0 if n < 2 else (k - (n - 1) / 2) * (spread / (n - 1)))
        y = part["value"].to_numpy(dtype=float)
        if {"low", "high"} <= set(part.columns) and part["low"].notna().any():
            err = np.vstack([y - part["low"].to_numpy(dtype=float), part["high"].to_numpy(dtype=float) - y])
            # a value outside its interval (a tie-calibrated acc23) gets no bar on that side
            err = np.where(np.isfinite(err), np.maximum(err, 0.0), 0.0)
            ax.errorbar(x, y, yerr=err, marker="o", markersize=4, capsize=3,
                        linewidth=1.2, elinewidth=1.0, label=str(series))
        else:
            ax.plot(x, y, marker="o", markersize=4, label=str(series))
    if 1 < len(xs) <= MAX_LABELLED_X:  # each swept value labelled (not the offsets of the bars)
        ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xlabel(param)
    ax.set_ylabel("correlation")
    head = title + ("\n" + wrap(caption, 4.4, 8) if caption else "")
    ax.set_title(head, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # off the bars
    if warning:
        ax.text(0.0, -0.2, wrap("Warning: " + warning, 4.4, 8), transform=ax.transAxes, ha="left", va="top",
                fontsize=8, color="tab:red")
    return fig


def heatmap_figure(table: pd.DataFrame, rows: str, cols: str, title: str = ""):
    """A grid of correlation over two swept parameters (e.g. lambda x t)."""
    shape = heatmap_grid(table, rows, cols).shape
    width = max(1.1 * shape[1] + 2, 6)
    fig, ax = plt.subplots(figsize=(width, 0.7 * shape[0] + 1.8))
    draw_heatmap(ax, table, rows, cols, wrap(title, width - 1.5, 9))
    return fig


def heatmap_grid(table: pd.DataFrame, rows: str, cols: str) -> pd.DataFrame:
    """Mean value per (rows, cols) cell, both sorted; all-nan cells kept (they say "nan")."""
    return table.pivot_table(index=rows, columns=cols, values="value", aggfunc="mean",
                             dropna=False).sort_index().sort_index(axis=1)


def draw_heatmap(ax, table: pd.DataFrame, rows: str, cols: str, title: str = ""):
    """``heatmap_grid`` on ``ax``, each value written in its cell, and a colour bar (unless all nan)."""
    grid = heatmap_grid(table, rows, cols)
    values = grid.to_numpy(dtype=float)
    im = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
    ax.set_xlabel(cols)
    ax.set_ylabel(rows)
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, "nan" if np.isnan(v) else f"{v:.3f}", ha="center", va="center", fontsize=8,
                color="0.4" if np.isnan(v) else _ink(im.cmap(im.norm(v))))
    if np.isfinite(values).any():  # an all-nan grid has no scale to show
        ax.figure.colorbar(im, ax=ax)
    ax.set_title(title, fontsize=9)
    return im


def _ink(rgba) -> str:
    """Black on a light cell, white on a dark one (relative luminance, ITU-R BT.709)."""
    r, g, b = rgba[:3]
    return "k" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "w"


def distribution_figure(scores: pd.DataFrame, metric_cols: list[str], human_cols: list[str]):
    """Histograms of the z-scored scores: human aspects on top (orange), metrics below (blue)."""
    ncols = max(len(human_cols), len(metric_cols), 1)
    fig = plt.figure(figsize=(PANEL_WIDTH * ncols, 5.4))
    for row, cols in enumerate((human_cols, metric_cols)):
        for k, col in enumerate(cols):
            ax = fig.add_subplot(2, ncols, row * ncols + k + 1)
            _histogram(ax, scores[col].to_numpy(dtype=float), "tab:orange" if row == 0 else "tab:blue")
            name = col.removeprefix(rundir.SCORE).removeprefix(rundir.HUMAN)
            ax.set_title(wrap(f"{name} (human)" if row == 0 else name, PANEL_WIDTH - 0.3, 9), fontsize=9)
    return fig


def _histogram(ax, x: np.ndarray, color: str) -> None:
    x = x[np.isfinite(x)]
    if len(x) > 1 and x.std() > 0:
        x = (x - x.mean()) / x.std()
    ax.hist(x, bins=30, color=color)
    ax.set_xlabel("z-score", fontsize=8)


def speed_vs_quality_figure(points: pd.DataFrame, title: str = "", ylabel: str = "correlation (AVG)"):
    """Samples/s against correlation, one labelled point per forward pass (ContrastScore Fig. 1)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(points["samples_per_second"], points["value"])
    speeds = points["samples_per_second"].to_numpy(dtype=float)
    middle = np.sqrt(speeds.min() * speeds.max()) if len(speeds) else 0.0
    for _, r in points.iterrows():
        right = len(speeds) > 1 and r["samples_per_second"] > middle  # its label to the left: inside the axes
        ax.annotate(str(r["label"]), (r["samples_per_second"], r["value"]), fontsize=7,
                    xytext=(-3 if right else 3, 3), textcoords="offset points", ha="right" if right else "left")
    if len(points) < 2:
        ax.text(0.5, 0.04, SINGLE_PASS_NOTE, transform=ax.transAxes, ha="center", va="bottom", fontsize=8,
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "grey"})  # below the centred point
    _log_x(ax, speeds)
    ax.set_xlabel("samples / second (log)")
    ax.set_ylabel(ylabel)
    ax.set_title(wrap(title, 5.5, 9), fontsize=9)
    ax.grid(alpha=0.3)
    return fig


def _log_x(ax, values: np.ndarray) -> None:
    """A log x axis labelled with plain numbers: 1, 10, 100 and, over at most 3 decades, 2 and 5."""
    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    values = values[np.isfinite(values) & (values > 0)]
    few = len(values) == 0 or np.log10(values.max() / values.min()) <= 3
    ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0) if few else "auto"))
    ax.xaxis.set_minor_formatter(plain if few else NullFormatter())
