"""``cscore cdm generate``'s pipeline steps: the positives of a dataset and the pair that writes their
negatives (``cscore.scorers.training.negatives`` writes and resumes them)."""

from __future__ import annotations

from cscore import rundir
from cscore.cli.pipeline.kinds.aspects import target_aspect
from cscore.cli.pipeline.kinds.pair import load_pair
from cscore.cli.pipeline.kinds.prompts import make_prompts
from cscore.scorers.config.run import RunConfig
from cscore.scorers.training.negatives import GenerateJob, finish, select_positives, todo, write_negatives


def positives_of(examples, g: dict):
    """The positives of ``cdm.generate`` (``g``): top_rated ranks each group on the human aspect;
    at most ``limit`` of them, in table order."""
    column = f"{rundir.HUMAN}{target_aspect(examples, g['aspect'])}" if g["positives"] == "top_rated" else None
    positives = select_positives(examples, g["positives"], column)
    return positives.head(g["limit"]) if g["limit"] is not None else positives


def make(job: GenerateJob, run: RunConfig, positives) -> None:
    """The negatives of the positives not written yet (the pair loads only when some are left),
    then provenance.json marked complete. ``run``: the typed config (its ``composed`` is recorded)."""
    rows = todo(job, positives)
    models = None
    if len(rows):
        pair = load_pair(run, ["expert", "amateur"])
        prompts, spans = make_prompts(run, rows, pair.tokenizer)
        inputs = pair.encode(prompts, list(rows["text"]), max_length=run.passes.max_length, source_spans=spans)
        models = write_negatives(job, run, pair, rows, inputs)
    finish(job, run, len(positives), models)
