"""``cscore cdm generate``'s pipeline steps: the positives of a dataset and the pair that writes their
negatives (``cscore.scorers.training.negatives`` writes and resumes them)."""

from __future__ import annotations

from omegaconf import DictConfig

from cscore import rundir
from cscore.cli.pipeline.kinds.shared import load_pair, make_prompts, target_aspect
from cscore.scorers.training.negatives import GenerateJob, finish, select_positives, todo, write_negatives


def positives_of(examples, g: dict):
    """The positives of ``cdm.generate`` (``g``): top_rated ranks each group on the human aspect;
    at most ``limit`` of them, in table order."""
    column = f"{rundir.HUMAN}{target_aspect(examples, g['aspect'])}" if g["positives"] == "top_rated" else None
    positives = select_positives(examples, g["positives"], column)
    return positives.head(g["limit"]) if g["limit"] is not None else positives


def make(job: GenerateJob, run, cfg: DictConfig, positives) -> None:
    """The negatives of the positives not written yet (the pair loads only when some are left),
    then provenance.json marked complete. ``run``: the typed config; ``cfg``: as composed (recorded)."""
    rows = todo(job, positives)
    models = None
    if len(rows):
        pair = load_pair(run, ["expert", "amateur"])
        prompts, spans = make_prompts(run, rows, pair.tokenizer)
        inputs = pair.encode(prompts, list(rows["text"]), max_length=run.runtime.max_length, source_spans=spans)
        models = write_negatives(job, cfg, pair, rows, inputs)
    finish(job, cfg, len(positives), models)
