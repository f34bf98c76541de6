"""Writing and printing the correlation tables of a run."""

from __future__ import annotations

import math

import pandas as pd

from cscore.metaeval.correlation import CORRELATIONS, wide

KENDALL_NOTE = "Kendall = tau-b"


def fmt(value: float) -> str:
    return "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def markdown(table: pd.DataFrame, title: str, signature: str) -> str:
    lines = [f"# {title}", "", f"_{signature}_", ""]
    for kind in CORRELATIONS:
        w = wide(table, kind)
        lines.append(f"## {kind.capitalize()}" + (" (tau-b)" if kind == "kendall" else ""))
        lines.append("")
        lines.append("| metric | " + " | ".join(w.columns) + " |")
        lines.append("|---|" + "---:|" * len(w.columns))
        for metric, row in w.iterrows():
            lines.append(f"| {metric} | " + " | ".join(fmt(v) for v in row) + " |")
        lines.append("")
    return "\n".join(lines)


def rich_tables(table: pd.DataFrame, title: str):
    from rich.table import Table

    out = []
    for kind in CORRELATIONS:
        w = wide(table, kind)
        t = Table(title=f"{title} - {kind}" + (" (tau-b)" if kind == "kendall" else ""), title_justify="left")
        t.add_column("metric", style="bold")
        for c in w.columns:
            t.add_column(str(c), justify="right")
        best = {c: w[c].max(skipna=True) for c in w.columns}
        for metric, row in w.iterrows():
            cells = []
            for c, v in row.items():
                s = fmt(v)
                cells.append(f"[bold green]{s}[/]" if not math.isnan(v) and v == best[c] else s)
            t.add_row(str(metric), *cells)
        out.append(t)
    return out
