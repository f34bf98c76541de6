"""The judge's decodes sharded (``runtime.shards``): the prompts are grouped in units that are
never split (cd_judge's greedy decode: one prompt, whose rules form one tree; the released
decode: one batch of its plan, decoded together), the units dealt to the shards by cost, longest
first (``checkpoint.deal``: every shard deals alike). A shard decodes its units for every row the
cache lacks and writes each row's paths as partials under that row's own decode key
(``<cache>/.partial/<key>/s<K>-<n>-<sha256>.npz``, ``item_partials.ItemCheckpoint``: checksum in
the name, a header naming the decode) and a done mark per row; the merge (``shards.merge_pass``)
stores the ordinary decode entry, the paths in prompt order: the entry an unsharded run stores.

A unit decodes the same paths in whichever process decodes it, so the merged entries are the
unsharded run's bit for bit. A killed shard resumes from its partials (units whose every row is
kept are not decoded again); a damaged file is removed and its units decoded again.

``wait_for_shards``: a shard of a job array (or a worker of ``runtime.devices``) that needs every
shard's part of a pass (the decode reads the merged first-step statistics) waits while the missing
shards run (their shard lock is held) and, in a SLURM job or a worker, a start-up grace.

This module does not import torch."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from cscore.scorers.judge.stats import DECODE_FORMAT, DecodedPaths
from cscore.scorers.store.item_partials import SIZES, ItemCheckpoint, Layout, unit_offsets
from cscore.scorers.store.shards import WORKER_ENV, ShardedPass, merge_pass, read_marks, write_mark

log = logging.getLogger(__name__)

START_GRACE = 120.0  # seconds a shard of a SLURM job or a worker waits for siblings still starting up
POLL = 0.25
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


def first_step(cache, parts: dict, scale, compute, models, shards):
    """The judge's first-step pass sharded: (statistics, report). Its batches dealt to the shards
    (``shards.run_pass``, partials ``judge.first_step_partials``); once every shard is done it is
    merged here, in a worker of runtime.devices too (the decodes read it); a shard of a job array
    waits for the others while they run (``wait_for_shards``). ``compute(checkpoint)``: the pass
    (``judge.compute``); ``models``: (main, assistant) as loaded. Raises ShardsPending while a
    shard is missing."""
    from cscore.files import file_lock
    from cscore.scorers.judge import judge
    from cscore.scorers.judge.stats import JudgeStats
    from cscore.scorers.store.cache import stats_key
    from cscore.scorers.store.shards import pending_error, run_pass

    main, asst = models
    n_ctx = scale.n_items * (1 + len(scale.prefixes))
    vocab = main.model.get_output_embeddings().weight.shape[0]
    job = ShardedPass(parts, {"judge": None}, [((), (0,))] * n_ctx, [], compute, "judge",
                      [f"main: {main.name}", f"asst: {asst.name}"], JudgeStats,
                      partials=judge.first_step_partials(scale, vocab))
    key = stats_key(parts)
    got, report, missing = run_pass(cache, job, shards)
    if got is None and missing and shards.index is not None:
        with file_lock(shard_lock(cache, key, shards.index)):  # it is still there: its decodes are its own
            missing = wait_for_shards(cache, [key], shards.count)
    if got is None and not missing:  # every shard done (or merged already): the decodes need the statistics
        got, report, missing = merge_pass(cache, job, key, unit_offsets(n_ctx), shards.count)
    if got is None:
        raise pending_error({"judge": missing}, shards)
    return got["judge"], report


def sharded_decodes(cache, job: DecodeJob, sharding, reports: dict | None = None) -> tuple[dict, list[int]]:
    """({row: (paths, from the cache, seconds, call id)} or {} while shards are missing, the
    shards missing): the rows the cache holds read, the others decoded by this process's shards
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
        return out, []
    for k in sharding.todo():
        decode_shard(cache, job, {n: keys[n] for n in todo}, (k, sharding.count))
    missing = missing_shards(cache, [keys[n] for n in todo], sharding.count)
    if missing and sharding.index is not None and sharding.merge:  # a worker leaves the rest to its parent
        missing = wait_decodes(cache, job, {n: keys[n] for n in todo}, sharding)
    if missing or not sharding.merge:
        return {}, missing
    call = "shards-" + min(keys[n] for n in todo)[:16]
    for name in todo:
        got, report, missing = merge_pass(cache, job.entry(name), keys[name], unit_offsets(job.n_prompts),
                                          sharding.count)
        if got is None:
            return {}, missing
        out[name] = (got["paths"].paths(), False, report.seconds, call)
        if reports is not None:
            reports[name] = report
    return out, []


