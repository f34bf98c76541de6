"""The one sharded runner (``runtime.shards``): ``run`` computes this process's shards of a
``Work``, then merges where its coordinator says. Payloads: the statistics pass (``run_pass``), the
judge's rows (``run_rows``), the CDM negatives (``run/negatives.py``). See docs/scaling.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NoReturn, Union

import numpy as np

from cscore.errors import ConfigError, ShardsPending, StorageError
from cscore.scorers.engine.report import EngineReport
from cscore.scorers.store.cache import CACHE_SCHEMA, stats_key
from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS, Checkpoint, Place, Shard, missing_text, pending_text

log = logging.getLogger(__name__)

START_GRACE = 120.0  # seconds a task of a job array waits for siblings still starting up
POLL = 0.25


# -- the coordinators: who computes which shard, who waits for whom, who merges ----------------

@dataclass(frozen=True)
class InProcess:
    """This process computes shard ``index`` of ``count`` (None: every shard), then merges if
    ``merge``. ``since``: the job's start; shards marked before it are an earlier command's."""

    count: int = 1
    index: int | None = None
    merge: bool = True
    grace: float = 0.0
    since: float = field(default_factory=time.time, compare=False)
    supervises: ClassVar[bool] = False  # a parent whose workers compute the other shards

    @property
    def on(self) -> bool:
        return self.count > 1

    def todo(self) -> list[int]:
        return list(range(self.count)) if self.index is None else [self.index]

    def supervise(self, pending: Callable[[], list[int]], label: str) -> None:
        """A supervisor's wait for its workers (``LocalDevices``)."""

    def redoes(self, k: int) -> bool:
        """Whether this process computes a shard the merge finds lacking again."""
        return self.supervises or k in self.todo()

    def wait(self, pending: Callable[[], list[int]], running: Callable[[list[int]], bool], label: str) -> list[int]:
        """Wait for the other shards; returns those still missing."""
        if self.supervises:
            self.supervise(pending, label)
            return pending()
        return self.wait_running(pending, running)

    def wait_running(self, pending: Callable[[], list[int]], running: Callable[[list[int]], bool]) -> list[int]:
        """Wait while a missing shard runs or for ``grace`` seconds (a sibling still starting)."""
        start = time.monotonic()

        def still(missing: list[int]) -> bool:
            return running(missing) or time.monotonic() - start < self.grace

        def said(missing: list[int]) -> None:
            log.info("waiting for shard%s %s of %d", "s" * (len(missing) > 1), ", ".join(map(str, missing)),
                     self.count)

        return wait_for(pending, lambda: still, said=said)


@dataclass(frozen=True)
class ArrayTask(InProcess):
    """A task of a job array (or, ``merge=False``, a worker of ``runtime.devices``)."""

    grace: float = START_GRACE


def wait_for(pending: Callable[[], list[int]], look: Callable[[], Callable[[list[int]], bool]],
             poll: float = POLL, said: Callable[[list[int]], None] | None = None) -> list[int]:
    """The one wait loop: ``pending()`` every ``poll`` seconds until it is empty or ``look()``'s
    answer (taken first: a shard marks, then ends) says stop; then ``pending()`` once more."""
    told = False
    while True:
        still = look()
        missing = pending()
        if not missing:
            return missing
        if not still(missing):
            return pending()
        if not told and said is not None:
            said(missing)
            told = True
        time.sleep(poll)


@dataclass(frozen=True)
class Done:
    """Work whose result is in, and this command's ``report`` of it."""

    stats: dict
    report: Any = None


@dataclass(frozen=True)
class Pending:
    """Passes waiting for shards this process does not run (``missing`` empty: another process
    merges); the command ends with ``stop()``."""

    missing: list[int]
    passes: tuple[str, ...] = ()

    def named(self, label: str) -> Pending:
        return Pending(self.missing, (label,))

    def stop(self, coordinator: InProcess, message: str | None = None) -> NoReturn:
        """The one place ``ShardsPending`` is raised; a process that does not merge names none missing."""
        missing = self.missing if coordinator.merge else []
        if message is None:
            message = f"statistics ({', '.join(self.passes)}): {pending_text(missing, coordinator.count)}"
        raise ShardsPending(message, missing, coordinator.count)


