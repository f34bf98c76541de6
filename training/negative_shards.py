"""``cscore cdm generate`` sharded (``runtime.shards``): the positives are dealt to N shards in whole
groups (``owners``, by the shard plan ``store.plan.deal``); shard K writes its positives' negatives to
``<out>/.shards/s<K>of<N>.jsonl`` (resumable as negatives.jsonl is) and leaves a mark when done (the
folder, marks and locks: ``meeting.Place.of_folder``); once every shard is marked, the
merge writes negatives.jsonl with every positive's lines in the positives' order, then
provenance.json. A positive's negatives are a function of that positive alone (seeded by its id,
generated at batch size 1), so the merged file is byte-identical to an unsharded run's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cscore.files import write_atomic
from cscore.scorers.store.meeting import Place
from cscore.scorers.store.plan import deal
from cscore.training.negatives import GenerateJob, finished_records

SHARD_DIR = ".shards"  # under the output directory: the shards' files, marks and (runtime.devices) logs


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


def folder(job: GenerateJob) -> Path:
    return job.folder.path / SHARD_DIR


def place(job: GenerateJob, count: int) -> Place:
    return Place.of_folder(folder(job), count)


def shard_file(job: GenerateJob, k: int, count: int) -> Path:
    return folder(job) / f"s{k:03d}of{count:03d}.jsonl"


def finished_lines(path: Path, per_positive: int) -> dict[str, list[str]]:
    """{positive id: its lines, as written} for the positives whose ``per_positive`` negatives are
    all in ``path`` (complete lines only; the file is not changed)."""
    raw = path.read_text(encoding="utf-8") if path.exists() else ""
    out: dict[str, list[str]] = {}
    for line in raw[:raw.rfind("\n") + 1].splitlines(keepends=True):
        out.setdefault(str(json.loads(line)["source_id"]), []).append(line)
    return {k: v for k, v in out.items() if len(v) == per_positive}


def shard_rows(job: GenerateJob, positives, k: int, count: int):
    """Shard ``k``'s positives whose negatives are written neither in negatives.jsonl (an earlier
    unsharded run's) nor in its own file (which drops a positive cut off by a kill)."""
    n = job.g["n_negatives"]
    done = set(finished_lines(job.negatives, n)) | {r["source_id"] for r in
                                                   finished_records(shard_file(job, k, count), n)}
    ids = positives["id"].astype(str)
    mine = (owners(positives, count) == k) & ~ids.isin(done).to_numpy()
    return positives[mine].reset_index(drop=True)


def shard_lock(job: GenerateJob, k: int, count: int):
    return place(job, count).shard_lock(k)


def merge_lock(job: GenerateJob, count: int):
    return place(job, count).shard_lock()


def mark_done(job: GenerateJob, k: int, count: int, models: dict | None) -> None:
    place(job, count).mark(k, {"models": models})


def is_done(job: GenerateJob, k: int, count: int) -> bool:
    return k in place(job, count).marks()


def all_written(job: GenerateJob, positives) -> bool:
    """negatives.jsonl holds every positive's negatives (an earlier merge or unsharded run)."""
    have = finished_lines(job.negatives, job.g["n_negatives"])
    return all(str(i) in have for i in positives["id"])


def merge(job: GenerateJob, positives, count: int) -> tuple[list[int], dict | None]:
    """Under the merge lock: when every shard is marked, negatives.jsonl: the positives an earlier
    run wrote there, in its order, then the others in the positives' order (as an unsharded run
    appends them). Returns (the shards missing, the models
    record a shard kept). A positive no file holds unmarks its shard (it is reported missing)."""
    marks = place(job, count).marks()
    missing = [k for k in range(count) if k not in marks]
    if missing:
        return missing, None
    n = job.g["n_negatives"]
    earlier = finished_lines(job.negatives, n)  # kept first, in their order: as an unsharded run appends
    have: dict[str, list[str]] = {}
    for k in range(count):
        for pid, lines in finished_lines(shard_file(job, k, count), n).items():
            have.setdefault(pid, lines)
    ids = [i for i in positives["id"].astype(str).tolist() if i not in earlier]
    lost = sorted({int(o) for pid, o in zip(positives["id"].astype(str), owners(positives, count))
                   if pid not in earlier and pid not in have})
    for k in lost:
        place(job, count).unmark(k)
    if lost:
        return lost, None
    write_atomic(job.negatives, "".join([*(line for lines in earlier.values() for line in lines),
                                         *(line for pid in ids for line in have[pid])]))
    models = next((m["models"] for m in marks.values() if m.get("models")), None)
    return [], models


def clean(job: GenerateJob, count: int) -> None:
    """The shards' files and marks, once merged (the workers' logs stay)."""
    for k in range(count):
        shard_file(job, k, count).unlink(missing_ok=True)
        place(job, count).unmark(k)


def tidy(job: GenerateJob) -> None:
    """Remove the shards' folder once nothing is left in it (the workers' logs keep it)."""
    try:
        folder(job).rmdir()
    except OSError:
        pass
