"""Readable consoles (issue 20, items 4 and 5): tables whole at 80 and 160 columns, short
--help / --cfg job, --version, labels and run directories named after what ran, baseline names,
a plain progress line off a terminal."""

import io
import re

import pytest
from rich.console import Console

from cscore.metaeval import render

ASPECTS = ["consistency", "fluency", "relevance", "overall", "coherence", "engagement", "informativeness"]
LABELS = ["expert", "amateur", "ensemble", "contrast_released", "bertscore_p", "bertscore_r", "bertscore_f1",
          "rougeLsum"]


def printed(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def table_cells(text: str) -> list[str]:
    """Every cell of every boxed table in ``text``, stripped."""
    return [c.strip() for line in text.splitlines() if line.startswith(("│", "┃"))
            for c in re.split("[│┃]", line)[1:-1]]


def wide_table() -> render.Table:
    columns = ASPECTS + ["AVG"]
    rows = [(name, [f"{(-1) ** i * 0.1234 * (i + 1) * (j + 1) / 10:.4f}" for j in range(len(columns))])
            for i, name in enumerate(LABELS)]
    return render.Table("demo / gemma3-270m+gemma3-270m[:auto] / contrast_released - kendall (tau-b)", columns,
                        rows, "data:demo|n:160|split:all|pair:gemma3-270m|method:contrast", "metric", {(3, 7)})


@pytest.mark.parametrize("width", [80, 160])
def test_a_wide_table_prints_every_label_and_number_whole(width):
    t = wide_table()
    text = printed(render.rich(t), width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    cells = table_cells(text)
    for name, values in t.rows:
        assert name in cells, name
        assert all(v in cells for v in values), name
    for col in t.columns:
        assert col in cells, col
    assert t.title in " ".join(text.split())  # the title may wrap at a space, never cut
    assert t.signature in "".join(text.split())
    tables = text.count("┏")
    assert tables == (1 if width == 160 else 2)  # at 80 the columns go to a second table


def test_a_column_too_wide_for_the_console_folds_rather_than_being_cut():
    t = render.Table("T", ["a" * 50], [("row_label_" * 4, ["0.5000"])], row_header="metric")
    text = printed(render.rich(t), 80)
    assert "…" not in text and "a" * 20 in text and "0.5000" in text
    assert max(len(line) for line in text.splitlines()) <= 80
