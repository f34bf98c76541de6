"""Figures of the judge report: score distributions per score range (CD-judge Fig. 2) beside the human
scores, and the dev criterion over the λ × t grid of every (pair, range), the chosen cell outlined."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from cscore import rundir
from cscore.metaeval import judge, plots
from cscore.metaeval.judge_runs import PARSE
from cscore.metaeval.judge_tables import STATUSES
from cscore.metaeval.plots import plt

NO_VALID = "no valid scores, nothing chosen"  # a dev grid of nan cells only
SERIES_COLORS = {"human": "tab:orange", "main": "tab:blue", "asst": "tab:gray", "contrast": "tab:green"}


def human_scale(values) -> tuple[int, int]:
    """The human scores' scale: (1, 5) when every finite value lies in it, else (floor(min), ceil(max))."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0 or (v.min() >= 1 and v.max() <= 5):
        return 1, 5
    return int(math.floor(v.min())), int(math.ceil(v.max()))


def human_on_range(values, lo: int, hi: int, scale: tuple[int, int] = (1, 5)) -> np.ndarray:
    """Human scores mapped linearly from ``scale`` onto [lo, hi], rounded to the nearest score point."""
    v = np.asarray(values, dtype=float)
    a, b = scale
    mapped = lo + (v - a) * (hi - lo) / (b - a) if b > a else np.full_like(v, lo)
    return np.clip(np.floor(mapped + 0.5), lo, hi)


def score_shares(values, lo: int, hi: int, counted=None) -> np.ndarray:
    """Share of the finite values (rounded) at each integer lo..hi, counting only where ``counted`` when given."""
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    if not finite.any():
        return np.zeros(hi - lo + 1)
    k = np.clip(np.floor(v[finite if counted is None else finite & counted] + 0.5), lo, hi).astype(int) - lo
    return np.bincount(k, minlength=hi - lo + 1) / finite.sum()


def distribution_panels(rep: judge.JudgeReport, pair: str, variant: str) -> list[dict]:
    """One panel per range of a pair, from the chosen point's reported rows (parsed scores)."""
    study = rep.study
    scale = human_scale(np.concatenate([p.frame[study.human].to_numpy(dtype=float) for p in study.points]))
    sel = rep.selection[(rep.selection["score"] == "parsed") & (rep.selection["pair"] == pair)
                        & (rep.selection["variant"] == variant)]
    panels = []
    for _, s in sel.sort_values(["lo", "hi"]).iterrows():
        point = judge.chosen_point(study, s)
        frame, _ = point.rows("test")
        lo, hi = point.lo, point.hi
        series = {"human": score_shares(human_on_range(frame[study.human], lo, hi, scale), lo, hi)}
        fallback = {}
        rows = {**judge.ROW_OF_ROLE, "contrast": point.variant}  # the score column of each role
        for role, row in rows.items():
            col = f"{rundir.SCORE}{row}"
            if col in frame.columns:
                series[role] = score_shares(frame[col], lo, hi)
                if f"{PARSE}{row}" in frame.columns:  # invalid outputs set to a range end
                    fallen = np.asarray(frame[f"{PARSE}{row}"].isin(STATUSES), dtype=bool)
                    fallback[role] = score_shares(frame[col], lo, hi, fallen)
        panels.append({"range": point.range, "lo": lo, "hi": hi, "lam": point.lam, "t": point.t, "n": len(frame),
                       "series": series, "names": {"main": point.main, "asst": point.asst},
                       "scale": scale, "fallback": fallback,
                       "finite": {r: int(np.isfinite(frame[f"{rundir.SCORE}{rows[r]}"].to_numpy(dtype=float)).sum())
                                  for r in fallback}})
    return panels


FALLBACK_LABEL = "hatched: fallback (invalid output set to a range end)"


def fallback_counts(panel: dict) -> str:
    """The x label's words on fallbacks: '\nfallbacks: main 16/16, asst 16/16' ('' when none)."""
    finite = panel.get("finite") or {}
    parts = [f"{role} {round(float(share.sum()) * finite[role])}/{finite[role]}"
             for role, share in (panel.get("fallback") or {}).items() if share.any()]
    return f"\nfallbacks: {', '.join(parts)}" if parts else ""


