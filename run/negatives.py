"""``cscore cdm generate``'s pipeline steps: the positives of a dataset and the pair that writes their
negatives (``cscore.training.negatives`` writes and resumes them); ``runtime.shards``: the
positives dealt to the shards (``make_parts``)."""

from __future__ import annotations

import json
import logging
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
    """The positives of ``cdm.generate`` (``g``): top_rated ranks each group on the human aspect;
    at most ``limit`` of them, drawn round-robin across the groups (``round_robin``)."""
    column = f"{rundir.HUMAN}{target_aspect(examples, g['aspect'])}" if g["positives"] == "top_rated" else None
    return round_robin(select_positives(examples, g["positives"], column), g["limit"])


def make(job: GenerateJob, run: RunConfig, positives) -> None:
    """The negatives of the positives not written yet (the pair loads only when some are left),
    then provenance.json marked complete. ``run``: the typed config (the job's ``config``, as composed, is recorded)."""
    rows = todo(job, positives)
    finish(job, run, len(positives), write_rows(job, run, rows) if len(rows) else None)


def write_rows(job: GenerateJob, run: RunConfig, rows, path=None) -> dict:
    """The negatives of ``rows`` appended to ``path`` (default negatives.jsonl); the pair loads here."""
    pair = load_pair(run, ["expert", "amateur"])
    prompts, spans = make_prompts(run, rows, pair.tokenizer)
    inputs = pair.encode(prompts, list(rows["text"]), max_length=run.passes.max_length, source_spans=spans)
    return write_negatives(job, run, pair, rows, inputs, path)


def make_parts(job: GenerateJob, run: RunConfig, positives, coordinator: InProcess) -> Outcome:
    """``runtime.shards``, on the one runner (``runner.run``): the positives dealt in whole groups
    (``owners``), this process's shards each writing ``<out>/.shards/s<K>of<N>.jsonl`` (resumable
    as negatives.jsonl is), then (unless a worker of ``runtime.devices``) the merge: negatives.jsonl
    with every positive's lines in the positives' order, then provenance.json. A positive's negatives
    depend on that positive alone, so the merged file is byte-identical to an unsharded run's."""
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
    try:  # the shards' folder, once nothing is left in it (the workers' logs keep it)
        place.folder.rmdir()
    except OSError:
        pass
    return got


def owners(positives, count: int) -> np.ndarray:
    """The shard of each positive: its group's, the groups (by their texts' characters, largest
    first; ties in table order) each to the shard with the fewest characters so far."""
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
    """{positive id: its lines, as written} for the positives whose ``per_positive`` negatives are
    all in ``path`` (complete lines only; the file is not changed)."""
    raw = path.read_text(encoding="utf-8") if path.exists() else ""
    out: dict[str, list[str]] = {}
    for line in raw[:raw.rfind("\n") + 1].splitlines(keepends=True):
        out.setdefault(str(json.loads(line)["source_id"]), []).append(line)
    return {k: v for k, v in out.items() if len(v) == per_positive}


def part_rows(job: GenerateJob, positives, place: Place, k: int):
    """Shard ``k``'s positives whose negatives are written neither in negatives.jsonl (an earlier
    unsharded run's) nor in its own file (which drops a positive cut off by a kill)."""
    n = job.g["n_negatives"]
    done = set(finished_lines(job.negatives, n)) | {r["source_id"] for r in finished_records(part_file(place, k), n)}
    ids = positives["id"].astype(str)
    mine = (owners(positives, place.count) == k) & ~ids.isin(done).to_numpy()
    return positives[mine].reset_index(drop=True)


def all_written(job: GenerateJob, positives) -> bool:
    """negatives.jsonl holds every positive's negatives (an earlier merge or unsharded run)."""
    have = finished_lines(job.negatives, job.g["n_negatives"])
    return all(str(i) in have for i in positives["id"])


def merge_parts(job: GenerateJob, positives, place: Place) -> Outcome:
    """When every shard is marked: negatives.jsonl, the positives an earlier run wrote there first,
    in its order, then the others in the positives' order (as an unsharded run appends them);
    ``Done`` with the models record a shard kept. A positive no file holds unmarks its shard
    (``Pending`` names it: the runner computes it again where it may)."""
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
    """The shards' files and marks, once merged (the workers' logs stay)."""
    for k in range(place.count):
        part_file(place, k).unlink(missing_ok=True)
        place.unmark(k)
