"""The judge's decodes sharded (``runtime.shards``): the prompts are grouped in units that are
never split (cd_judge's greedy decode: one prompt, whose rules form one tree; the released
decode: one batch of its plan, decoded together), the units dealt to the shards by cost, longest
first (the shard plan, ``plan.Shard``: every shard deals alike). A shard decodes its units for
every row the cache lacks and writes each row's paths as partials under that row's own decode key
(``<cache>/.partial/<key>/s<K>-<n>-<sha256>.npz``, ``item_partials.ItemCheckpoint``: checksum in
the name, a header naming the decode) and a done mark per row; the merge (``shards.merge_pass``)
stores the ordinary decode entry, the paths in prompt order: the entry an unsharded run stores.

A unit decodes the same paths in whichever process decodes it, so the merged entries are the
unsharded run's bit for bit. A killed shard resumes from its partials (units whose every row is
kept are not decoded again); a damaged file is removed and its units decoded again.

A shard of a job array (or a worker of ``runtime.devices``) that needs every shard's part of a pass
(the decode reads the merged first-step statistics) waits as its coordinator says
(``coordinator.InProcess.wait_running``: while the missing shards run, their shard lock held, and a
task of an array a start-up grace); the partials, marks and locks are ``meeting.Place``'s.

This module does not import torch."""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cscore.scorers.judge.stats import DECODE_FORMAT, DecodedPaths
from cscore.scorers.store.checkpoint import Shard
from cscore.scorers.store.item_partials import SIZES, ItemCheckpoint, Layout, unit_offsets
from cscore.scorers.store.meeting import Place
from cscore.scorers.store.runner import Outcome, Pending, ShardedPass, merge_or_redo, merge_pass, pass_work, run

log = logging.getLogger(__name__)

DECODE_LAYOUT = Layout({SIZES: ()}, ("ids",))


@dataclass(frozen=True)
class DecodeJob:
    """The decodes of one call: ``parts`` {row name: its decode key's parts (without kind and
    format)}, the units (prompt indices decoded together, in plan order) and their ``costs``;
    ``compute(names, units, done)`` decodes those units for those rows, calling ``done(unit,
    {name: paths of the unit's prompts})`` as each unit ends; ``n_prompts``, ``tokens`` (each
    prompt's length) and ``label`` for the logs; ``after``: the key of the pass the decodes read
    (the first-step pass) when this process merged it: a shard that ended there before its
    siblings came (``first_step``) left its decodes to this one; None: no such pass."""

    parts: dict
    units: list
    costs: list
    compute: Callable
    n_prompts: int
    tokens: list
    label: str
    after: str | None = None

    def full(self, name: str) -> dict:
        return {"kind": "judge_decode", "decode_format": DECODE_FORMAT, **self.parts[name]}

    def entry(self, name: str) -> ShardedPass:
        """Row ``name``'s decode as a pass ``shards.merge_pass`` merges (one position per prompt)."""
        return ShardedPass(self.full(name), {"paths": None}, [((), (0,))] * self.n_prompts, [], self.compute,
                           f"{self.label} {name}", [], DecodedPaths, partials=decode_partials)


def _assemble(checkpoint) -> dict:
    _, ragged = checkpoint.gather()
    return {"paths": DecodedPaths.from_lists([ids.tolist() for ids in ragged["ids"]])}


decode_partials = functools.partial(ItemCheckpoint, layout=DECODE_LAYOUT, assemble=_assemble)


def path_rows(paths: list[list[int]]) -> dict[str, np.ndarray]:
    """A unit's paths as a decode partial's arrays."""
    return {SIZES: np.asarray([len(p) for p in paths], dtype=np.int64),
            "ids": np.asarray([t for p in paths for t in p], dtype=np.int64)}


