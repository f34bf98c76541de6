"""The run's speed totals (cli/stages.py::speed_figures): work done together counts once."""

import math
from types import SimpleNamespace as NS

import pandas as pd
import pytest

from cscore.cli.stages import speed_figures
from cscore.scorers.passes import EngineReport


def figures(reports: dict) -> dict:
    scored = NS(table=pd.DataFrame({"id": range(10)}), stats=NS(reports=reports), models={})
    return speed_figures(scored)


def test_reports_of_one_call_count_once_and_others_add_up():
    tree = dict(cached=False, fetch_seconds=4.0, shared="call-1", fetch_shared="decode")
    got = figures({"decode expert": EngineReport(4.0, 100, 100, 1, **tree),
                   "decode contrast": EngineReport(4.0, 100, 100, 1, **tree),
                   "decode amateur": EngineReport(1.0, 50, 50, 1, cached=True, fetch_seconds=4.0, shared="call-0",
                                                  fetch_shared="decode"),
                   "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    assert got["score_seconds"] == pytest.approx(4.0 + 1.0 + 2.0)
    assert got["statistics_seconds_this_run"] == pytest.approx(4.0 + 2.0)
    assert got["samples_per_second"] == pytest.approx(10 / 7.0)
    assert got["passes"]["decode contrast"]["score_seconds"] == 4.0  # each pass keeps its own figures


def test_a_time_that_was_not_recorded_leaves_the_total_unknown():
    got = figures({"decode": EngineReport(math.nan, 10, 10, 1, cached=True, fetch_seconds=0.01),
                   "judge": EngineReport(2.0, 80, 80, 1, fetch_seconds=2.0)})
    assert got["score_seconds"] is None and got["samples_per_second"] is None