Outcome = Union[Done, Pending]


def pending_of(parts: list[Pending]) -> Pending | None:
    """``parts`` as one (None: none)."""
    if not parts:
        return None
    return Pending(sorted({k for p in parts for k in p.missing}), tuple(x for p in parts for x in p.passes))


# -- the report of a pass run through the store -----------------------------------------------

@dataclass
class PassReport(EngineReport):
    """``EngineReport`` with a sharded pass's figures (``shards`` 1: none); ``seconds`` is then the
    wall time from the first shard's start to the merge's end."""

    shards: int = 1
    shard_seconds: list[float] | None = None  # each shard's seconds
    merge_seconds: float | None = None
    kept_shards: list | None = None  # shards an earlier command computed (their items are in ``resumed``)

    def figures(self) -> dict:
        """The keys a sharded pass adds to its cache entry and metrics.json (none if unsharded)."""
        if self.shards <= 1:
            return {}
        return {"shards": self.shards, "shard_seconds": self.shard_seconds, "merge_seconds": self.merge_seconds}

    def record(self) -> dict:
        """A cache entry's ``extra["report"]``."""
        return {**super().record(), **self.figures()}

    @classmethod
    def of_entry(cls, meta: dict) -> PassReport:
        """A cache hit's report: the figures of the run that computed the entry."""
        run = (meta.get("extra") or {}).get("report", {})
        report = cls.of_record(run)
        report.shards, report.shard_seconds = run.get("shards", 1), run.get("shard_seconds")
        report.merge_seconds = run.get("merge_seconds")
        return report

    def adopt(self, merged: PassReport | None) -> PassReport:
        """This decode report with the shard figures of ``merged`` (None: unchanged)."""
        if merged is not None:
            self.shards, self.shard_seconds = merged.shards, merged.shard_seconds
            self.merge_seconds = merged.merge_seconds
        return self

    def kept_text(self) -> str | None:
        """The shards an earlier command computed (None: none)."""
        return f"{missing_text(self.kept_shards, self.shards)}, kept" if self.kept_shards else None


def run_figures(reports: Mapping[str, EngineReport]) -> dict:
    """metrics.json's shard figures of a run (none if no pass was sharded)."""
    split = {name: rep for name, rep in reports.items() if isinstance(rep, PassReport) and rep.shards > 1}
    if not split:
        return {}
    return {"shards": max(rep.shards for rep in split.values()),
            "shard_seconds": {name: rep.shard_seconds for name, rep in split.items()},
            "merge_seconds": round(sum(rep.merge_seconds or 0.0 for rep in split.values()), 4)}


def by_others(reports) -> bool:
    """Whether other processes of this command (``runtime.devices``' workers) computed shards."""
    return any(isinstance(r, PassReport) and not r.cached and r.shards > 1 and len(r.kept_shards or []) < r.shards
               for r in reports)


def stop_early(coordinator: InProcess, reports, label: str = "judge") -> Pending | None:
    """``Pending`` for a job that writes no run directory: a worker of runtime.devices, or shard K > 0
    of an array whose passes were all stored already (shard 0 writes it); else None."""
    if coordinator.on and (not coordinator.merge or (coordinator.index not in (None, 0)
                                                     and all(r.cached for r in reports))):
        return Pending([], (label,))
    return None


def figures_of(report: EngineReport) -> dict:
    """``PassReport.figures`` of ``report`` ({} for another report)."""
    return report.figures() if isinstance(report, PassReport) else {}


# -- the runner ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Work:
    """One payload: ``stored()`` its result if in; ``merged()`` a cheap look; ``compute(k)`` shard k
    (resumed; returns its mark's figures); ``merge()`` ``Done`` or ``Pending`` (the shards lacking)."""

    label: str
    place: Place
    stored: Callable[[], Outcome | None]
    merged: Callable[[], bool]
    compute: Callable[[int], dict]
    merge: Callable[[], Outcome]

    def pending(self) -> list[int]:
        """The shards not done yet; [] once merged (marks first: a merge removes them)."""
        missing = self.place.missing()
        return [] if not missing or self.merged() else missing


