"""Sharded statistics passes (``runtime.shards``): one pass planned once over all items, exactly as
unsharded, its whole batches dealt to N shards; each shard writes its batches as checkpoint partials
under the full pass's key (``s<K>-`` in the file name, ``checkpoint.Checkpoint``), and once every
item is covered the merge stores the ordinary cache entry. A batch computes the same numbers in
whichever process runs it, so the merged statistics are bit-identical to an unsharded pass on the
same device type and dtype.

Sharding is one subsystem in three parts: the shard plan (``plan.Shard``: batches, decode
trees, negative groups dealt alike), the meeting place (``meeting.Place``: the partials, marks and
locks of a pass) and the coordinator (``coordinator``: who computes, waits and merges). A pass
ends ``Done`` or ``Pending``, and so does whatever runs it, up to the command: ``ShardsPending``
is raised there alone, by ``Pending.stop`` (``cli/run.py``, ``cli/cdm_cmd.py``, the Python API's
``ModelPair.statistics``).

Each pass reports a ``shard_report.ShardedReport`` (the engine's report with the shards' figures).

This module does not import torch or the engine's passes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Union

import numpy as np

from cscore.errors import ShardsPending
from cscore.scorers.store.coordinator import InProcess
from cscore.scorers.store.meeting import Place, missing_text, pending_text
from cscore.scorers.store.shard_report import ShardedReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Done:
    """A pass whose statistics are in: ``stats`` per head, this command's ``report``."""

    stats: dict
    report: ShardedReport


@dataclass(frozen=True)
class Pending:
    """Passes that wait for shards this process does not run: ``missing`` (shard indices; empty:
    every shard is done and the merge is another process's), ``passes`` their labels. A pass runner
    returns it; the command that ran the passes ends with ``stop()``, at its boundary."""

    missing: list[int]
    passes: tuple[str, ...] = ()

    def named(self, label: str) -> Pending:
        return Pending(self.missing, (label,))

    def stop(self, count: int, message: str | None = None) -> NoReturn:
        """End the command that ran the passes: the one place ``ShardsPending`` is raised (``count``:
        the run's shards; ``message``: what the command says, by default the passes and the shards
        missing)."""
        if message is None:
            message = f"statistics ({', '.join(self.passes)}): {pending_text(self.missing, count)}"
        raise ShardsPending(message, self.missing, count)


Outcome = Union[Done, Pending]


def pending_of(parts: list[Pending]) -> Pending | None:
    """The passes of ``parts`` that wait, as one (None: none does)."""
    if not parts:
        return None
    return Pending(sorted({k for p in parts for k in p.missing}), tuple(x for p in parts for x in p.passes))


# -- one sharded pass through the statistics cache --------------------------------------------

@dataclass(frozen=True)
class ShardedPass:
    """One pass to shard: its cache key's ``parts``, its ``heads`` and items (``pairs``), the
    ``temperatures``; ``compute(checkpoint)`` runs the engine with a shard's checkpoint; ``label``
    and ``models`` name it in logs and the entry's meta; ``stats_type`` is the payload
    (``TokenStats``: the store names no payload type itself); ``partials``: the checkpoint class
    of another payload, built as ``Checkpoint`` is and merged by its ``assemble()``
    (``item_partials.ItemCheckpoint``: the judge's first-step pass and its decodes); None: the
    token statistics' ``Checkpoint``."""

    parts: dict
    heads: dict
    pairs: list
    temperatures: list
    compute: Callable
    label: str
    models: list
    stats_type: type
    partials: Callable | None = None
    since: float | None = None  # the command's start (time.time()): shards done before it were kept; None: run_pass's

    def offsets(self) -> np.ndarray:
        lengths = np.array([len(h) for _, h in self.pairs], dtype=np.int64)
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def run_pass(cache, job: ShardedPass, coordinator: InProcess) -> Outcome:
    """The token statistics of one pass, sharded: the cache entry if there is one; else this
    process's shards (``coordinator.todo()``, each under its own lock, resuming from its own partials,
    leaving a mark when done), then the merge under the key's lock once every item is covered
    (a supervisor first waits for its workers' shards). A shard the merge finds lacking (a
    damaged partial, a mark whose files hold fewer items than it says) is computed again here
    where this process may (its own, or every shard under a supervisor), then merged again."""
    from cscore.scorers.store.cache import stats_key

    key = stats_key(job.parts)
    with cache.lock(key):
        hit = cache.load(key, job.stats_type)
    if hit is not None:  # merged already (which job of a sweep point writes its run directory: run/workers.py)
        return Done(hit.stats, ShardedReport.of_entry(hit.meta))
    place = Place.of_cache(cache.root, key, coordinator.count)
    offsets = job.offsets()
    since = said_kept(job, place.marks(), coordinator)
    for k in coordinator.todo():
        if key in cache:  # another run merged it meanwhile
            break
        compute_shard(cache, job, key, offsets, (k, coordinator.count))
    if not coordinator.merge:
        return Pending(place.missing())
    if coordinator.supervises:  # the parent of runtime.devices: the other shards are its workers'
        coordinator.supervise(lambda: pending_shards(cache, key, place), job.label)
        said_done(job, place, since)
    def redo(again: list[int]) -> None:
        log.info("statistics (%s): %s lost partials; this process re-runs what %s lost", job.label,
                 missing_text(again, coordinator.count), "it" if len(again) == 1 else "they")
        for k in again:
            compute_shard(cache, job, key, offsets, (k, coordinator.count))

    return merge_or_redo(lambda: merge_pass(cache, job, key, offsets, coordinator.count, since), redo,
                         lambda k: coordinator.supervises or k in coordinator.todo())


