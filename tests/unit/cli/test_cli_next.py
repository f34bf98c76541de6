"""After a sweep, the command that comes next (issue 30, item 7): ``cscore report <its directory>``."""

from __future__ import annotations

import json
import shlex


def test_a_finished_sweep_prints_the_report_command_for_its_directory(tiny_sweep):
    lines = [line for line in tiny_sweep.stdout.splitlines() if line.startswith("next: ")]
    # run from the folder that holds it: the path as typed there
    assert lines == ["next: cscore report sw   (2 runs finished: tables, significance and plots)"]
    assert tiny_sweep.dir.name == "sw"
    assert tiny_sweep.stdout.rstrip().endswith(lines[0])  # the last thing the sweep prints
    assert sorted(p.name for p in tiny_sweep.dir.iterdir() if (p / "metrics.json").is_file()) == ["0", "1"]


def test_the_line_counts_failed_runs_and_is_relative_inside_the_working_folder(tmp_path, monkeypatch):
    from cscore.cli.next_step import next_line

    sweep = tmp_path / "my sweep"
    for job, name in (("0", "metrics.json"), ("1", "metrics.json"), ("2", "failed.json")):
        (sweep / job).mkdir(parents=True)
        (sweep / job / name).write_text(json.dumps({}))
    (sweep / "multirun.yaml").write_text("")
    monkeypatch.chdir(tmp_path)
    assert next_line(str(sweep)) == ("next: cscore report 'my sweep'   "
                                     "(2 runs finished, 1 failed: tables, significance and plots)")
    monkeypatch.chdir(sweep / "0")
    assert next_line(str(sweep)).startswith(f"next: cscore report {shlex.quote(str(sweep))}   ")
