"""The run's speed totals (run/stages.py::speed_figures): work done together counts once."""

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest

from cscore.run.stages import speed_figures
from cscore.scorers.engine.passes import EngineReport
from cscore.scorers.store.runner import PassReport


def figures(reports: dict) -> dict:
    scored = NS(table=pd.DataFrame({"id": range(10)}), stats=NS(reports=reports), seconds=None, models={})
    return speed_figures(scored)


def test_reports_of_one_call_count_once_and_others_add_up():
    tree = dict(cached=False, fetch_seconds=4.0, shared="call-1", fetch_shared="decode")
    got = figures({"decode expert": EngineReport(4.0, 100, 100, 1, **tree),
                   "decode contrast": EngineReport(4.0, 100, 100, 1, **tree),
                   "decode amateur": EngineReport(1.0, 50, 50, 1, cached=True, fetch_seconds=4.0, shared="call-0",
                                                  fetch_shared="decode"),
                   "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    # a pass read from the cache: this run's time is what it spent (the decode call once, the judge pass),
    # not the cached pass's compute time of an earlier run; no speed for work partly done elsewhere
    assert got["score_seconds"] == pytest.approx(4.0 + 2.0)
    assert got["statistics_seconds_this_run"] == pytest.approx(4.0 + 2.0)
    assert got["samples_per_second"] is None
    computed = figures({"decode expert": EngineReport(4.0, 100, 100, 1, **tree),
                        "decode contrast": EngineReport(4.0, 100, 100, 1, **tree),
                        "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    assert computed["score_seconds"] == pytest.approx(4.0 + 2.0)  # the shared call once
    assert computed["samples_per_second"] == pytest.approx(10 / 6.0)
    assert got["passes"]["decode contrast"]["score_seconds"] == 4.0  # each pass keeps its own figures


def test_a_time_that_was_not_recorded_leaves_the_total_unknown():
    got = figures({"decode": EngineReport(math.nan, 10, 10, 1, fetch_seconds=0.01),
                   "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    assert got["score_seconds"] is None and got["samples_per_second"] is None
    # a cached pass's unrecorded compute time does not matter: this run's reading time is known
    cached = figures({"decode": EngineReport(math.nan, 10, 10, 1, cached=True, fetch_seconds=0.01),
                      "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    assert cached["score_seconds"] == pytest.approx(2.01) and cached["samples_per_second"] is None


def test_useful_flops_count_work_done_together_once_and_mfu_needs_a_known_peak(monkeypatch):
    from cscore.scorers.engine import flops

    tree = dict(fetch_seconds=4.0, shared="call-1", flops=8e12)
    reports = {"decode expert": EngineReport(4.0, 100, 100, 1, **tree),
               "decode contrast": EngineReport(4.0, 100, 100, 1, **tree),
               "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0, flops=4e12)}
    model = NS(device="cuda:0", dtype="bfloat16", parent=None, load_seconds=0.0, status=lambda: "loaded")
    scored = NS(table=pd.DataFrame({"id": range(10)}), stats=NS(reports=reports), seconds=None,
                models={"expert": model})
    monkeypatch.setattr("cscore.scorers.engine.threads.in_use", lambda: 1)
    monkeypatch.setattr(flops, "peak_flops", lambda device, dtype: None)
    got = speed_figures(scored)
    assert got["useful_flops"] == 12e12 and got["mfu"] is None  # no peak known: null, not a guess
    monkeypatch.setattr(flops, "peak_flops", lambda device, dtype: 1e13)  # as a device of 10 TFLOP/s would give
    got = speed_figures(scored)
    assert got["mfu"] == pytest.approx(12e12 / 6.0 / 1e13)
    assert got["passes"]["judge"]["mfu"] == pytest.approx(4e12 / 2.0 / 1e13)
    reports["judge"] = EngineReport(2.0, 80, 80, 1, cached=True, fetch_seconds=0.1, flops=4e12)
    got = speed_figures(scored)  # a pass from the cache ran elsewhere: its device is unknown
    assert got["useful_flops"] == 12e12 and got["mfu"] is None and got["passes"]["judge"]["mfu"] is None
    reports["judge"] = EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0, flops=None)
    assert speed_figures(scored)["useful_flops"] is None  # one pass not counted: the total is unknown


def test_report_speed_table_shows_useful_tflops_and_mfu(tmp_path):
    from cscore.metaeval import side_tables
    from cscore.rundir import SCORES, Run

    (tmp_path / SCORES).write_bytes(b"")  # complete: metrics and scores present
    run = Run(tmp_path, {"data": {"name": "demo"}, "pair": {"name": "p"}, "method": {"variant": "contrast"}},
              {"n_items": 10, "speed": {"score_seconds": 4.0, "useful_flops": 2e12, "mfu": 0.25, "passes": {}}})
    row = side_tables.speed([run]).iloc[0]
    assert row["useful_tflop_per_s"] == pytest.approx(0.5) and row["mfu"] == 0.25


def test_samples_per_second_counts_only_the_items_this_command_scored():
    """One figure (issue 47, item 3): items this command scored over its scoring seconds; items a
    checkpoint or earlier shards kept are not this command's work, and no pass has a figure of its own."""
    from cscore.run.summary import pass_lines, speed_line

    reports = {"expert": EngineReport(2.0, 100, 100, 1, fetch_seconds=2.0, resumed=4),
               "amateur": EngineReport(1.0, 50, 50, 1, fetch_seconds=1.0, resumed=6)}
    got = figures(reports)
    assert got["items_scored"] == 10 - 4  # an item either pass still computed is this command's
    assert got["samples_per_second"] == pytest.approx(6 / 3.0)
    assert all("samples_per_second" not in p for p in got["passes"].values())
    assert speed_line(got) == "speed: 6 items scored in 3.0s, 2.0 samples/s"
    scored = NS(table=pd.DataFrame({"id": range(10)}), stats=NS(reports=reports))
    assert not any("samples/s" in line for line in pass_lines(scored))
    assert speed_line(figures({"expert": EngineReport(2.0, 100, 100, 1, cached=True, fetch_seconds=0.1)})) is None


def test_weights_a_worker_loaded_are_said_so_and_kept_shards_are_not_this_commands():
    """Issue 47, item 10: the parent of runtime.devices that kept its own shard from an earlier
    command loaded no weights, but its worker did for the shard it computed now."""
    from cscore.run.stages import weights

    def said(report, status="not loaded"):
        model = NS(status=lambda: status)
        scored = NS(table=pd.DataFrame({"id": range(10)}), stats=NS(reports={"expert": report}),
                    models={"expert": model, "amateur": model})
        return weights(scored)

    rerun = PassReport(5.0, 100, 100, 2, shards=2, kept_shards=[0], resumed=6)
    assert said(rerun) == {"expert": "loaded by workers", "amateur": "loaded by workers"}
    assert said(rerun, "loaded") == {"expert": "loaded", "amateur": "loaded"}  # this process's own shard
    every_kept = PassReport(0.1, 0, 0, 0, shards=2, kept_shards=[0, 1], resumed=10)
    assert said(every_kept) == {"expert": "not loaded", "amateur": "not loaded"}  # nobody loaded them now
    cached = PassReport(5.0, 100, 100, 2, cached=True, shards=2)
    assert said(cached) == {"expert": "not loaded", "amateur": "not loaded"}