def score_distribution_figure(panels: list[dict], title: str = ""):
    """Grouped bars per range: share of items at each score, one bar per series."""
    n = max(len(panels), 1)
    width = 3.4 * n + 2.6
    fig, axes = plt.subplots(1, n, figsize=(width, 4.2), squeeze=False, layout="constrained")
    handles = {}
    for ax, panel in zip(axes[0], panels):
        names = list(panel["series"])
        x = np.arange(panel["lo"], panel["hi"] + 1)
        bar_width = 0.8 / len(names)
        fallback = panel.get("fallback") or {}
        for k, name in enumerate(names):
            label = {"human": "human", "contrast": "contrast (chosen λ, t)"}.get(
                name, f"{name}: {panel['names'].get(name, name)}")
            where = x + (k - (len(names) - 1) / 2) * bar_width
            handles[label] = ax.bar(where, panel["series"][name], bar_width, color=SERIES_COLORS.get(name),
                                    label=label)
            if name in fallback and fallback[name].any():  # hatched: the part of the bar that is no judgement
                handles[FALLBACK_LABEL] = ax.bar(where, fallback[name], bar_width, fill=False, hatch="///",
                                                 edgecolor="black", linewidth=0.6, label=FALLBACK_LABEL)
        ax.set_xticks(x)
        ax.set_xlabel(f"score ({panel['range']}, n={panel['n']}){fallback_counts(panel)}")
        ax.set_title(f"{panel['range']}: λ={panel['lam']:g}, t={panel['t']:g}", fontsize=9)
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of items")
    if panels:
        a, b = panels[0]["scale"]
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=7)  # off the title
        note = (f"human: mean of the experts mapped linearly from {a}-{b} onto each range and rounded to the "
                "nearest score point")
        fig.supxlabel(plots.wrap(note, width - 0.4, 7), fontsize=7)  # in the layout: never under a label
    fig.suptitle(plots.wrap(title, width - 0.4, 10), fontsize=10)
    return fig


def dev_heatmap_figure(grids: dict[str, pd.DataFrame], chosen: dict[str, tuple[float, float]], title: str = ""):
    """The dev criterion over λ (rows) x t (columns), one panel per score kind, each chosen finite cell outlined."""
    shape = plots.heatmap_grid(next(iter(grids.values())), "lam", "t").shape
    width = len(grids) * max(1.1 * shape[1] + 2.2, 4.2)
    fig, axes = plt.subplots(1, len(grids), figsize=(width, 0.7 * shape[0] + 2.2), squeeze=False,
                             layout="constrained")
    for ax, (kind, grid) in zip(axes[0], grids.items()):
        cells = plots.heatmap_grid(grid, "lam", "t")
        valid = bool(np.isfinite(cells.to_numpy(dtype=float)).any())
        plots.draw_heatmap(ax, grid, "lam", "t", f"{kind} score" if valid else f"{kind} score: {NO_VALID}")
        pick = chosen.get(kind)
        if pick is not None and np.isfinite(cells.at[pick[0], pick[1]]):  # a nan cell is no choice
            i, j = list(cells.index).index(pick[0]), list(cells.columns).index(pick[1])
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    fig.suptitle(plots.wrap(title, width - 0.4, 10), fontsize=10)
    return fig


def write(rep: judge.JudgeReport, folder: Path, stem: str,
          criterion: judge.Criterion = judge.Criterion()) -> list[Path]:
    """Every figure of one study: ``<stem>_scores_<pair>.png`` and ``<stem>_dev_<pair>_<lo>-<hi>.png``."""
    out = []
    study = rep.study
    grids = {"parsed": rep.grid, "expected": judge.grid(study, criterion, "expected")}
    parsed = rep.selection[rep.selection["score"] == "parsed"]
    for pair, variant in dict.fromkeys(zip(parsed["pair"], parsed["variant"])):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", pair if variant == "cd_judge" else f"{pair}_{variant}").strip("_")
        panels = distribution_panels(rep, pair, variant)
        title = f"{study.data} {study.aspect}, {judge.contrast_label(pair, variant)}: score distributions"
        out.append(plots.save(score_distribution_figure(panels, title), folder / f"{stem}_scores_{name}.png"))
        for _, s in parsed[(parsed["pair"] == pair) & (parsed["variant"] == variant)].iterrows():
            setting = (pair, variant, s["lo"], s["hi"])
            chosen = {kind: (c["lam"], c["t"]) for kind in grids
                      for _, c in judge.at_setting(rep.selection[rep.selection["score"] == kind], setting).iterrows()}
            where = "dev" if s["selected_on"] == "dev" else "ALL rows (no dev split)"
            fig = dev_heatmap_figure({k: judge.at_setting(g, setting) for k, g in grids.items()},
                                     chosen, f"{pair} {s['range']}: {where} {criterion.kind} (chosen: outlined)")
            out.append(plots.save(fig, folder / f"{stem}_dev_{name}_{s['range']}.png"))
    return out