def wait_decodes(cache, job: DecodeJob, keys: dict[str, str], sharding) -> list[int]:
    """The shards still missing after waiting for the others' decodes: through ``sharding.wait``
    where the run gives one (the parent of runtime.devices: its workers), else while they run
    (``wait_for_shards``). Then the decodes of shards that will not come are decoded here: under
    ``sharding.wait``, a worker that ended without them; else those of shards that ended at the
    first-step pass before this process merged it (``job.after``)."""
    count = sharding.count

    def pending() -> list[int]:
        return missing_shards(cache, list(keys.values()), count)

    hook = getattr(sharding, "wait", None)
    if hook is not None:
        hook(pending, f"decode {job.label}")
    else:
        wait_for_shards(cache, list(keys.values()), count, also=[job.after] if job.after else [])
    if hook is not None or job.after:
        for k in pending():
            decode_shard(cache, job, keys, (k, count))
    return pending()


def decode_shard(cache, job: DecodeJob, keys: dict[str, str], shard: tuple[int, int]) -> None:
    """Shard ``shard`` = (k, count) of the rows ``keys`` ({name: decode key}): under each row's
    shard lock, its units the partials lack decoded (together), then a mark per row."""
    from contextlib import ExitStack

    from cscore.files import file_lock
    from cscore.scorers.store.checkpoint import deal

    k, count = shard
    with ExitStack() as stack:
        for key in sorted(set(keys.values())):
            stack.enter_context(file_lock(shard_lock(cache, key, k)))
        todo = {n: key for n, key in keys.items() if k not in read_marks(partial_dir(cache, key), count)}
        if not todo:
            return
        checkpoints = {n: open_partials(cache, job, key, shard) for n, key in todo.items()}
        mine = [u for u, owner in zip(job.units, deal(job.costs, count)) if owner == k]
        start = time.time()
        try:
            done = decode_units(job, checkpoints, mine)
        finally:  # a shard stopped keeps what it completed
            for ck in checkpoints.values():
                ck.flush()
        record = {"start": start, "end": time.time(), "seconds": time.time() - start, "batches": done,
                  "tokens": sum(job.tokens[i] for u in mine for i in u), "flops": None,
                  "items": sum(len(u) for u in mine)}
        for n, ck in checkpoints.items():
            write_mark(ck.folder, k, count, {**record, "padded_tokens": record["tokens"], "resumed": ck.n_kept})


def open_partials(cache, job: DecodeJob, key: str, shard: tuple[int, int]) -> ItemCheckpoint:
    from cscore.scorers.store.cache import CACHE_SCHEMA
    from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS

    every = cache.checkpoint_seconds if cache.checkpoint_seconds is not None else CHECKPOINT_SECONDS
    ck = decode_partials(partial_dir(cache, key), key, ["paths"], unit_offsets(job.n_prompts), [], every=every,
                         schema=CACHE_SCHEMA, shard=shard)
    if ck.load():
        log.info("decode (%s): shard %d of %d resumed %d prompts from its partials", job.label, shard[0], shard[1],
                 ck.n_kept)
    ck.deal(job.units, job.costs)
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


def partial_dir(cache, key: str) -> Path:
    from cscore.scorers.store.checkpoint import PARTIAL_DIR

    return cache.root / PARTIAL_DIR / key


def shard_lock(cache, key: str, k: int) -> Path:
    return cache.root / ".locks" / f"{key}.s{k:03d}.lock"  # as shards.compute_shard takes it


def missing_shards(cache, keys: list[str], count: int) -> list[int]:
    """The shards whose mark is missing for some pass of ``keys`` that is not stored yet."""
    missing = set()
    for key in keys:
        if key not in cache:
            marks = read_marks(partial_dir(cache, key), count)
            missing |= {k for k in range(count) if k not in marks}
    return sorted(missing)


def held(path: Path) -> bool:
    """Whether someone holds the lock file ``path`` now (``files.file_lock``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def wait_for_shards(cache, keys: list[str], count: int, grace: float | None = None, also=()) -> list[int]:
    """Wait until every shard of the passes ``keys`` is done (or stored), while a missing one runs
    (holds its shard lock of one of ``keys`` or ``also``) or, in a SLURM job or a worker of
    ``runtime.devices``, for ``grace`` seconds (START_GRACE) for one still starting. Returns the
    shards still missing."""
    if grace is None:
        grace = START_GRACE if os.environ.get(WORKER_ENV) or os.environ.get("SLURM_JOB_ID") else 0.0
    start = time.monotonic()
    said = False
    while True:
        missing = missing_shards(cache, keys, count)
        running = any(held(shard_lock(cache, key, k)) for key in [*keys, *also] for k in missing)
        if not missing or (not running and time.monotonic() - start >= grace):
            return missing
        if not said:
            log.info("waiting for shard%s %s of %d", "s" * (len(missing) > 1), ", ".join(map(str, missing)), count)
            said = True
        time.sleep(POLL)
