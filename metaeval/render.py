"""One table shape (``Table``, every table cscore writes or prints) and its renderings: markdown,
LaTeX, CSV and rich. The builders format the cells, the renderers only lay them out."""

from __future__ import annotations

import csv as _csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
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
    """Rows = the frame's index, columns = its columns, each cell ``cell(value)``; ``best``: mark each column's top."""
    rows = [(str(idx), [cell(v) for v in row]) for idx, row in frame.iterrows()]
    marked = set().union(*(top_cells(frame[col], j) for j, col in enumerate(frame.columns))) if best else set()
    return Table(title, [str(c) for c in frame.columns], rows, signature, str(frame.index.name or ""), marked)


def top_cells(values, j: int, start: int = 0, top=np.nanmax) -> set:
    """The cells (start + i, j) of column j that hold its ``top`` finite value (none if none is finite)."""
    vals = np.asarray(values, dtype=float)
    if not np.isfinite(vals).any():
        return set()
    best = top(vals)
    return {(start + i, j) for i, v in enumerate(vals) if v == best}


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


class Fitted:
    """A rich renderable of a table that fits the console: its columns split over several tables (``layout``),
    none cut, every text escaped."""

    def __init__(self, table: Table):
        self.table = table

    def __rich_console__(self, console, options):
        from rich.text import Text

        t = self.table
        yield Text(t.title, style="bold")
        shown, groups = layout(t, options.max_width)
        for group in groups:
            yield _rich_part(shown, group)
        if t.signature:
            yield Text(t.signature, style="dim")


rich = Fitted  # the table as printed at the console's width


BORDER = 3  # a column's share of a boxed rich table: one space each side and one rule


def _width(texts) -> int:
    """The widest line of the texts (a cell may hold several lines)."""
    from rich.cells import cell_len

    return max((cell_len(line) for x in texts for line in str(x).split("\n")), default=0)


def layout(t: Table, width: int) -> tuple[Table, list[list[int]]]:
    """The table as printed at ``width`` (``compact`` when that takes fewer tables) and its column groups."""
    groups = column_groups(t, width)
    if len(groups) == 1:
        return t, groups
    small = compact(t, width)
    fewer = column_groups(small, width)
    return (small, fewer) if len(fewer) < len(groups) else (t, groups)


def compact(t: Table, width: int) -> Table:
    """``t`` with row names wrapped at a quarter of ``width`` and every cell cut into two lines at its first space."""
    import textwrap

    room = max(12, width // 4)
    rows = [("\n".join(textwrap.wrap(n, room, break_long_words=False)) or n,
             ["\n".join(c.split(" ", 1)) for c in cells]) for n, cells in t.rows]
    return Table(t.title, t.columns, rows, t.signature, t.row_header, t.best)


def column_groups(t: Table, width: int) -> list[list[int]]:
    """The columns in order, cut into groups whose tables (with the row names) fit ``width``."""
    room = width - 1 - (_width([t.row_header] + [name for name, _ in t.rows]) + BORDER)
    groups: list[list[int]] = [[]]
    used = 0
    for j, col in enumerate(t.columns):
        need = _width([col] + [cells[j] for _, cells in t.rows]) + BORDER
        if groups[-1] and used + need > room:
            groups.append([])
            used = 0
        groups[-1].append(j)
        used += need
    return groups if t.columns else [[]]


def _rich_part(t: Table, group: list[int]):
    from rich.markup import escape
    from rich.table import Table as RichTable

    out = RichTable(show_lines=any("\n" in text for name, cells in t.rows for text in [name, *cells]))
    out.add_column(escape(t.row_header), style="bold", overflow="fold")
    for j in group:
        out.add_column(escape(t.columns[j]), justify="right", overflow="fold")
    for name, cells in _cells(t, "[bold green]{}[/]", escape):
        out.add_row(name, *(cells[j] for j in group))
    return out


def save(t: Table, folder: Path, stem: str) -> None:
    """``<stem>.md``, ``.csv`` and ``.tex`` under ``folder``."""
    for ext, fn in (("md", markdown), ("csv", csv), ("tex", latex)):
        (Path(folder) / f"{stem}.{ext}").write_text(fn(t))
