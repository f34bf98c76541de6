"""Figures of the judge report (matplotlib, Agg backend through ``metaeval.plots``):

* score distributions per score range (the CD-judge paper's Fig. 2 / App. C): the share of the
  reported items at each score of the range for the main model alone, the assistant alone and the
  contrast at the chosen (λ, t), next to the human scores put on the same range;
* the dev criterion over the λ × t grid of every (pair, range): ``plots.heatmap_figure`` with the
  chosen cell outlined.

Human scores on a judge's range: SummEval's aspects are means of 3 experts on 1-5, so they take
the values k/3. They are mapped linearly from their scale (``judge.human_scale``) onto [lo, hi]
and rounded to the nearest score point (``judge.human_on_range``): a 5-point range keeps the
scale's spacing (lo + round(h) - 1), and a mean of 3 is never halfway between two points."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from cscore import rundir
from cscore.metaeval import judge, plots
from cscore.metaeval.plots import plt

SERIES_COLORS = {"human": "tab:orange", "main": "tab:blue", "asst": "tab:gray", "contrast": "tab:green"}


def distribution_panels(rep: judge.JudgeReport, pair: str, variant: str) -> list[dict]:
    """One panel per range of a pair: range, lo, hi, lam, t, n, series {name: shares at lo..hi},
    from the chosen point's reported rows (parsed scores)."""
    study = rep.study
    scale = judge.human_scale(np.concatenate([p.frame[study.human].to_numpy(dtype=float) for p in study.points]))
    sel = rep.selection[(rep.selection["score"] == "parsed") & (rep.selection["pair"] == pair)
                        & (rep.selection["variant"] == variant)]
    panels = []
    for _, s in sel.sort_values(["lo", "hi"]).iterrows():
        point = judge.chosen_point(study, s)
        frame, _ = point.rows("test")
        lo, hi = point.lo, point.hi
        series = {"human": judge.score_shares(judge.human_on_range(frame[study.human], lo, hi, scale), lo, hi)}
        for role, row in (("main", "expert"), ("asst", "amateur"), ("contrast", point.variant)):
            col = f"{rundir.SCORE}{row}"
            if col in frame.columns:
                series[role] = judge.score_shares(frame[col], lo, hi)
        panels.append({"range": point.range, "lo": lo, "hi": hi, "lam": point.lam, "t": point.t, "n": len(frame),
                       "series": series, "names": {"main": point.main, "asst": point.asst},
                       "scale": scale})
    return panels


def score_distribution_figure(panels: list[dict], title: str = ""):
    """Grouped bars per range: share of items at each score, one bar per series."""
    n = max(len(panels), 1)
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n + 0.6, 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        names = list(panel["series"])
        x = np.arange(panel["lo"], panel["hi"] + 1)
        width = 0.8 / len(names)
        for k, name in enumerate(names):
            label = {"human": "human", "contrast": f"contrast (λ={panel['lam']:g}, t={panel['t']:g})"}.get(
                name, f"{name}: {panel['names'].get(name, name)}")
            ax.bar(x + (k - (len(names) - 1) / 2) * width, panel["series"][name], width,
                   color=SERIES_COLORS.get(name), label=label)
        ax.set_xticks(x)
        ax.set_xlabel(f"score ({panel['range']}, n={panel['n']})")
        ax.set_title(panel["range"], fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of items")
    if panels:
        a, b = panels[0]["scale"]
        axes[0][0].legend(fontsize=7, loc="upper left")
        fig.text(0.5, 0.005, f"human: mean of the experts mapped linearly from {a}-{b} onto each range and "
                 "rounded to the nearest score point", ha="center", va="bottom", fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def dev_heatmap_figure(grid: pd.DataFrame, chosen: tuple[float, float] | None = None, title: str = ""):
    """``plots.heatmap_figure`` of the dev criterion (rows λ, columns t); the chosen cell outlined."""
    fig = plots.heatmap_figure(grid, "lam", "t", title)
    if chosen is not None:
        ax = fig.axes[0]
        lams, ts = sorted(grid["lam"].unique()), sorted(grid["t"].unique())
        i, j = lams.index(chosen[0]), ts.index(chosen[1])
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    return fig


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_")


def write(rep: judge.JudgeReport, folder: Path, stem: str, criterion: str = "spearman") -> list[Path]:
    """Every figure of one study under ``folder``: ``<stem>_scores_<pair>.png`` (one per pair and
    method row) and ``<stem>_dev_<pair>_<lo>-<hi>.png`` (one per pair, method row and range)."""
    out = []
    study = rep.study
    parsed = rep.selection[rep.selection["score"] == "parsed"]
    for pair, variant in dict.fromkeys(zip(parsed["pair"], parsed["variant"])):
        name = _safe(pair if variant == "cd_judge" else f"{pair}_{variant}")
        panels = distribution_panels(rep, pair, variant)
        title = f"{study.data} {study.aspect}, {judge.contrast_label(pair, variant)}: score distributions"
        out.append(plots.save(score_distribution_figure(panels, title), folder / f"{stem}_scores_{name}.png"))
        for _, s in parsed[(parsed["pair"] == pair) & (parsed["variant"] == variant)].iterrows():
            g = rep.grid[(rep.grid["pair"] == pair) & (rep.grid["variant"] == variant) & (rep.grid["lo"] == s["lo"])
                         & (rep.grid["hi"] == s["hi"])]
            where = "dev" if s["selected_on"] == "dev" else "ALL rows (no dev split)"
            fig = dev_heatmap_figure(g, (s["lam"], s["t"]),
                                     f"{pair} {s['range']}: {where} {criterion} (chosen: outlined)")
            out.append(plots.save(fig, folder / f"{stem}_dev_{name}_{s['range']}.png"))
    return out