def merge_or_redo(merge: Callable[[], Outcome], redo: Callable[[list[int]], None],
                  may_redo: Callable[[int], bool]) -> Outcome:
    """``merge()``, and where it finds shards lacking (a damaged partial, a mark whose files hold
    fewer items than it says) that this process may compute (``may_redo(k)``: its own, or every
    shard under a supervisor): ``redo(those)``, then ``merge()`` again."""
    got = merge()
    again = [k for k in got.missing if may_redo(k)] if isinstance(got, Pending) else []
    if not again:
        return got
    redo(again)
    return merge()


def said_kept(job: ShardedPass, marks: dict[int, dict], coordinator: InProcess) -> float:
    """Where shards were done before this command (an earlier run, another job): which it keeps and
    which it computes (a log line). Returns the command's start (``job.since``, else now, as
    ``time.time()``): a shard done before it was kept."""
    import time

    since = time.time() if job.since is None else job.since
    kept = sorted(k for k, r in marks.items() if float(r["end"]) < since)
    if kept:
        todo = [k for k in coordinator.todo() if k not in marks]
        log.info("statistics (%s): %s done already (an earlier run or another job), kept; %s", job.label,
                 missing_text(kept, coordinator.count),
                 f"{missing_text(todo, coordinator.count)} computed now" if todo else "none to compute here")
    return since


def said_done(job: ShardedPass, place: Place, since: float) -> None:
    text = done_text(place.marks(), place.count, since)
    if text is not None:
        log.info("statistics (%s): %s", job.label, text)


def done_text(marks: dict[int, dict], count: int, since: float) -> str | None:
    """Once every shard is marked: how long this command's shards took (``since``: its start),
    from the first one's start to the last one's end, and each one's seconds; shards done before
    the command are named as kept, their time not counted (None: a shard is not done yet)."""
    if len(marks) != count:
        return None
    now = [k for k in range(count) if float(marks[k]["end"]) >= since]
    kept = [k for k in range(count) if k not in now]
    if not now:
        return f"every shard done before this command ({missing_text(kept, count)}, kept)"
    span = max(float(marks[k]["end"]) for k in now) - min(float(marks[k]["start"]) for k in now)
    each = ", ".join(f"{float(marks[k]['seconds']):.1f}s" for k in now)
    if not kept:
        return f"every shard done in {span:.1f}s ({each} per shard)"
    return (f"every shard done; this command's {missing_text(now, count)} in {span:.1f}s ({each}); "
            f"{missing_text(kept, count)} done before it, kept")


def pending_shards(cache, key: str, place: Place) -> list[int]:
    """The shards of a pass not done yet; [] once the pass is merged (by this run or another)."""
    missing = place.missing()
    return [] if not missing or key in cache else missing  # the entry looked at last: a merge removes the marks


def compute_shard(cache, job: ShardedPass, key: str, offsets, shard: tuple[int, int]) -> None:
    """Shard ``shard`` = (k, count) of the pass, under its own lock (two runs of one shard: one
    computes), resuming from its partials; leaves its mark when done."""
    import time

    from cscore.errors import StorageError
    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS, Checkpoint

    k, count = shard
    place = Place.of_cache(cache.root, key, count)
    every = cache.checkpoint_seconds if cache.checkpoint_seconds is not None else CHECKPOINT_SECONDS
    with place.shard_lock(k):
        if k in place.marks():
            return
        checkpoint = (job.partials or Checkpoint)(place.folder, key, list(job.heads), offsets, job.temperatures,
                                                  every=every, schema=CACHE_SCHEMA, shard=shard)
        if checkpoint.load():
            log.info("statistics (%s): shard %d of %d resumed %d items from its partials", job.label, k, count,
                     checkpoint.n_kept)
        start = time.time()
        try:
            _, report = job.compute(checkpoint)
        finally:  # a shard stopped (an error, Ctrl-C, a kill's SIGTERM) keeps what it completed
            checkpoint.flush()
        if not checkpoint.enabled:
            raise StorageError(f"shard {k} of {count} ({job.label}): its partials cannot be written to "
                               f"{place.folder}; a sharded pass needs a writable statistics cache")
        items = int(len(checkpoint.foreign) - checkpoint.foreign.sum())
        place.mark(k, {
            "start": start, "end": time.time(), "seconds": report.seconds, "tokens": report.tokens,
            "padded_tokens": report.padded_tokens, "batches": report.batches, "flops": report.flops,
            "items": items, "resumed": checkpoint.n_kept})
        log.info("statistics (%s): shard %d of %d done: %d items, %d batches, %.1fs", job.label, k, count, items,
                 report.batches, report.seconds)


