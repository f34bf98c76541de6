"""``cscore run data=mqm`` with the human reference among the systems: the console line and metrics.json's
count (issue 47, item 6). It builds the tiny pair (torch), so it lives here, not under tests/unit/data."""

from __future__ import annotations

import pytest

from cscore.tests.support.cli import REF_LINE, read_run, tiny_args, write_mqm_with_reference


@pytest.mark.slow
def test_a_run_says_how_many_reference_rows_it_scores_and_records_it(tmp_path, tiny_dirs, cscore_main):
    """``cscore run data=mqm``: the console line and metrics.json's data.human_references_scored, counted
    on the rows the split keeps (dev: 1 of the 2 segments); exclude_references=true: 0 and no line."""
    file = write_mqm_with_reference(tmp_path)
    args = [*tiny_args(tiny_dirs, "data=mqm", f"data.path={file}", "method=single"), f"cache.dir={tmp_path / 'c'}"]
    res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / 'all'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert REF_LINE in res.stdout + res.stderr
    _, scores, metrics = read_run(tmp_path / "all")
    assert (scores["system"] == "ref").sum() == 2 and metrics["data"]["human_references_scored"] == 2
    assert metrics["data"]["human_references_by_system"] == {"ref": 2}
    res = cscore_main("run", *args, "split.use=dev", "split.dev_fraction=0.5", f"hydra.run.dir={tmp_path / 'dev'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, scores, metrics = read_run(tmp_path / "dev")
    assert len(scores) == 3 and metrics["data"]["human_references_scored"] == 1
    assert REF_LINE.replace("2 human-reference rows", "1 human-reference row") in res.stdout + res.stderr
    res = cscore_main("run", *args, "data.exclude_references=true", f"hydra.run.dir={tmp_path / 'x'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, scores, metrics = read_run(tmp_path / "x")
    assert "ref" not in set(scores["system"]) and metrics["data"]["human_references_scored"] == 0
    assert "scored as a system" not in res.stdout + res.stderr
