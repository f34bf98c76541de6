"""The report of a statistics pass run through the store (``ShardedReport``): the engine's figures
(``engine.report.EngineReport``) and, for a sharded pass (``runtime.shards``), its shards'. The
engine knows nothing of shards; the keys a sharded pass adds to a cache entry's meta and to
metrics.json (``shards``, ``shard_seconds``, ``merge_seconds``) are named here alone.

No torch: a run whose statistics all come from the cache reads them without it."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.engine.report import EngineReport


@dataclass
class ShardedReport(EngineReport):
    """``EngineReport`` with the figures of a sharded pass; ``shards`` 1: not sharded (then
    ``record`` and ``figures`` add nothing). For a sharded pass ``seconds`` is the pass's wall
    time (first shard's start to the merge's end), not the sum of the shards."""

    shards: int = 1
    shard_seconds: list[float] | None = None  # each shard's seconds
    merge_seconds: float | None = None
    kept_shards: list | None = None  # shards an earlier command computed (their items are in ``resumed``)

    def figures(self) -> dict:
        """The keys a sharded pass adds (to a cache entry's report, to metrics.json's speed); none
        for an unsharded pass (its meta and metrics unchanged)."""
        if self.shards <= 1:
            return {}
        return {"shards": self.shards, "shard_seconds": self.shard_seconds, "merge_seconds": self.merge_seconds}

    def record(self) -> dict:
        """What a cache entry keeps of the pass that computed it (its ``extra["report"]``)."""
        return {**super().record(), **self.figures()}

    @classmethod
    def of_entry(cls, meta: dict) -> ShardedReport:
        """The report of a cache hit: the figures of the run that computed the entry (its shards'
        too, where it was sharded), ``cached``."""
        run = (meta.get("extra") or {}).get("report", {})
        report = cls.of_record(run)
        report.shards, report.shard_seconds = run.get("shards", 1), run.get("shard_seconds")
        report.merge_seconds = run.get("merge_seconds")
        return report


def figures_of(report: EngineReport) -> dict:
    """The keys ``report`` adds for a sharded pass (``ShardedReport.figures``; none for another)."""
    return report.figures() if isinstance(report, ShardedReport) else {}