def merge_pass(cache, job: ShardedPass, key: str, offsets, count: int, since: float | None = None) -> Outcome:
    """The merge under the key's lock: every shard's partials into the ordinary cache entry (or the
    entry another run stored meanwhile); Pending (the shards missing) while one is not done. The
    entry keeps the whole pass's report; the one returned is this command's (``this_command``)."""
    import time

    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import Checkpoint, remove_folder

    place = Place.of_cache(cache.root, key, count)
    with cache.lock(key):
        hit = cache.load(key, job.stats_type)
        if hit is not None:
            remove_folder(place.folder)
            return Done(hit.stats, ShardedReport.of_entry(hit.meta))
        start = time.perf_counter()
        checkpoint: Any = (job.partials or Checkpoint)(place.folder, key, list(job.heads), offsets, job.temperatures,
                                                       schema=CACHE_SCHEMA)
        checkpoint.load()  # each file checked as a resumed pass checks it (checksum, header of this very pass)
        if not checkpoint.done.all():
            place.check_items(checkpoint.covered(), f"statistics ({job.label})")
        merged = None if not checkpoint.done.all() else (
            merge(checkpoint, list(job.heads), offsets, job.temperatures, job.pairs, job.stats_type)
            if job.partials is None else checkpoint.assemble())
        marks = place.marks()  # after the merge's checks: a damaged file unmarks its shard
        if merged is None or len(marks) < count:
            return Pending([k for k in range(count) if k not in marks] or list(range(count)))
        report = merged_report(marks, count, time.perf_counter() - start)
        if cache.save(key, merged, job.parts, extra={"models": job.models, "report": report.record()}) is not None:
            remove_folder(place.folder)
        log.info("statistics (%s): %d shards merged in %.2fs", job.label, count, report.merge_seconds)
    return Done(merged, this_command(report, marks, since))


def merge(checkpoint, heads: list[str], offsets, temperatures, pairs, stats_type) -> dict:
    """Every shard's partials (``checkpoint``, loaded, every item covered) into the pass's statistics."""
    temps = tuple(float(t) for t in temperatures)
    n_tok = int(offsets[-1])
    names = checkpoint.row_names()
    full = {h: {name: np.empty((len(temps), n_tok), dtype=np.float64) for name in names[h]} for h in heads}
    checkpoint.fill(full)
    token_ids = (np.concatenate([np.asarray(h, dtype=np.int64) for _, h in pairs]) if pairs
                 else np.zeros(0, np.int64))
    return {h: stats_type(temps, np.asarray(offsets, dtype=np.int64), token_ids, full[h]["logp"], full[h]["logp_max"],
                          {n: a for n, a in full[h].items() if n not in ("logp", "logp_max")}) for h in heads}


def this_command(report: ShardedReport, marks: dict[int, dict], since: float | None) -> ShardedReport:
    """A merged pass's ``report`` as this command saw it (``since``: its start): a shard done
    before then was kept from an earlier run, its items counted as resumed (with those the other
    shards resumed from their partials), and the seconds and tokens are the shards computed since
    (their first start to their last end) and the merge."""
    from dataclasses import replace

    if since is None:
        return report
    now = [r for r in marks.values() if float(r["end"]) >= since]
    kept = sorted(k for k, r in marks.items() if float(r["end"]) < since)
    wall = max(r["end"] for r in now) - min(r["start"] for r in now) if now else 0.0
    flops = [r.get("flops") for r in now]
    return replace(report, seconds=float(wall) + float(report.merge_seconds or 0.0),
                   tokens=sum(int(r["tokens"]) for r in now), padded_tokens=sum(int(r["padded_tokens"]) for r in now),
                   batches=sum(int(r["batches"]) for r in now),
                   flops=None if None in flops else float(sum(f or 0.0 for f in flops)),
                   resumed=sum(int(marks[k]["items"]) for k in kept) + sum(int(r.get("resumed", 0)) for r in now),
                   kept_shards=kept)


def merged_report(marks: dict[int, dict], count: int, merge_seconds: float) -> ShardedReport:
    """The report of a merged pass: the shards' work summed, its seconds the
    wall time from the first shard's start to the merge's end (the shards' own seconds listed)."""
    recs = [marks[k] for k in range(count)]
    wall = max(r["end"] for r in recs) - min(r["start"] for r in recs) + merge_seconds
    flops = [r.get("flops") for r in recs]
    total = None if None in flops else float(sum(f or 0.0 for f in flops))
    return ShardedReport(wall, sum(int(r["tokens"]) for r in recs), sum(int(r["padded_tokens"]) for r in recs),
                         sum(int(r["batches"]) for r in recs), flops=total,
                         shards=count, shard_seconds=[round(float(r["seconds"]), 4) for r in recs],
                         merge_seconds=round(merge_seconds, 4))
