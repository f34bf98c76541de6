"""The correlation tables of a run (correlations.md and the console), one per correlation kind."""

from __future__ import annotations

import pandas as pd

from cscore.metaeval import render
from cscore.metaeval.correlation import CORRELATIONS, per_metric


def correlation_tables(table: pd.DataFrame, title: str = "") -> list[render.Table]:
    """One table per kind: rows = metrics, columns = targets + AVG, the best of each column marked."""
    out = []
    for kind in CORRELATIONS:
        name = kind + (" (tau-b)" if kind == "kendall" else "")
        name = f"{title} - {name}" if title else name.capitalize()
        out.append(render.from_frame(per_metric(table, kind), name, cell=render.number, best=True))
    return out


def markdown(table: pd.DataFrame, title: str, signature: str) -> str:
    return "\n".join([f"# {title}", "", f"_{signature}_", ""] + [render.markdown(t) for t in correlation_tables(table)])


def rich_tables(table: pd.DataFrame, title: str):
    return [render.rich(t) for t in correlation_tables(table, title)]