def first_step(cache, parts: dict, scale, compute, models, shards) -> Outcome:
    """The judge's first-step pass sharded: ``Done`` (statistics ``{"judge": JudgeStats}``, report)
    or ``Pending`` (the shards missing: the command raises ShardsPending). Its batches dealt to the shards
    (``shards.run_pass``, partials ``judge.first_step_partials``); once every shard is done it is
    merged here, in a worker of runtime.devices too (the decodes read it); a shard of a job array
    waits for the others while they run (``InProcess.wait_running``). ``compute(checkpoint)``: the pass
    (``judge.compute``); ``models``: (main, assistant) as loaded; ``shards``: the coordinator."""
    from cscore.scorers.judge import judge
    from cscore.scorers.judge.stats import JudgeStats
    from cscore.scorers.store.cache import stats_key

    main, asst = models
    n_ctx = scale.n_items * (1 + len(scale.prefixes))
    vocab = main.model.get_output_embeddings().weight.shape[0]
    job = ShardedPass(parts, {"judge": None}, [((), (0,))] * n_ctx, [], compute, "judge",
                      [f"main: {main.name}", f"asst: {asst.name}"], JudgeStats,
                      partials=judge.first_step_partials(scale, vocab))
    work = pass_work(cache, job, shards.count)
    got = run(work, shards)
    if isinstance(got, Pending) and got.missing and shards.index is not None:
        with work.place.shard_lock(shards.index):  # it is still there: its decodes are its own
            got = Pending(shards.wait_running(work.pending, work.place.running))
    if isinstance(got, Pending) and not got.missing:  # every shard done (or merged already): the decodes need it
        got = merge_pass(cache, job, stats_key(parts), unit_offsets(n_ctx), shards.count)
    return got


def sharded_decodes(cache, job: DecodeJob, sharding, reports: dict | None = None) -> dict | Pending:
    """{row: (paths, from the cache, seconds, call id)}, or ``Pending`` (the shards missing, "decode"):
    the rows the cache holds read, the others decoded by this process's shards
    (``sharding.todo()``) and merged once every shard is done (``sharding.merge``); ``reports``
    (a dict) receives each merged row's report (its shards' seconds, the merge's)."""
    from cscore.scorers.store.cache import stats_key

    keys = {name: stats_key(job.full(name)) for name in job.parts}
    out = {}
    for name, key in keys.items():
        with cache.lock(key):
            hit = cache.load(key, DecodedPaths)
        if hit is not None:
            was = (hit.meta.get("extra") or {}).get("report") or {}
            out[name] = (hit.stats["paths"].paths(), True, was.get("seconds", float("nan")), was.get("call") or key)
    todo = [name for name in job.parts if name not in out]
    if not todo:
        return out
    rows = {n: keys[n] for n in todo}
    for k in sharding.todo():
        decode_shard(cache, job, rows, (k, sharding.count))
    missing = missing_shards(cache, list(rows.values()), sharding.count)
    if missing and sharding.index is not None and sharding.merge:  # a worker leaves the rest to its parent
        missing = wait_decodes(cache, job, rows, sharding)
    if missing or not sharding.merge:
        return Pending(missing, ("decode",))
    call = "shards-" + min(rows.values())[:16]
    for name in todo:
        got = merge_row(cache, job, name, keys[name], sharding)
        if isinstance(got, Pending):
            return got.named("decode")
        out[name] = (got.stats["paths"].paths(), False, got.report.seconds, call)
        if reports is not None:
            reports[name] = got.report
    return out


def merge_row(cache, job: DecodeJob, name: str, key: str, sharding) -> Outcome:
    """Row ``name``'s merge (``shards.merge_or_redo``): a shard of this process (a supervisor: any
    shard) whose partials lack what its mark says is decoded again, then merged again."""
    def redo(again: list[int]) -> None:
        for k in again:
            decode_shard(cache, job, {name: key}, (k, sharding.count))

    return merge_or_redo(lambda: merge_pass(cache, job.entry(name), key, unit_offsets(job.n_prompts), sharding.count),
                         redo, lambda k: sharding.supervises or k in sharding.todo())


