"""Issue 47 item 2: the Python API's passes follow ``cscore run``'s thread rule (``engine.threads``:
``runtime.threads`` / ``PassOptions.threads``, default auto) and give torch's count back after."""

import pytest
import torch

from cscore import ModelPair
from cscore.scorers.engine import threads
from cscore.scorers.engine.pass_options import PassOptions

PROMPTS = ["The mayor opened a new bridge.\nSummary:\n", "The team won the final.\nSummary:\n"]
HYPS = ["A bridge was opened.", "The team won."]


@pytest.fixture
def torch_count():
    """torch's count before the test (1 in the suite: conftest), set back after it."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def counts_in_passes(pair, **keywords) -> list[int]:
    """torch's thread count at each batch of ``pair.statistics`` on two items."""
    seen: list[int] = []
    pair.statistics(PROMPTS, HYPS, progress=lambda label, n: lambda done: seen.append(torch.get_num_threads()),
                    **keywords)
    assert seen
    return seen


def test_the_api_default_is_auto():
    assert PassOptions().threads == threads.AUTO


def test_a_pass_runs_on_the_rules_count_and_gives_torchs_back(tiny_dirs, torch_count, monkeypatch):
    """The rule (free_cores: here 2 cores free) sets the count inside each pass, whatever torch
    had (1 here); torch's own count is back after the call."""
    monkeypatch.setattr(threads, "_JOB", {})  # no job of this process applied a count
    monkeypatch.setattr(threads, "free_cores", lambda: 2)
    pair = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur)
    assert set(counts_in_passes(pair)) == {2}
    assert torch.get_num_threads() == torch_count == 1
    assert set(counts_in_passes(pair, threads=3)) == {3}  # an integer pins it
    assert set(counts_in_passes(pair, threads=None)) == {1}  # null: the count torch has
    assert torch.get_num_threads() == 1


def test_using_keeps_a_jobs_count_and_restores_after_an_error(torch_count, monkeypatch):
    """Inside a job that applied auto, its passes keep the job's count (the one metrics.json
    records) though the load moved meanwhile; an exception in the pass still restores the count."""
    monkeypatch.setattr(threads, "_JOB", {})
    monkeypatch.setattr(threads, "free_cores", lambda: 2)
    assert threads.apply("auto") == 2
    monkeypatch.setattr(threads, "free_cores", lambda: 3)  # the load moved
    with threads.using("auto") as n:
        assert n == torch.get_num_threads() == 2
    with threads.using(1) as n:
        assert n == torch.get_num_threads() == 1
    torch.set_num_threads(1)  # no longer the job's count: auto is found again
    with pytest.raises(RuntimeError):
        with threads.using("auto") as n:
            assert n == torch.get_num_threads() == 3
            raise RuntimeError("the pass failed")
    assert torch.get_num_threads() == 1
