"""scripts/tour_times.py: it reads the README tour's commands as a user would type them and runs
each through the CLI with one thread in its own folder; lines this machine cannot run are skipped
with why. (Running the lines is the script's job: the tests do not time them.)"""

import importlib.util
import shlex
import sys

import pytest

from cscore.tests.support import REPO

SCRIPT = REPO / "scripts" / "tour_times.py"


@pytest.fixture(scope="module")
def tour():
    spec = importlib.util.spec_from_file_location("tour_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reads_the_readme_tour(tour):
    lines = tour.tour_lines()
    assert lines[0] == "cscore run" and "cscore run --cfg job" in lines and lines[-1] == "cscore list"
    assert all(line.split()[0] == "cscore" for line in lines) and len(lines) >= 8
    own = next(x for x in lines if "data=table" in x)  # a continuation line joined, its quoting kept
    assert shlex.split(own)[-1] == "data.columns.human=[quality]"
    for data in ("data=fed", "data=summeval", "decode=values"):  # long on a CPU: a slice
        assert "split.use=dev" in next(x for x in lines if data in x)


def test_commands_and_skips(tour, tmp_path, monkeypatch):
    import torch

    cmd, why = tour.command_of("cscore run method=contrast_released", tmp_path, 1)
    assert why is None and cmd == [sys.executable, "-m", "cscore.cli.main", "run", "method=contrast_released",
                                   "runtime.threads=1"]
    assert tour.command_of("cscore report 'outputs/multirun/<date>/<time>'", tmp_path, 1) == (
        None, "no multirun folder from an earlier line")
    sweep = tmp_path / "outputs" / "multirun" / "2026-11-27" / "10-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("{}\n")
    assert tour.command_of("cscore report 'outputs/multirun/<date>/<time>'", tmp_path, 1)[0][-2:] == [
        "report", str(sweep)]
    assert tour.command_of("cscore run data=table data.path=ratings.csv", tmp_path, 1) == (
        None, "needs your own file ratings.csv")
    (tmp_path / "ratings.csv").write_text("a\n")
    assert tour.command_of("cscore run data=table data.path=ratings.csv", tmp_path, 1)[1] is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert tour.command_of("cscore run runtime.device=cuda", tmp_path, 1) == (None, "needs a CUDA device")
