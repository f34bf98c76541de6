"""The token statistics kind's steps (``TokenKind``; the pooler and discriminator kinds build on them): one
forward pass per model keeping per-token statistics (cached), then every variant that is a function of them."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.run.kinds.base import Loaded, MethodKind, Plan, Progress, RunModel, RunState, Scored
from cscore.run.kinds.pair import load_pair, model_line, stats_cache
from cscore.run.kinds.prompts import make_prompts, say_truncated
from cscore.scorers.store.runner import Pending

if TYPE_CHECKING:
    from cscore.scorers.api import PairStatistics, ScoringInput
    from cscore.scorers.store.runner import InProcess

log = logging.getLogger(__name__)


class TokenKind(MethodKind):
    """Plan: the rows, the models they read, the temperatures; score: the token pass and every row of it."""

    def plan(self, run: RunConfig) -> Plan:
        from cscore.run.variants import models_needed

        variants = self.rows(run)
        temps = sorted({float(t) for t in run.stats.temperatures} | {t for v in variants for t in v.temperatures()})
        return Plan(variants, models_needed(variants), temps)

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        got = self.token_pass(run, loaded, plan, progress, state, coordinator)
        return got if isinstance(got, Pending) else got[0]

    def kept(self, run: RunConfig, loaded: Loaded, plan: Plan) -> Scored | None:
        """The token pass read through the cache's front index (``kept_pass``), for a kind that does no more."""
        from cscore.run.kinds import kept_pass

        if type(self).score is not TokenKind.score:  # a kind that does more (a pooler, a discriminator)
            return None
        got = kept_pass.read(run, loaded.examples, plan)
        if got is None:
            return None
        inputs, stats, models, notes = got
        for line in notes:  # what the pair said when it was loaded (an amateur not the smaller)
            log.warning(line)
        for role, m in models.items():
            log.info(model_line(role, m))
        log.info("%d items encoded as the run that cached their statistics encoded them (no tokenizer or model "
                 "loaded)", len(loaded.examples))
        say_truncated(inputs.n_truncated, len(loaded.examples), run.passes.max_length)
        return self.scored(loaded.examples, plan, inputs, stats, models)

    def token_pass(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
                   state: RunState, coordinator: InProcess) -> tuple[Scored, PairStatistics] | Pending:
        """(what ``score`` gives, the statistics), or ``Pending`` while a part of the split pass is missing."""
        from transformers.utils import logging as hf_logging

        from cscore.run.kinds import kept_pass
        from cscore.scorers.api import PassRequest

        hf_logging.disable_progress_bar()  # per-model "Loading weights" bars: noise in logs
        pair = load_pair(run, plan.models)
        for role, m in pair.models.items():
            log.info(model_line(role, m))
        examples = loaded.examples
        log.info("tokenizing %d items (prompts and hypotheses)", len(examples))  # before the pass's plan line
        prompt_texts, spans = make_prompts(run, examples, pair.tokenizer)
        # a cross-family amateur renders the prompts with its own tokenizer (its own chat template)
        own = make_prompts(run, examples, pair.amateur.tokenizer, "amateur") if pair.aligned else (None, None)
        opts = kept_pass.pass_options(run, plan)
        inputs = pair.encode(prompt_texts, list(examples["hypothesis"]), max_length=opts.max_length,
                             source_spans=spans, amateur_prompts=own[0], amateur_spans=own[1])
        say_truncated(inputs.n_truncated, len(examples), opts.max_length)
        state["stage"] = "score"
        with progress.live() as factory:
            stats = pair.run(inputs, PassRequest(plan.temperatures, plan.models, opts, stats_cache(run),
                                                 coordinator, factory))
        if isinstance(stats, Pending):
            return stats
        kept_pass.write(run, examples, plan, pair, inputs, stats)  # the runs after this one read it without torch
        return self.scored(examples, plan, inputs, stats, pair.models), stats

    def scored(self, examples: pd.DataFrame, plan: Plan, inputs: ScoringInput, stats: PairStatistics,
               models: Mapping[str, RunModel]) -> Scored:
        """The examples with their prompt, token counts, truncation and every token variant's score."""
        from cscore.scorers import methods
        from cscore.scorers.methods.common import n_scored

        items = inputs.items
        table = examples.assign(prompt=[it.prompt for it in items], prompt_tokens=[len(it.prompt_ids) for it in items],
                                hypothesis_tokens=[len(it.hyp_ids) for it in items],
                                truncated=[it.truncated for it in items])
        skip_first = bool(getattr(plan.variants[-1].params, "skip_first", False))  # the method's convention
        for model in plan.models:
            own = stats.stats.get(model) or next(iter(stats.stats.values()))  # a cross-family pair: its own tokens
            table[f"{rundir.N_SCORED}{model}"] = n_scored(own.offsets, skip_first)
            table[f"{rundir.MEAN_LOGP}{model}"] = stats.score("single", model=model, t=1.0, norm="mean",
                                                              skip_first=skip_first, clamp=None)
        for v in plan.variants:
            if methods.get(v.method).kind != "token":
                continue  # its kind's score step adds that column after this one (a trained pooler)
            table[f"{rundir.SCORE}{v.name}"] = stats.score_params(v.params)
        units = {"units": "aligned"} if stats.aligned else {}
        return Scored(table, stats, dict(models), inputs.n_truncated, units)
