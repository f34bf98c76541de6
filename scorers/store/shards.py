"""Sharded statistics passes (``runtime.shards``): one pass planned once over all items, exactly as
unsharded, its whole batches dealt to N shards; each shard writes its batches as checkpoint partials
under the full pass's key (``s<K>-`` in the file name, ``checkpoint.Checkpoint``), and once every
item is covered the merge stores the ordinary cache entry. A batch computes the same numbers in
whichever process runs it, so the merged statistics are bit-identical to an unsharded pass on the
same device type and dtype.

This module does not import torch."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from cscore.errors import ShardsPending
from cscore.scorers.engine.pass_options import WORKER_ENV, Sharding  # noqa: F401 - re-exported
from cscore.scorers.store.checkpoint import deal  # noqa: F401 - the dealing of batches to shards lives with the partials

log = logging.getLogger(__name__)

# -- the marks a finished shard leaves beside its partials ------------------------------------

def mark_path(folder: Path, index: int, count: int) -> Path:
    return Path(folder) / f"s{index:03d}of{count:03d}.done.json"


def write_mark(folder: Path, index: int, count: int, record: dict) -> None:
    """Shard ``index`` is done: its record, with the partial files that hold its batches."""
    from cscore.files import write_atomic

    files = sorted(p.name for p in Path(folder).glob(f"s{index:03d}-*.npz"))
    write_atomic(mark_path(folder, index, count), json.dumps({"shard": index, "shards": count, **record,
                                                              "files": files}))


def read_marks(folder: Path, count: int) -> dict[int, dict]:
    """The records of the shards of ``count`` that finished. A mark whose files are not all there
    any more (a damaged one was removed) or that does not read counts as missing."""
    out = {}
    for k in range(count):
        try:
            record = json.loads(mark_path(folder, k, count).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and all((Path(folder) / f).is_file() for f in record.get("files", [None])):
            out[k] = record
    return out


def missing_text(missing: Sequence[int], count: int) -> str:
    names = ", ".join(str(k) for k in missing)
    return f"shard{'s' * (len(missing) != 1)} {names} of {count}"


def pending_error(pending: dict, sharding: Sharding) -> ShardsPending:
    """What a process says when passes (``pending``: {label: missing shards}) wait on shards it
    does not run."""
    missing = sorted({k for ks in pending.values() for k in ks})
    what = (f"{missing_text(missing, sharding.count)} not done yet" if missing else
            "every shard done; the merge is the parent's (runtime.devices)")
    return ShardsPending(f"statistics ({', '.join(pending)}): {what}", missing, sharding.count)


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


def run_pass(cache, job: ShardedPass, sharding: Sharding):
    """The token statistics of one pass, sharded: the cache entry if there is one; else this
    process's shards (``sharding.todo()``, each under its own lock, resuming from its own partials,
    leaving a mark when done), then the merge under the key's lock once every item is covered.
    Returns (stats per head or None when shards are missing, report or None, the shards missing)."""
    from cscore.scorers.engine.passes import EngineReport
    from cscore.scorers.store.cache import stats_key
    from cscore.scorers.store.checkpoint import PARTIAL_DIR

    key = stats_key(job.parts)
    with cache.lock(key):
        hit = cache.load(key, job.stats_type)
    if hit is not None:  # merged already (which job of a sweep point writes its run directory: cli/workers.py)
        return hit.stats, EngineReport.of_entry(hit.meta), []
    folder = cache.root / PARTIAL_DIR / key
    lengths = np.array([len(h) for _, h in job.pairs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    since = said_kept(job, read_marks(folder, sharding.count), sharding)
    for k in sharding.todo():
        if key in cache:  # another run merged it meanwhile
            break
        compute_shard(cache, job, key, offsets, (k, sharding.count))
    if not sharding.merge:
        return None, None, [k for k in range(sharding.count) if k not in read_marks(folder, sharding.count)]
    if sharding.wait is not None:  # the parent of runtime.devices: the other shards are its workers'
        return wait_and_merge(cache, job, key, offsets, sharding, since)
    return merge_pass(cache, job, key, offsets, sharding.count, since)


def said_kept(job: ShardedPass, marks: dict[int, dict], sharding: Sharding) -> float:
    """Where shards were done before this command (an earlier run, another job): which it keeps and
    which it computes (a log line). Returns the command's start (``job.since``, else now, as
    ``time.time()``): a shard done before it was kept."""
    import time

    since = time.time() if job.since is None else job.since
    kept = sorted(k for k, r in marks.items() if float(r["end"]) < since)
    if kept:
        todo = [k for k in sharding.todo() if k not in marks]
        log.info("statistics (%s): %s done already (an earlier run or another job), kept; %s", job.label,
                 missing_text(kept, sharding.count),
                 f"{missing_text(todo, sharding.count)} computed now" if todo else "none to compute here")
    return since


def pending_shards(cache, key: str, folder: Path, count: int) -> list[int]:
    """The shards of a pass not done yet; [] once the pass is merged (by this run or another)."""
    marks = read_marks(folder, count)
    missing = [k for k in range(count) if k not in marks]
    return [] if not missing or key in cache else missing  # the entry looked at last: a merge removes the marks


def wait_and_merge(cache, job: ShardedPass, key: str, offsets, sharding: Sharding, since: float | None = None):
    """After this process's own shard: ``sharding.wait`` until every other shard's mark is there,
    then the merge. A partial the merge finds damaged unmarks its shard, whose workers are done
    with this pass by then: this process re-runs what that shard lost, then merges again."""
    from cscore.scorers.store.checkpoint import PARTIAL_DIR

    folder, count, wait = cache.root / PARTIAL_DIR / key, sharding.count, sharding.wait
    assert wait is not None
    wait(lambda: pending_shards(cache, key, folder, count), job.label)
    marks = read_marks(folder, count)
    if len(marks) == count:
        recs = [marks[k] for k in range(count)]
        log.info("statistics (%s): every shard done in %.1fs (%s per shard)", job.label,
                 max(r["end"] for r in recs) - min(r["start"] for r in recs),
                 ", ".join(f"{float(r['seconds']):.1f}s" for r in recs))
    got = merge_pass(cache, job, key, offsets, count, since)
    if got[0] is None:
        log.info("statistics (%s): %s lost partials; this process re-runs what %s lost", job.label,
                 missing_text(got[2], count), "it" if len(got[2]) == 1 else "they")
        for k in got[2]:
            compute_shard(cache, job, key, offsets, (k, count))
        got = merge_pass(cache, job, key, offsets, count, since)
    return got


def compute_shard(cache, job: ShardedPass, key: str, offsets, shard: tuple[int, int]) -> None:
    """Shard ``shard`` = (k, count) of the pass, under its own lock (two runs of one shard: one
    computes), resuming from its partials; leaves its mark when done."""
    import time

    from cscore.errors import StorageError
    from cscore.files import file_lock
    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS, PARTIAL_DIR, Checkpoint

    k, count = shard
    folder = cache.root / PARTIAL_DIR / key
    every = cache.checkpoint_seconds if cache.checkpoint_seconds is not None else CHECKPOINT_SECONDS
    with file_lock(cache.root / ".locks" / f"{key}.s{k:03d}.lock"):
        if k in read_marks(folder, count):
            return
        checkpoint = (job.partials or Checkpoint)(folder, key, list(job.heads), offsets, job.temperatures,
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
                               f"{folder}; a sharded pass needs a writable statistics cache")
        items = int(len(checkpoint.foreign) - checkpoint.foreign.sum())
        write_mark(folder, k, count, {
            "start": start, "end": time.time(), "seconds": report.seconds, "tokens": report.tokens,
            "padded_tokens": report.padded_tokens, "batches": report.batches, "flops": report.flops,
            "items": items, "resumed": checkpoint.n_kept})
        log.info("statistics (%s): shard %d of %d done: %d items, %d batches, %.1fs", job.label, k, count, items,
                 report.batches, report.seconds)


def merge_pass(cache, job: ShardedPass, key: str, offsets, count: int, since: float | None = None):
    """The merge under the key's lock: every shard's partials into the ordinary cache entry (or the
    entry another run stored meanwhile); (None, None, missing shards) while one is not done. The
    entry keeps the whole pass's report; the one returned is this command's (``this_command``)."""
    import time

    from cscore.scorers.engine.passes import EngineReport
    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import PARTIAL_DIR, remove_folder

    folder = cache.root / PARTIAL_DIR / key
    with cache.lock(key):
        hit = cache.load(key, job.stats_type)
        if hit is not None:
            remove_folder(folder)
            return hit.stats, EngineReport.of_entry(hit.meta), []
        start = time.perf_counter()
        merged = (merge(folder, key, list(job.heads), offsets, job.temperatures, job.pairs, CACHE_SCHEMA,
                        job.stats_type) if job.partials is None else merge_items(folder, key, job, offsets))
        marks = read_marks(folder, count)  # after the merge's checks: a damaged file unmarks its shard
        if merged is None or len(marks) < count:
            return None, None, [k for k in range(count) if k not in marks] or list(range(count))
        report = merged_report(marks, count, time.perf_counter() - start)
        if cache.save(key, merged, job.parts, extra={"models": job.models, "report": report.record()}) is not None:
            remove_folder(folder)
        log.info("statistics (%s): %d shards merged in %.2fs", job.label, count, report.merge_seconds)
    return merged, this_command(report, marks, since), []


def merge(folder: Path, key: str, heads: list[str], offsets, temperatures, pairs, schema: int, stats_type):
    """Every shard's partials into the pass's statistics (None while an item is not covered).
    Each file is checked as a resumed pass checks it (checksum, header of this very pass)."""
    from cscore.scorers.store.checkpoint import Checkpoint

    checkpoint = Checkpoint(folder, key, heads, offsets, temperatures, schema=schema)
    checkpoint.load()
    if not checkpoint.done.all():
        return None
    temps = tuple(float(t) for t in temperatures)
    n_tok = int(offsets[-1])
    logp = {h: np.empty((len(temps), n_tok), dtype=np.float64) for h in heads}
    logp_max = {h: np.empty((len(temps), n_tok), dtype=np.float64) for h in heads}
    checkpoint.fill(logp, logp_max)
    token_ids = (np.concatenate([np.asarray(h, dtype=np.int64) for _, h in pairs]) if pairs
                 else np.zeros(0, np.int64))
    return {h: stats_type(temps, np.asarray(offsets, dtype=np.int64), token_ids, logp[h], logp_max[h]) for h in heads}


def merge_items(folder: Path, key: str, job: ShardedPass, offsets):
    """``merge`` for a pass with ``partials``: its ``assemble()`` once every item is covered."""
    from cscore.scorers.store.cache import CACHE_SCHEMA

    assert job.partials is not None
    checkpoint = job.partials(folder, key, list(job.heads), offsets, job.temperatures, schema=CACHE_SCHEMA)
    checkpoint.load()
    return checkpoint.assemble() if checkpoint.done.all() else None


def this_command(report, marks: dict[int, dict], since: float | None):
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


def merged_report(marks: dict[int, dict], count: int, merge_seconds: float):
    """The report of a merged pass: the shards' work summed, its seconds the wall time from the
    first shard's start to the merge's end (the shards' own seconds listed)."""
    from cscore.scorers.engine.passes import EngineReport

    recs = [marks[k] for k in range(count)]
    wall = max(r["end"] for r in recs) - min(r["start"] for r in recs) + merge_seconds
    flops = [r.get("flops") for r in recs]
    total = None if None in flops else float(sum(f or 0.0 for f in flops))
    return EngineReport(wall, sum(int(r["tokens"]) for r in recs), sum(int(r["padded_tokens"]) for r in recs),
                        sum(int(r["batches"]) for r in recs), flops=total,
                        shards=count, shard_seconds=[round(float(r["seconds"]), 4) for r in recs],
                        merge_seconds=round(merge_seconds, 4))