def run(work: Work, coordinator: InProcess) -> Outcome:
    """The stored result, else this process's shards, then (where it merges) the merge."""
    hit = work.stored()
    if hit is not None:
        return hit
    said_kept(work, coordinator)
    for k in coordinator.todo():
        if work.merged():  # another run merged it meanwhile
            break
        compute_one(work, k)
    if not coordinator.merge:
        return Pending(work.place.missing())
    if coordinator.supervises:  # the parent of runtime.devices: the other shards are its workers'
        coordinator.wait(work.pending, work.place.running, work.label)
        text = done_text(work.place.marks(), work.place.count, coordinator.since)
        if text is not None:
            log.info("%s: %s", work.label, text)

    def redo(again: list[int]) -> None:
        log.info("%s: %s lost partials; this process re-runs what %s lost", work.label,
                 missing_text(again, coordinator.count), "it" if len(again) == 1 else "they")
        for k in again:
            compute_one(work, k)

    return merge_or_redo(work.merge, redo, coordinator)


def compute_one(work: Work, k: int) -> None:
    """Shard ``k`` under its lock (two runs of one shard: one computes), then its mark."""
    with work.place.lock(k):
        if k in work.place.marks():
            return
        start = time.time()
        figures = work.compute(k)
        end = time.time()
        work.place.mark(k, {"start": start, "end": end, "seconds": end - start, **figures})


def merge_or_redo(merge: Callable[[], Outcome], redo: Callable[[list[int]], None], coordinator: InProcess) -> Outcome:
    """``merge()``; where it finds shards lacking that this process redoes: ``redo``, merge again."""
    got = merge()
    again = [k for k in got.missing if coordinator.redoes(k)] if isinstance(got, Pending) else []
    if not again:
        return got
    redo(again)
    return merge()


def said_kept(work: Work, coordinator: InProcess) -> None:
    """A log line naming the shards done before this command (kept) and those computed now."""
    marks = work.place.marks()
    kept = kept_of(marks, coordinator.since)
    if kept:
        todo = [k for k in coordinator.todo() if k not in marks]
        log.info("%s: %s done already (an earlier run or another job), kept; %s", work.label,
                 missing_text(kept, coordinator.count),
                 f"{missing_text(todo, coordinator.count)} computed now" if todo else "none to compute here")


def done_text(marks: dict[int, dict], count: int, since: float) -> str | None:
    """How long this command's shards took, once every shard is marked (None before); shards done
    before ``since`` are named as kept."""
    if len(marks) != count:
        return None
    kept = kept_of(marks, since)
    now = [k for k in range(count) if k not in kept]
    if not now:
        return f"every shard done before this command ({missing_text(kept, count)}, kept)"
    wall = span([marks[k] for k in now])
    each = ", ".join(f"{float(marks[k]['seconds']):.1f}s" for k in now)
    if not kept:
        return f"every shard done in {wall:.1f}s ({each} per shard)"
    return (f"every shard done; this command's {missing_text(now, count)} in {wall:.1f}s ({each}); "
            f"{missing_text(kept, count)} done before it, kept")


def kept_of(marks: dict[int, dict], since: float) -> list[int]:
    """The shards marked done before ``since`` (an earlier command's)."""
    return sorted(k for k, r in marks.items() if float(r.get("end", 0.0)) < since)


def span(records: list[dict]) -> float:
    """Seconds from the first shard mark's start to the last one's end."""
    return max(float(r["end"]) for r in records) - min(float(r["start"]) for r in records)


# -- the statistics pass: a payload through the statistics cache ---------------------------------