def wait_decodes(cache, job: DecodeJob, keys: dict[str, str], sharding) -> list[int]:
    """The shards still missing after waiting for the others' decodes: as the coordinator
    ``sharding`` says (a supervisor, the parent of runtime.devices: for its workers; else while they
    run, ``wait_running``). Then the decodes of shards that will not come are decoded here: under
    a supervisor, a worker that ended without them; else those of shards that ended at the
    first-step pass before this process merged it (``job.after``)."""
    count = sharding.count
    places = [Place.of_cache(cache.root, key, count) for key in [*keys.values(), *([job.after] if job.after else [])]]

    def pending() -> list[int]:
        return missing_shards(cache, list(keys.values()), count)

    if sharding.supervises:
        sharding.supervise(pending, f"decode {job.label}")
    else:
        sharding.wait_running(pending, lambda ks: any(p.running(ks) for p in places))
    if sharding.supervises or job.after:
        for k in pending():
            decode_shard(cache, job, keys, (k, count))
    return pending()


def decode_shard(cache, job: DecodeJob, keys: dict[str, str], shard: tuple[int, int]) -> None:
    """Shard ``shard`` = (k, count) of the rows ``keys`` ({name: decode key}): under each row's
    shard lock, its units the partials lack decoded (together), then a mark per row."""
    from contextlib import ExitStack

    k, count = shard
    with ExitStack() as stack:
        for key in sorted(set(keys.values())):
            stack.enter_context(Place.of_cache(cache.root, key, count).shard_lock(k))
        todo = {n: key for n, key in keys.items() if k not in Place.of_cache(cache.root, key, count).marks()}
        if not todo:
            return
        checkpoints = {n: open_partials(cache, job, key, shard) for n, key in todo.items()}
        mine = Shard(k, count).mine(job.units, job.costs)
        start = time.time()
        try:
            done = decode_units(job, checkpoints, mine)
        finally:  # a shard stopped keeps what it completed
            for ck in checkpoints.values():
                ck.flush()
        record = {"start": start, "end": time.time(), "seconds": time.time() - start, "batches": done,
                  "tokens": sum(job.tokens[i] for u in mine for i in u), "flops": None,
                  "items": sum(len(u) for u in mine)}
        for n, key in todo.items():
            Place.of_cache(cache.root, key, count).mark(k, {**record, "padded_tokens": record["tokens"],
                                                            "resumed": checkpoints[n].n_kept})


def open_partials(cache, job: DecodeJob, key: str, shard: tuple[int, int]) -> ItemCheckpoint:
    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS

    every = cache.checkpoint_seconds if cache.checkpoint_seconds is not None else CHECKPOINT_SECONDS
    folder = Place.of_cache(cache.root, key, shard[1]).folder
    ck = decode_partials(folder, key, ["paths"], unit_offsets(job.n_prompts), [], every=every,
                         schema=CACHE_SCHEMA, shard=shard)
    if ck.load():
        log.info("decode (%s): shard %d of %d resumed %d prompts from its partials", job.label, shard[0], shard[1],
                 ck.n_kept)
    ck.mark_foreign(Shard(*shard).foreign(job.units, job.costs, ck.n_items))
    return ck


def decode_units(job: DecodeJob, checkpoints: dict[str, ItemCheckpoint], units: list) -> int:
    """Decode ``units`` for the rows whose partials lack them (units with the same rows to do in
    one call); each unit's paths go to its rows' partials. Returns the units decoded."""
    groups: dict[tuple, list] = {}
    for unit in units:
        need = tuple(n for n, ck in checkpoints.items() if not ck.done[unit].all())
        if need:
            groups.setdefault(need, []).append(unit)

    def done(unit, paths: dict) -> None:
        for name, got in paths.items():
            checkpoints[name].add(np.asarray(unit, dtype=np.int64), path_rows(got))

    for need, group in groups.items():
        job.compute(list(need), group, done)
    return sum(len(g) for g in groups.values())


def missing_shards(cache, keys: list[str], count: int) -> list[int]:
    """The shards whose mark is missing for some pass of ``keys`` that is not stored yet."""
    missing: set[int] = set()
    for key in keys:
        if key not in cache:
            missing |= set(Place.of_cache(cache.root, key, count).missing())
    return sorted(missing)
