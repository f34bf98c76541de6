"""The judge report's tables (CD-judge paper Tables 1-7) and the statistics over score ranges they show."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from cscore.metaeval import render
from cscore.metaeval.correlation import CORRELATIONS

SHORT = {"pearson": "Pear.", "spearman": "Spear.", "kendall": "Kend."}
STATUSES = ("No Pred", "Below", "Above")
LIST = "List"  # the released parse read list numbering as the score (valid there, shown on its own)
ECHO = "Echo"  # the prompt's range ("1-5") read as its minimum (valid for both parse rules, shown on its own)
AVERAGE_HEADER = "Average across all score ranges"
FEW_RANGES = "needs ≥ 2 ranges"  # a std or max - min over one range is no range bias (0 by definition)


def across_ranges(long: pd.DataFrame) -> pd.DataFrame:
    """Per row and correlation over its finite ranges: mean, std (ddof=0), spread (max - min), ranges, of."""
    n_ranges = long[["lo", "hi"]].drop_duplicates().shape[0]
    out = []
    for (label, kind), part in long.groupby(["label", "correlation"], sort=False):
        v = part["value"].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        out.append({"label": label, "role": part["role"].iloc[0], "score": part["score"].iloc[0],
                    "correlation": kind, "mean": float(v.mean()) if v.size else math.nan,
                    "std": float(v.std(ddof=0)) if v.size > 1 else math.nan,
                    "spread": float(v.max() - v.min()) if v.size > 1 else math.nan, "ranges": int(v.size),
                    "of": n_ranges})
    return pd.DataFrame(out, columns=["label", "role", "score", "correlation", "mean", "std", "spread", "ranges",
                                      "of"])


def fallback_note(frame: pd.DataFrame) -> str:
    """The rows whose scores are partly fallbacks (``judge.invalid``), for the notes; '' when none."""
    bad = frame[frame["count"] > 0] if not frame.empty else frame
    if bad.empty:
        return ""
    cells = ", ".join(f"{r['label']} {r['range']}: {int(r['count'])}/{int(r['n'])}" for _, r in bad.iterrows())
    return (f"fallback scores (invalid outputs set to a range end, no judgement): {cells}; a row of only "
            "fallbacks is constant (nan); see the invalid table")


def _cell(value: float, half: float) -> str:
    if value is None or not np.isfinite(value):
        return "nan"
    return f"{value:.4f} ± {half:.4f}" if np.isfinite(half) else f"{value:.4f}"


def correlation_table(long: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Paper Tables 1-2: per range 'value ± half-width' per correlation, then the mean over ranges; best marked."""
    columns = ["Range"] + [SHORT[k] for k in CORRELATIONS]
    rows: list = []
    best: set = set()
    cell = {(r.lo, r.hi, r.label, r.correlation): (r.value, r.half_width) for r in long.itertuples()}
    for (lo, hi), block in long.groupby(["lo", "hi"], sort=True):
        labels = list(dict.fromkeys(block["label"]))
        start = len(rows)
        for lb in labels:
            cells = [_cell(*cell.get((lo, hi, lb, k), (math.nan, math.nan))) for k in CORRELATIONS]
            rows.append((lb, [f"{lo}-{hi}"] + cells))
        for j, k in enumerate(CORRELATIONS, start=1):
            best |= render.top_cells([cell.get((lo, hi, lb, k), (math.nan,))[0] for lb in labels], j, start)
    avg = across_ranges(long)
    rows.append((AVERAGE_HEADER, [""] * len(columns)))
    start = len(rows)
    labels = list(dict.fromkeys(avg["label"]))
    means = avg.pivot(index="label", columns="correlation", values="mean")
    fewest = avg.groupby("label", sort=False)["ranges"].min()
    for lb in labels:
        n, of = int(fewest[lb]), int(avg["of"].iloc[0])
        where = "mean" if n == of else f"mean of {n} of {of}"
        rows.append((lb, [where] + [_cell(means.at[lb, k], math.nan) for k in CORRELATIONS]))
    for j, k in enumerate(CORRELATIONS, start=1):
        best |= render.top_cells(means.loc[labels, k], j, start)
    return render.Table(title, columns, rows, signature, "Model", best)


