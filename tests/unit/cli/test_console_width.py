"""Issue 47 item 9: consoles at 80 columns. A run's log lines print the message alone on the console
(a warning with its level; Hydra's own lines without a date) while run.log keeps the full records;
a report table with long row labels and intervals packs several columns into each table at 80
columns instead of one a table."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from cscore.data.demo import DEMO_FILE
from cscore.metaeval import render

FULL_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]\[cscore\.[\w.]+\]\[(INFO|WARNING)\] - ")


def interval_table() -> render.Table:
    """A report table as `cscore report` makes one: sweep-point labels (42-43 characters) and
    "value [low, high] (cluster)" cells, five columns."""
    columns = ["consistency", "fluency", "relevance", "coherence", "AVG"]
    rows = [(f"smollm2 contrast gamma={g} t_exp=0.5 t_ama=1.5",
             [f"{0.1 * j + i / 100:.4f} [{0.1 * j:.3f}, {0.1 * j + 0.2:.3f}] ({i + 1})" for j in range(5)])
            for i, g in enumerate((0.05, 0.1, 0.2))]
    return render.Table("summeval: correlation with human judgements", columns, rows, "data:summeval|n:1600",
                        "label", {(1, 4)})


def printed(table: render.Table, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(render.rich(table))
    return console.export_text()


@pytest.mark.parametrize("width", [80, 200])
def test_a_table_with_long_labels_packs_its_columns_to_the_width(width, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(width))
    t = interval_table()
    text = printed(t, width)
    assert max(len(line) for line in text.splitlines()) <= width
    tables = text.count("┏")
    # row names take 43 columns and each cell 25 + 3: at 80 one column a table fits as it is (5 tables)
    assert render.column_groups(t, 80) == [[0], [1], [2], [3], [4]]
    assert tables == (3 if width == 80 else 1) and tables < len(t.columns)
    words = text.split()
    for name, cells in t.rows:  # every label word, number and interval whole, none cut or ellipsised
        for cell in cells:
            value, interval = cell.split(" ", 1)
            assert value in words and interval in " ".join(text.replace("│", " ").split()), cell
        assert all(w in words for w in name.split()), name
    assert "…" not in text


def test_a_table_that_fits_is_left_as_it_is():
    t = interval_table()
    shown, groups = render.layout(t, 200)
    assert shown is t and groups == [[0, 1, 2, 3, 4]]


def test_console_lines_carry_no_prefix_and_run_log_keeps_full_records(tiny_dirs, tmp_path, cscore_cli):
    rows = [json.loads(line) for line in DEMO_FILE.read_text().splitlines()[:16]]
    rows[3]["hypothesis"] = ""  # dropped while loading: a WARNING line
    data = tmp_path / "demo16.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = cscore_cli("run", "-m", "method=single", f"pair.expert.path={tiny_dirs.expert}", "runtime.progress=false",
                     f"data.path={data}", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path, timeout=600)
    run = tmp_path / "sweep" / "0"  # a multirun of one job: Hydra's own lines come too
    assert res.returncode == 0, res.stdout + res.stderr
    console = (res.stdout + res.stderr).splitlines()
    assert not [line for line in console if "[cscore." in line or "][INFO]" in line or line.startswith("[20")]
    assert "[HYDRA] Launching 1 jobs locally" in console, console
    assert "data demo: 15 rows (1 dropped while loading); split=all keeps 15" in console
    warnings = [line for line in console if line.startswith("WARNING: demo: dropped 1 row")]
    assert len(warnings) == 1, console
    assert any(re.fullmatch(r"done in \d+\.\ds", line) for line in console)
    log = (run / "run.log").read_text().splitlines()
    assert any(FULL_RECORD.match(line) and line.endswith("data demo: 15 rows (1 dropped while loading); split=all "
                                                          "keeps 15") for line in log), log
    assert any(FULL_RECORD.match(line) and "[WARNING] - demo: dropped 1 row" in line for line in log), log
    assert any(FULL_RECORD.match(line) and re.search(r"\]\[cscore\.cli\.run\]\[INFO\] - done in \d", line)
               for line in log), log
