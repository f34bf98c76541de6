"""The report of a pass through the store (scorers/store/runner.py): the engine's figures and,
for a sharded pass only, the shards' keys a cache entry's meta and metrics.json keep (``shards``,
``shard_seconds``, ``merge_seconds``: their names unchanged, so entries stored before still read)."""

from __future__ import annotations

from cscore.scorers.engine.report import EngineReport
from cscore.scorers.store.runner import PassReport, figures_of

PLAIN = {"seconds": 2.5, "tokens": 100, "padded_tokens": 120, "batches": 3, "flops": 1e9}


def test_an_unsharded_record_is_the_engines_and_adds_no_shard_keys():
    engine = EngineReport(2.5, 100, 120, 3, flops=1e9)
    assert engine.record() == PLAIN
    assert PassReport(2.5, 100, 120, 3, flops=1e9).record() == PLAIN
    assert figures_of(engine) == {} and figures_of(PassReport(1.0, 1, 1, 1)) == {}


def test_a_sharded_record_reads_back_from_an_entry_as_it_was_written():
    rep = PassReport(2.5, 100, 120, 3, flops=1e9, shards=2, shard_seconds=[1.0, 1.2], merge_seconds=0.3,
                        kept_shards=[0])
    record = rep.record()
    assert record == {**PLAIN, "shards": 2, "shard_seconds": [1.0, 1.2], "merge_seconds": 0.3}  # kept_shards: not kept
    back = PassReport.of_entry({"extra": {"models": [], "report": record}})
    assert back.cached and back.record() == record and back.kept_shards is None
    assert figures_of(back) == {"shards": 2, "shard_seconds": [1.0, 1.2], "merge_seconds": 0.3}


def test_an_entry_without_a_report_reads_as_unknown_figures():
    back = PassReport.of_entry({})
    assert back.cached and back.shards == 1 and back.tokens == 0 and back.seconds != back.seconds  # nan
    unsharded = PassReport.of_entry({"extra": {"report": PLAIN}})
    assert unsharded.record() == PLAIN and figures_of(unsharded) == {}
