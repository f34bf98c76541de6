"""scripts/test_times.py: the slowest tests of a junit report, their set-up / call split from the
``--durations`` lines, what they spend their time on; and the benchmarks page's section of them."""

from __future__ import annotations

import importlib.util

import yaml

from cscore.tests.support import REPO

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.integration.test_cli_user" name="test_a_cache_hit_prints_what_this_run_did@test_cli_user.py"
 time="41.5" />
<testcase classname="tests.unit.test_registry" name="test_register_get_and_names" time="0.01" />
<testcase classname="tests.unit.cli.test_cli_list" name="test_list_of_an_unknown_kind_is_one_line_and_exit_2"
 time="2.25">
<failure message="boom">boom</failure></testcase>
</testsuite></testsuites>"""
LOG = """============ slowest 60 durations ============
40.00s setup    tests/integration/test_cli_user.py::test_a_cache_hit_prints_what_this_run_did
1.50s call     tests/integration/test_cli_user.py::test_a_cache_hit_prints_what_this_run_did@test_cli_user.py
2.25s call     tests/unit/cli/test_cli_list.py::test_list_of_an_unknown_kind_is_one_line_and_exit_2
"""


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_slowest_tests_come_sorted_with_their_split_and_costs(tmp_path):
    times = load("test_times")
    (tmp_path / "j.xml").write_text(JUNIT)
    (tmp_path / "run.log").write_text(LOG)
    cases = times.parse_junit(tmp_path / "j.xml")
    assert [c["outcome"] for c in cases] == ["passed", "passed", "failed"]
    rows = times.slowest(cases, times.parse_durations(tmp_path / "run.log"), top=2)
    assert [r["test"] for r in rows] == [
        "tests/integration/test_cli_user.py::test_a_cache_hit_prints_what_this_run_did",
        "tests/unit/cli/test_cli_list.py::test_list_of_an_unknown_kind_is_one_line_and_exit_2"]
    assert (rows[0]["seconds"], rows[0]["setup"], rows[0]["call"]) == (41.5, 40.0, 1.5)
    # its module fixture runs `cscore run` on the tiny models in a fresh process, then in this one
    labels = [c.split(" (")[0] for c in rows[0]["costs"].split(", ")]
    assert labels[:3] == ["fresh cscore processes", "in-process CLI runs", "model loads"], rows[0]["costs"]
    assert rows[1]["setup"] is None and rows[1]["costs"].startswith("in-process CLI runs (2")
    info = times.summary(cases)
    assert (info["tests"], info["test_seconds"], info["outcomes"]["failed"]) == (3, 43.8, 1)
    assert times.main([str(tmp_path / "missing.xml")]) == 2


def test_the_benchmarks_page_shows_the_written_times(tmp_path):
    page = load("benchmarks_page")
    record = yaml.safe_load((REPO / "docs" / "measured" / "figures.yaml").read_text())
    times = {"run": "fast tier", "date": "2026-12-01", "load": "load 1", "wall": "100 s", "tests": 3,
             "test_seconds": 43.8, "slowest_files": [{"file": "tests/test_cli.py", "seconds": 41.5}],
             "slowest": [{"test": "tests/test_cli.py::t", "seconds": 41.5, "setup": 40.0, "call": None,
                          "costs": "model loads"}]}
    text = page.render(record, times)
    assert "## The slowest tests" in text and "| 1 | `tests/test_cli.py::t` | 41.5 | 40.0 |  | model loads |" in text
    assert "## The slowest tests" not in page.render(record)
