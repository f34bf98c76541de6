"""One table shape and its renderings: markdown, LaTeX, CSV and a rich Table.

Every table cscore writes or prints (a run's correlations, every ``cscore report`` table)
is a ``Table``; the builders format the cells, the renderers only lay them out."""

from __future__ import annotations

import csv as _csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]  # (row name, one formatted cell per column)
    signature: str = ""  # printed under the title when given
    row_header: str = ""  # heading of the row-name column
    best: set[tuple[int, int]] = field(default_factory=set)  # (row, column) cells to mark


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value) -> str:
    """A score as every table prints it: 4 decimals, 'nan' when missing."""
    return "nan" if _missing(value) else f"{value:.4f}"


def plain(value) -> str:
    """Any other value as it is, empty when missing."""
    return "" if _missing(value) else str(value)


def from_frame(frame: pd.DataFrame, title: str, signature: str = "", cell=plain, best: bool = False) -> Table:
    """Rows = the frame's index, columns = its columns, each cell ``cell(value)``.
    ``best``: mark the highest value of each column (numeric frames only)."""
    rows = [(str(idx), [cell(v) for v in row]) for idx, row in frame.iterrows()]
    marked = set()
    if best:
        for j, col in enumerate(frame.columns):
            top = frame[col].max(skipna=True)
            marked |= {(i, j) for i, v in enumerate(frame[col]) if pd.notna(v) and v == top}
    return Table(title, [str(c) for c in frame.columns], rows, signature, str(frame.index.name or ""), marked)


def _cells(t: Table, mark: str, esc=str) -> list[tuple[str, list[str]]]:
    """The rows through ``esc``, the best cells wrapped in ``mark`` (a format string with one ``{}``)."""
    return [(esc(name), [mark.format(esc(c)) if (i, j) in t.best else esc(c) for j, c in enumerate(cells)])
            for i, (name, cells) in enumerate(t.rows)]


def markdown(t: Table) -> str:
    head = [f"## {t.title}", ""] + ([f"_{t.signature}_", ""] if t.signature else [])
    lines = head + [f"| {t.row_header} | " + " | ".join(t.columns) + " |", "|---|" + "---:|" * len(t.columns)]
    lines += [f"| {name} | " + " | ".join(cells) + " |" for name, cells in _cells(t, "**{}**")]
    return "\n".join(lines) + "\n"


def _esc(s: str) -> str:
    return str(s).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")


def latex(t: Table) -> str:
    lines = ([f"% {t.signature}"] if t.signature else []) + [
        r"\begin{table}[t]", r"\centering", f"\\begin{{tabular}}{{l{'r' * len(t.columns)}}}", r"\toprule",
        _esc(t.row_header) + " & " + " & ".join(map(_esc, t.columns)) + r" \\", r"\midrule"]
    lines += [name + " & " + " & ".join(cells) + r" \\" for name, cells in _cells(t, r"\textbf{{{}}}", _esc)]
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{_esc(t.title)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def csv(t: Table) -> str:
    buf = io.StringIO()
    w = _csv.writer(buf, lineterminator="\n")
    w.writerow([t.row_header, *t.columns])
    w.writerows([name, *cells] for name, cells in t.rows)
    return buf.getvalue()


def rich(t: Table):
    """A rich Table: the signature as caption, the best cells bold green. Every text from the
    table is escaped: a ``[expected]`` in a label or note is text, not rich markup."""
    from rich.markup import escape
    from rich.table import Table as RichTable

    out = RichTable(title=escape(t.title), caption=escape(t.signature) if t.signature else None,
                    title_justify="left")
    out.add_column(escape(t.row_header), style="bold")
    for c in t.columns:
        out.add_column(escape(c), justify="right")
    for name, cells in _cells(t, "[bold green]{}[/]", escape):
        out.add_row(name, *cells)
    return out


def save(t: Table, folder: Path, stem: str) -> None:
    """``<stem>.md``, ``.csv`` and ``.tex`` under ``folder``."""
    for ext, fn in (("md", markdown), ("csv", csv), ("tex", latex)):
        (Path(folder) / f"{stem}.{ext}").write_text(fn(t))