def range_bias_table(avg: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Per row: mean, std and max - min of each correlation over the ranges; the best of each marked."""
    columns = [f"{SHORT[k]} {s}" for k in CORRELATIONS for s in ("mean", "std", "max-min")] + ["ranges"]
    rows, best = [], set()
    labels = list(dict.fromkeys(avg["label"]))
    key = avg.set_index(["label", "correlation"])
    fewest = avg.groupby("label", sort=False)["ranges"].min()
    grid = np.full((len(labels), 3 * len(CORRELATIONS)), np.nan)
    for i, lb in enumerate(labels):
        cells = []
        for j, k in enumerate(CORRELATIONS):
            r = key.loc[(lb, k)]
            grid[i, 3 * j:3 * j + 3] = r[["mean", "std", "spread"]]  # std, spread: nan over fewer than 2 ranges
            cells += [render.number(r["mean"])] + [FEW_RANGES if r["ranges"] < 2 else render.number(r[c])
                                                   for c in ("std", "spread")]
        rows.append((lb, cells + [f"{int(fewest[lb])}/{int(avg['of'].iloc[0])}"]))
    for j in range(grid.shape[1]):
        best |= render.top_cells(grid[:, j], j, top=np.nanmax if j % 3 == 0 else np.nanmin)
    return render.Table(title, columns, rows, signature, "Model", best)


def hyperparameter_table(selections: pd.DataFrame, title: str, signature: str = "",
                         criterion: str = "spearman") -> render.Table:
    """Paper Tables 3-5: per (pair, range) the chosen λ and t, parsed score first, then expected."""
    columns = ["Main", "Asst", "Range", "score", "lambda", "t", "c = lambda/t", f"dev {criterion}", "n dev",
               "tied (lambda, t)", "selected on"]
    rows = [(str(s["pair"]) + ("" if s["variant"] == "cd_judge" else f" {s['variant']}"),
             [s["main"], s["asst"], s["range"], s["score"], f"{s['lam']:g}", f"{s['t']:g}", f"{s['c']:.4g}",
              render.number(s["value"]), str(s["n_dev"]),
              f"{s['n_tied']} of {s['points']}: {s['tied']}" if s["n_tied"] > 1 else f"1 of {s['points']}",
              s["selected_on"]]) for _, s in selections.iterrows()]
    return render.Table(title, columns, rows, signature, "Pair")


def invalid_table(frame: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Paper Tables 6-7: per model row and range the share of invalid outputs and their kinds."""
    columns = ["Range", "Invalid", *STATUSES] + (["other"] if frame["other"].any() else []) + [LIST, ECHO, "n"]
    rows = []
    for _, r in frame.iterrows():
        share = "nan" if not np.isfinite(r["invalid"]) else f"{100 * r['invalid']:.1f}%"
        if r[ECHO] and r["n"]:  # a valid share made of echoes is no "ok": say how much of it they are
            share += f" + {100 * r[ECHO] / r['n']:.1f}% Echo"
        # the counts, List and Echo under either parse rule, 0 included
        rows.append((r["label"], [r["range"], share, *(str(int(r[c])) for c in columns[2:])]))
    return render.Table(title, columns, rows, signature, "Model")


def parse_rules_note(frame: pd.DataFrame) -> str:
    """Which rule (``method.parse``) read the table's rows, each with its rows when they differ."""
    rules = list(dict.fromkeys(frame["rule"]))
    if len(rules) == 1:
        return f"method.parse={rules[0]}" + (" (the rule of the paper's Tables 6-7)" if rules[0] == "released" else
                                             " (the paper's Tables 6-7 used method.parse=released)")
    return "; ".join(f"method.parse={r}: " + ", ".join(dict.fromkeys(frame.loc[frame["rule"] == r, "label"]))
                     for r in rules)
