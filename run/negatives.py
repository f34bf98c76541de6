"""``cscore cdm generate``'s pipeline steps: the positives of a dataset and the pair that writes their
negatives (``cscore.training.negatives`` writes and resumes them)."""

from __future__ import annotations

import logging

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.run.kinds.aspects import target_aspect
from cscore.run.kinds.pair import load_pair
from cscore.run.kinds.prompts import make_prompts
from cscore.scorers.store.coordinator import InProcess
from cscore.training import negative_shards as shards
from cscore.training.negatives import GenerateJob, finish, round_robin, select_positives, todo, write_negatives

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


def make_sharded(job: GenerateJob, run: RunConfig, positives, sharding: InProcess) -> list[int]:
    """``runtime.shards``: this process's shards (``sharding.todo()``, the job's coordinator: each under
    its own lock, resuming from its own file, marked when done), then (unless a worker of ``runtime.devices``)
    the merge into negatives.jsonl and provenance.json. Returns the shards still missing."""
    assert sharding.on
    count = sharding.count
    if shards.all_written(job, positives):  # merged (or written unsharded) before: as a finished run
        finish(job, run, len(positives), None)
        shards.clean(job, count)
        shards.tidy(job)
        return []
    job.folder.path.mkdir(parents=True, exist_ok=True)
    for k in sharding.todo():
        with shards.shard_lock(job, k, count):
            if shards.is_done(job, k, count):
                continue
            rows = shards.shard_rows(job, positives, k, count)
            log.info("cdm generate: shard %d of %d: %d positives to do", k, count, len(rows))
            models = write_rows(job, run, rows, shards.shard_file(job, k, count)) if len(rows) else None
            shards.mark_done(job, k, count, models)
    if not sharding.merge:
        return shards.place(job, count).missing()
    with shards.merge_lock(job, count):
        if shards.all_written(job, positives):  # another run merged meanwhile
            return []
        missing, models = shards.merge(job, positives, count)
        if not missing:
            finish(job, run, len(positives), models)
            shards.clean(job, count)
    shards.tidy(job)
    return missing
