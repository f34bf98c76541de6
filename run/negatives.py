"""``cscore cdm generate``'s steps: the positives of a dataset, their negatives written by the pair
(``cscore.training.negatives``), and under ``runtime.shards`` the positives dealt to the shards."""

from __future__ import annotations

import json
import logging
from contextlib import suppress
from pathlib import Path

import numpy as np

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.files import write_atomic
from cscore.run.kinds.aspects import target_aspect
from cscore.run.kinds.pair import load_pair
from cscore.run.kinds.prompts import make_prompts
from cscore.scorers.store import runner
from cscore.scorers.store.checkpoint import Place, deal
from cscore.scorers.store.runner import Done, InProcess, Outcome, Pending, Work
from cscore.training.negatives import (
    GenerateJob,
    finish,
    finished_records,
    round_robin,
    select_positives,
    todo,
    write_negatives,
)

log = logging.getLogger(__name__)


def positives_of(examples, g: dict):
    """The positives of ``cdm.generate`` (``g``): at most ``limit``, drawn round-robin across the groups."""
    column = f"{rundir.HUMAN}{target_aspect(examples, g['aspect'])}" if g["positives"] == "top_rated" else None
    return round_robin(select_positives(examples, g["positives"], column), g["limit"])


def make(job: GenerateJob, run: RunConfig, positives) -> None:
    """The negatives of the positives not written yet, then provenance.json marked complete."""
    rows = todo(job, positives)
    finish(job, run, len(positives), write_rows(job, run, rows) if len(rows) else None)


def write_rows(job: GenerateJob, run: RunConfig, rows, path=None) -> dict:
    """The negatives of ``rows`` appended to ``path`` (default negatives.jsonl); the pair loads here."""
    pair = load_pair(run, ["expert", "amateur"])
    prompts, spans = make_prompts(run, rows, pair.tokenizer)
    inputs = pair.encode(prompts, list(rows["text"]), max_length=run.passes.max_length, source_spans=spans)
    return write_negatives(job, run, pair, rows, inputs, path)


def make_parts(job: GenerateJob, run: RunConfig, positives, coordinator: InProcess) -> Outcome:
    """``runtime.shards``: the positives dealt in whole groups, each shard writing
    ``<out>/.shards/s<K>of<N>.jsonl``, then the merge into negatives.jsonl (byte-identical to an unsharded run's)."""
    count = coordinator.count
    place = Place.of_folder(job.folder.path / rundir.SHARDS, count)

    def stored() -> Outcome | None:  # merged (or written unsharded) before: as a finished run
        if not all_written(job, positives):
            return None
        finish(job, run, len(positives), None)
        clean(place)
        return Done({}, None)

    def compute(k: int) -> dict:
        rows = part_rows(job, positives, place, k)
        log.info("cdm generate: shard %d of %d: %d positives to do", k, count, len(rows))
        return {"models": write_rows(job, run, rows, part_file(place, k)) if len(rows) else None}

    def merge() -> Outcome:
        with place.lock():
            if all_written(job, positives):  # another run merged meanwhile
                return Done({}, None)
            got = merge_parts(job, positives, place)
            if isinstance(got, Done):
                finish(job, run, len(positives), got.stats["models"])
                clean(place)
        return got

    place.folder.mkdir(parents=True, exist_ok=True)
    got = runner.run(Work("cdm generate", place, stored, lambda: all_written(job, positives), compute, merge),
                     coordinator)
    with suppress(OSError):  # the shards' folder, once nothing is left in it (the workers' logs keep it)
        place.folder.rmdir()
    return got


def owners(positives, count: int) -> np.ndarray:
    """The shard of each positive: whole groups, largest first, each to the shard with the fewest characters."""
    groups = positives["group"].astype(str).tolist()
    cost: dict[str, int] = {}
    for g, text in zip(groups, positives["text"]):
        cost[g] = cost.get(g, 0) + len(str(text)) + 1
    ranked = sorted(cost, key=lambda g: -cost[g])  # stable: ties keep the table's order
    owner = dict(zip(ranked, deal([cost[g] for g in ranked], count)))
    return np.array([owner[g] for g in groups], dtype=np.int64)


def part_file(place: Place, k: int) -> Path:
    return place.folder / f"s{k:03d}of{place.count:03d}.jsonl"


def finished_lines(path: Path, per_positive: int) -> dict[str, list[str]]:
    """{positive id: its lines} for the positives whose ``per_positive`` negatives are all in ``path``."""
    raw = path.read_text(encoding="utf-8") if path.exists() else ""
    out: dict[str, list[str]] = {}
    for line in raw[:raw.rfind("\n") + 1].splitlines(keepends=True):
        out.setdefault(str(json.loads(line)["source_id"]), []).append(line)
    return {k: v for k, v in out.items() if len(v) == per_positive}


def part_rows(job: GenerateJob, positives, place: Place, k: int):
    """Shard ``k``'s positives whose negatives are neither in negatives.jsonl nor in its own file."""
    n = job.g["n_negatives"]
    done = set(finished_lines(job.negatives, n)) | {r["source_id"] for r in finished_records(part_file(place, k), n)}
    ids = positives["id"].astype(str)
    mine = (owners(positives, place.count) == k) & ~ids.isin(done).to_numpy()
    return positives[mine].reset_index(drop=True)


def all_written(job: GenerateJob, positives) -> bool:
    """negatives.jsonl holds every positive's negatives."""
    have = finished_lines(job.negatives, job.g["n_negatives"])
    return all(str(i) in have for i in positives["id"])


def merge_parts(job: GenerateJob, positives, place: Place) -> Outcome:
    """When every shard is marked: negatives.jsonl, earlier lines first, then the others in the positives'
    order. A positive no file holds unmarks its shard (``Pending`` names it)."""
    marks, count = place.marks(), place.count
    missing = [k for k in range(count) if k not in marks]
    if missing:
        return Pending(missing)
    n = job.g["n_negatives"]
    earlier = finished_lines(job.negatives, n)  # kept first, in their order: as an unsharded run appends
    have: dict[str, list[str]] = {}
    for k in range(count):
        for pid, lines in finished_lines(part_file(place, k), n).items():
            have.setdefault(pid, lines)
    ids = [i for i in positives["id"].astype(str).tolist() if i not in earlier]
    lost = sorted({int(o) for pid, o in zip(positives["id"].astype(str), owners(positives, count))
                   if pid not in earlier and pid not in have})
    for k in lost:
        place.unmark(k)
    if lost:
        return Pending(lost)
    write_atomic(job.negatives, "".join([*(line for lines in earlier.values() for line in lines),
                                         *(line for pid in ids for line in have[pid])]))
    return Done({"models": next((m["models"] for m in marks.values() if m.get("models")), None)}, None)


def clean(place: Place) -> None:
    """The shards' files and marks, once merged."""
    for k in range(place.count):
        part_file(place, k).unlink(missing_ok=True)
        place.unmark(k)