@dataclass(frozen=True)
class PassJob:
    """One pass to shard; ``compute(checkpoint)`` runs the engine with a shard's checkpoint;
    ``partials``: another payload's checkpoint class (merged by its ``assemble()``)."""

    parts: dict
    heads: dict
    pairs: list
    temperatures: list
    compute: Callable
    label: str
    models: list
    stats_type: type
    partials: Callable | None = None

    def offsets(self) -> np.ndarray:
        lengths = np.array([len(h) for _, h in self.pairs], dtype=np.int64)
        return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def pass_work(cache, job: PassJob, coordinator: InProcess) -> Work:
    """``job`` as a ``Work``: its entry in ``cache``, its partials under the key."""
    key = stats_key(job.parts)
    count = coordinator.count

    def stored() -> Outcome | None:
        with cache.lock(key):
            hit = cache.load(key, job.stats_type)
        return None if hit is None else Done(hit.stats, PassReport.of_entry(hit.meta))

    return Work(f"statistics ({job.label})", Place.of_cache(cache.root, key, count), stored, lambda: key in cache,
                lambda k: compute_shard(cache, job, key, (k, count)),
                lambda: merge_pass(cache, job, key, count, coordinator.since))


def check_cache(coordinator: InProcess | None, cache) -> None:
    """A split pass needs the statistics cache: its shards meet there."""
    if coordinator is not None and coordinator.on and cache is None:
        raise ConfigError("runtime.shards needs the statistics cache (cache.enabled=true): the shards meet there")


def run_pass(cache, job: PassJob, coordinator: InProcess) -> Outcome:
    """One pass's token statistics, sharded (``run``)."""
    return run(pass_work(cache, job, coordinator), coordinator)


def compute_shard(cache, job: PassJob, key: str, shard: tuple[int, int]) -> dict:
    """Shard (k, count) of the pass, resumed from its partials; returns its mark's figures."""
    k, count = shard
    checkpoint = open_partials(cache, job, key, shard, f"statistics ({job.label})")
    try:
        _, report = job.compute(checkpoint)
    finally:  # a shard stopped (an error, Ctrl-C, a kill's SIGTERM) keeps what it completed
        checkpoint.flush()
    if not checkpoint.enabled:
        raise StorageError(f"shard {k} of {count} ({job.label}): its partials cannot be written to "
                           f"{checkpoint.folder}; a sharded pass needs a writable statistics cache")
    items = int(len(checkpoint.foreign) - checkpoint.foreign.sum())
    log.info("statistics (%s): shard %d of %d done: %d items, %d batches, %.1fs", job.label, k, count, items,
             report.batches, report.seconds)
    return {"seconds": report.seconds, "tokens": report.tokens, "padded_tokens": report.padded_tokens,
            "batches": report.batches, "flops": report.flops, "items": items, "resumed": checkpoint.n_kept}


def merge_pass(cache, job: PassJob, key: str, count: int, since: float | None = None) -> Outcome:
    """Under the key's lock, every shard's partials into the cache entry (Pending while a shard is
    not done); the entry keeps the whole pass's report, the one returned is this command's."""
    from cscore.scorers.store.checkpoint import remove_folder

    place = Place.of_cache(cache.root, key, count)
    with cache.lock(key):
        hit = cache.load(key, job.stats_type)
        if hit is not None:
            remove_folder(place.folder)
            return Done(hit.stats, PassReport.of_entry(hit.meta))
        start = time.perf_counter()
        # each file checked as a resumed pass checks it (checksum, header of this very pass)
        checkpoint: Any = open_partials(cache, job, key)
        if not checkpoint.done.all():
            place.check_items(checkpoint.covered(), f"statistics ({job.label})")
        merged = None if not checkpoint.done.all() else (
            merge(checkpoint, list(job.heads), job.offsets(), job.temperatures, job.pairs, job.stats_type)
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
    """Every shard's partials (loaded, every item covered) into the pass's statistics."""
    temps = tuple(float(t) for t in temperatures)
    n_tok = int(offsets[-1])
    names = checkpoint.row_names()
    full = {h: {name: np.empty((len(temps), n_tok), dtype=np.float64) for name in names[h]} for h in heads}
    checkpoint.fill(full)
    token_ids = (np.concatenate([np.asarray(h, dtype=np.int64) for _, h in pairs]) if pairs
                 else np.zeros(0, np.int64))
    return {h: stats_type(temps, np.asarray(offsets, dtype=np.int64), token_ids, full[h]["logp"], full[h]["logp_max"],
                          {n: a for n, a in full[h].items() if n not in ("logp", "logp_max")}) for h in heads}


def this_command(report: PassReport, marks: dict[int, dict], since: float | None) -> PassReport:
    """A merged pass's ``report`` as this command (started at ``since``) saw it: shards done before
    are kept (their items resumed), the figures those of the shards since."""
    if since is None:
        return report
    kept = kept_of(marks, since)
    now = [r for k, r in marks.items() if k not in kept]
    return replace(report, seconds=(span(now) if now else 0.0) + float(report.merge_seconds or 0.0), **summed(now),
                   resumed=sum(int(marks[k]["items"]) for k in kept) + sum(int(r.get("resumed", 0)) for r in now),
                   kept_shards=kept)


def summed(records: list[dict]) -> dict:
    """The work figures of shard marks, summed (flops None if a shard has none)."""
    flops = [r.get("flops") for r in records]
    return {"tokens": sum(int(r["tokens"]) for r in records),
            "padded_tokens": sum(int(r["padded_tokens"]) for r in records),
            "batches": sum(int(r["batches"]) for r in records),
            "flops": None if None in flops else float(sum(f or 0.0 for f in flops))}


def merged_report(marks: dict[int, dict], count: int, merge_seconds: float) -> PassReport:
    """A merged pass's report: the shards' work summed, its seconds the wall time from the first
    shard's start to the merge's end."""
    recs = [marks[k] for k in range(count)]
    return PassReport(span(recs) + merge_seconds, **summed(recs), shards=count,
                      shard_seconds=[round(float(r["seconds"]), 4) for r in recs],
                      merge_seconds=round(merge_seconds, 4))


# -- rows computed together: one cache entry per row, their units shared (the judge's decodes) ----

@dataclass(frozen=True)
class RowsJob:
    """Rows (one cache entry each) computed together over shared units: ``compute(names, units,
    done)`` calls ``done(unit, {name: arrays})`` as each unit ends; ``partials`` an ``ItemCheckpoint``
    class; ``after`` the key of the pass the rows read, when this process merged it."""

    parts: dict
    units: list
    costs: list
    compute: Callable
    n_items: int
    tokens: list
    label: str
    partials: Callable
    stats_type: type
    head: str = "paths"
    after: str | None = None

    def entry(self, name: str) -> PassJob:
        """Row ``name`` as a pass ``merge_pass`` merges."""
        return PassJob(self.parts[name], {self.head: None}, [((), (0,))] * self.n_items, [], self.compute,
                       f"{self.label} {name}", [], self.stats_type, partials=self.partials)


def run_rows(cache, job: RowsJob, coordinator: InProcess, reports: dict | None = None) -> dict | Pending:
    """{row: (stats, from the cache, seconds, call id)}, or ``Pending``; ``reports`` receives each
    merged row's report."""
    keys = {name: stats_key(job.parts[name]) for name in job.parts}
    out = {}
    for name, key in keys.items():
        with cache.lock(key):
            hit = cache.load(key, job.stats_type)
        if hit is not None:
            was = (hit.meta.get("extra") or {}).get("report") or {}
            out[name] = (hit.stats, True, was.get("seconds", float("nan")), was.get("call") or key)
    rows = {n: keys[n] for n in job.parts if n not in out}
    if not rows:
        return out
    rows_shards(cache, job, rows, coordinator.todo(), coordinator.count)
    missing = rows_missing(cache, list(rows.values()), coordinator.count)
    if missing and coordinator.index is not None and coordinator.merge:  # a worker leaves the rest to its parent
        missing = wait_rows(cache, job, rows, coordinator)
    if missing or not coordinator.merge:
        return Pending(missing, ("decode",))
    call = "shards-" + min(rows.values())[:16]
    for name, key in rows.items():  # each row's merge, its lacking shards redone alone
        entry = job.entry(name)
        since = coordinator.since
        got = merge_or_redo(lambda: merge_pass(cache, entry, key, coordinator.count, since),
                            lambda again: rows_shards(cache, job, {name: key}, again, coordinator.count),
                            coordinator)
        if isinstance(got, Pending):
            return got.named("decode")
        out[name] = (got.stats, False, got.report.seconds, call)
        if reports is not None:
            reports[name] = got.report
    return out


def wait_rows(cache, job: RowsJob, keys: dict[str, str], coordinator: InProcess) -> list[int]:
    """The shards still missing after the wait, those that will not come computed here (a worker
    that ended without them; shards that ended at ``job.after`` before this process merged it)."""
    count = coordinator.count
    places = [Place.of_cache(cache.root, key, count) for key in [*keys.values(), *([job.after] if job.after else [])]]

    def pending() -> list[int]:
        return rows_missing(cache, list(keys.values()), count)

    coordinator.wait(pending, lambda ks: any(p.running(ks) for p in places), f"decode {job.label}")
    if coordinator.supervises or job.after:
        rows_shards(cache, job, keys, pending(), count)
    return pending()


def rows_shards(cache, job: RowsJob, keys: dict[str, str], shards: list[int], count: int) -> None:
    """Each of ``shards`` of the rows ``keys`` ({name: key}) in turn, under each row's lock: the units
    their partials lack computed together, then a mark per row."""
    places = {n: Place.of_cache(cache.root, key, count) for n, key in keys.items()}
    for k in shards:
        with ExitStack() as stack:
            for key in sorted(set(keys.values())):
                stack.enter_context(Place.of_cache(cache.root, key, count).lock(k))
            todo = [n for n, place in places.items() if k not in place.marks()]
            if not todo:
                continue
            checkpoints = {n: open_rows(cache, job, n, keys[n], (k, count)) for n in todo}
            mine = Shard(k, count).mine(job.units, job.costs)
            start = time.time()
            try:
                done = compute_rows(job, checkpoints, mine)
            finally:  # a shard stopped keeps what it completed
                for ck in checkpoints.values():
                    ck.flush()
            record = {"start": start, "end": time.time(), "seconds": time.time() - start, "batches": done,
                      "tokens": sum(job.tokens[i] for u in mine for i in u), "flops": None,
                      "items": sum(len(u) for u in mine)}
            for n in todo:
                places[n].mark(k, {**record, "padded_tokens": record["tokens"], "resumed": checkpoints[n].n_kept})


def open_rows(cache, job: RowsJob, name: str, key: str, shard: tuple[int, int]):
    ck = open_partials(cache, job.entry(name), key, shard, f"decode ({job.label})", "prompts")
    ck.mark_foreign(Shard(*shard).foreign(job.units, job.costs, ck.n_items))
    return ck


def compute_rows(job: RowsJob, checkpoints: dict, units: list) -> int:
    """``units`` for the rows whose partials lack them (one call per set of rows); returns the count."""
    groups: dict[tuple, list] = {}
    for unit in units:
        need = tuple(n for n, ck in checkpoints.items() if not ck.done[unit].all())
        if need:
            groups.setdefault(need, []).append(unit)

    def done(unit, arrays: dict) -> None:
        for name, got in arrays.items():
            checkpoints[name].add(np.asarray(unit, dtype=np.int64), got)

    for need, group in groups.items():
        job.compute(list(need), group, done)
    return sum(len(g) for g in groups.values())


def rows_missing(cache, keys: list[str], count: int) -> list[int]:
    """The shards unmarked for some row of ``keys`` not stored yet."""
    missing: set[int] = set()
    for key in keys:
        if key not in cache:
            missing |= set(Place.of_cache(cache.root, key, count).missing())
    return sorted(missing)


def open_partials(cache, job: PassJob, key: str, shard: tuple[int, int] | None = None, label: str = "",
                  what: str = "items"):
    """The partials of ``job`` under ``key`` (its ``partials`` class, else ``Checkpoint``), loaded:
    shard ``shard``'s (resumed), None: every shard's (the merge)."""
    every = cache.checkpoint_seconds if cache.checkpoint_seconds is not None else CHECKPOINT_SECONDS
    folder = Place.of_cache(cache.root, key, 1).folder
    checkpoint = (job.partials or Checkpoint)(folder, key, list(job.heads), job.offsets(), job.temperatures,
                                              every=every, schema=CACHE_SCHEMA, shard=shard)
    if checkpoint.load() and shard is not None:
        log.info("%s: shard %d of %d resumed %d %s from its partials", label, *shard, checkpoint.n_kept, what)
    return checkpoint
