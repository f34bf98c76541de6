"""What several kinds do the same way: load the model pair, build the scoring prompts, open the
statistics cache, and the token statistics pass with its comparison rows (token methods, and the
pooler and discriminator kinds that score on top of it)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.cli.pipeline.kinds.base import Loaded, MethodKind, Plan, Progress, Scored
from cscore.errors import ConfigError
from cscore.scorers.config.groups import JudgePrompt
from cscore.scorers.config.run import RunConfig

log = logging.getLogger("cscore")


def load_pair(run: RunConfig, needed: list[str]):
    from cscore.scorers.api import ModelPair

    p, rt = run.pair, run.runtime
    assert p.expert.path is not None  # typed() refuses a pair without an expert
    # reuse=True: the jobs of an in-process multirun share the models; weights load on first use,
    # so a job whose statistics are all cached loads none
    if "amateur" not in needed:
        return ModelPair.load(p.expert.path, device=rt.device, dtype=rt.dtype, revision=p.expert.revision, reuse=True)
    pair = ModelPair.load(p.expert.path, p.amateur.path, amateur_early_exit=p.amateur.early_exit,
                          device=rt.device, dtype=rt.dtype, revision=p.expert.revision,
                          amateur_revision=p.amateur.revision, reuse=True)
    if pair.aligned:  # a cross-family pair: only the methods computed on aligned units
        from cscore.scorers.methods import check_aligned

        check_aligned(run.method.name, run.method_given)  # `cscore cdm`: config.yaml's method (token momenta)
    return pair


def model_line(role: str, m) -> str:
    """What a model is and how this job has it (loaded, reused from an earlier job, or pending)."""
    info = m.info
    what = info.get("spec") or info.get("path")
    exit_ = f", early exit after {info['early_exit']} of its layers" if info.get("early_exit") else ""
    root = m.parent or m
    if not root.loaded:
        how = "weights load when first needed"
    elif root.reused:
        how = "in memory from an earlier job of this process"
    else:
        how = f"loaded in {root.load_seconds:.1f}s"
    return f"{role}: {what} ({info.get('class', '?')}, {info.get('layers')} layers{exit_}; {how})"


def make_prompts(run: RunConfig, examples: pd.DataFrame, tokenizer,
                 role: str = "expert") -> tuple[list[str], list[tuple[int, int]]]:
    from cscore.data import prompts

    p = run.prompt
    chat = None
    if p.chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"prompt.chat_template=true but the {role}'s tokenizer has no chat template")

        def chat(text):
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
    return prompts.build(examples, condition=p.condition, templates=p.templates,
                         reference_templates=p.reference_templates, template=run.data.template, chat=chat)


def stats_cache(run: RunConfig):
    """The statistics cache of this run (None when cache.enabled=false)."""
    from cscore.scorers.store.cache import StatsCache

    return StatsCache(run.cache.dir, run.cache.checkpoint_seconds) if run.cache.enabled else None


def plan_variants(run: RunConfig) -> list:
    """The method's variant rows (its own and the comparison rows) from the method section as given."""
    from cscore.cli.pipeline.variants import plan

    return plan(dict(run.method_given), baseline_t=run.baselines.t, rows=list(run.baselines.rows))


def token_plan(run: RunConfig) -> Plan:
    from cscore.cli.pipeline.variants import models_needed

    variants = plan_variants(run)
    temps = sorted({float(t) for t in run.stats.temperatures} | {t for v in variants for t in v.temperatures()})
    return Plan(variants, models_needed(variants), temps)


def token_score(run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress, state: dict) -> Scored:
    """The token statistics pass and every variant that is a function of it alone."""
    from transformers.utils import logging as hf_logging

    from cscore.scorers import methods

    hf_logging.disable_progress_bar()  # per-model "Loading weights" bars: noise in logs
    pair = load_pair(run, plan.models)
    for role, m in pair.models.items():
        log.info(model_line(role, m))
    examples = loaded.examples
    prompt_texts, spans = make_prompts(run, examples, pair.tokenizer)
    # a cross-family amateur renders the prompts with its own tokenizer (its own chat template)
    own = make_prompts(run, examples, pair.amateur.tokenizer, "amateur") if pair.aligned else (None, None)
    rt = run.runtime
    inputs = pair.encode(prompt_texts, list(examples["hypothesis"]), max_length=rt.max_length,
                         source_spans=spans, amateur_prompts=own[0], amateur_spans=own[1])
    if inputs.n_truncated:
        log.warning("%d of %d items had their source truncated to fit runtime.max_length=%d", inputs.n_truncated,
                    len(examples), rt.max_length)
    state["stage"] = "score"
    with progress.live() as factory:
        stats = pair.statistics(inputs=inputs, temperatures=plan.temperatures, token_budget=rt.token_budget,
                                padding_side=rt.padding_side, models=plan.models, progress=factory,
                                cache=stats_cache(run), prefix_sharing=rt.prefix_sharing)
    table = examples.copy()
    table["prompt"] = [it.prompt for it in inputs.items]
    table["prompt_tokens"] = [len(it.prompt_ids) for it in inputs.items]
    table["hypothesis_tokens"] = [len(it.hyp_ids) for it in inputs.items]
    table["truncated"] = [it.truncated for it in inputs.items]
    skip_first = bool(plan.variants[-1].params.get("skip_first", False))  # the method's convention
    for model in plan.models:
        table[f"{rundir.N_SCORED}{model}"] = scored_tokens(stats, skip_first, model)
        table[f"{rundir.MEAN_LOGP}{model}"] = stats.score("single", model=model, t=1.0, norm="mean",
                                                          skip_first=skip_first, clamp=None)
    for v in plan.variants:
        if methods.get(v.method).kind != "token":
            continue  # its kind's score step adds that column after this one (a trained pooler)
        table[f"{rundir.SCORE}{v.name}"] = stats.score_params(v.typed)
    return Scored(table, stats, pair.models, inputs.n_truncated, {"units": "aligned"} if stats.aligned else {})


def scored_tokens(stats, skip_first: bool, model: str | None = None) -> np.ndarray:
    from cscore.scorers.methods.common import n_scored

    own = stats.stats.get(model) or next(iter(stats.stats.values()))  # a cross-family pair: each its own tokens
    return n_scored(own.offsets, skip_first)


def check_aspect(examples, aspect: str) -> None:
    from cscore.registry import suggest

    have = [c.removeprefix(rundir.HUMAN) for c in rundir.human_columns(examples.columns)]
    if aspect not in have:
        raise ConfigError(f"method.aspect={aspect} but this data has no human.{aspect}{suggest(aspect, have)}; "
                          f"it has {', '.join(have) or 'no human scores'}")


def target_aspect(table, aspect: str | None) -> str:
    """The human aspect to train on: the one asked for, else the only one, else ``overall``."""
    from cscore.registry import suggest

    have = [c.removeprefix(rundir.HUMAN) for c in rundir.human_columns(table.columns)]
    if aspect is None:
        if len(have) == 1:
            return have[0]
        if "overall" in have:
            return "overall"
        raise ConfigError(f"the pooler trains on one human aspect and this data has {', '.join(have) or 'none'}: "
                          "set method.aspect=<one of them>")
    if aspect not in have:
        raise ConfigError(f"method.aspect={aspect} but this data has no human.{aspect}{suggest(aspect, have)}; "
                          f"it has {', '.join(have) or 'no human scores'}")
    return aspect


def judge_prompt(run: RunConfig) -> JudgePrompt:
    """The judge_prompt group a judge method composes (a ConfigError when a config has none)."""
    if run.judge_prompt is None:
        raise ConfigError(f"method={run.method.name} needs the judge_prompt group (judge_prompt=geval | released)")
    return run.judge_prompt


def judge_setup(run: RunConfig, loaded: Loaded, plan: Plan):
    """What both judge kinds start with: (method params, examples, the loaded pair, judge prompt config)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    params = run.params
    check_aspect(loaded.examples, params["aspect"])
    pair = load_pair(run, plan.models)
    for role, m in pair.models.items():
        log.info(model_line(role, m))
    return params, loaded.examples, pair, asdict(judge_prompt(run))


def fit_judge_prompt(tok, i: int, text: str, span, room: int) -> tuple[str, list[int], bool]:
    """(text, token ids, whether it was cut) of judge prompt ``i``: its source cut at a word
    boundary when the prompt has more than ``room`` tokens; an InputError when even no source
    leaves it too long."""
    from cscore.scorers.engine.tokenize import InputError, fit_source, text_ids

    ids = text_ids(tok, text)
    if len(ids) <= room:
        return text, ids, False
    fitted = fit_source(tok, text, span, room)
    if fitted is None:
        raise InputError(f"item {i}: the judge prompt without its source still has more than {room} tokens; "
                         "raise runtime.max_length")
    return fitted[0], fitted[1], True


INVALID_KEYS = ("No Pred", "Below", "Above", "List", "Echo")  # judge_parse's statuses other than "ok"


def invalid_counts(status) -> dict[str, int]:
    """metrics.json → judge.invalid.<row>: how many outputs got each status other than "ok", and n."""
    status = np.asarray(status, dtype=object)
    return {**{s: int((status == s).sum()) for s in INVALID_KEYS}, "n": int(status.size)}


def parse_changes(texts, scores, statuses, lo: int, hi: int, rule: str, *, strip: bool = True) -> dict:
    """metrics.json → judge.parse_changes.<row>: ``{"rule": the other rule, "outputs": how many
    outputs it reads differently (score or status)}``. ``strip``: the texts are decoded outputs
    (``judge_parse.read_score``); False: already the released response text (the released kind)."""
    from cscore.scorers.judge.parse import PARSERS, read_score

    other = next(r for r in PARSERS if r != rule)
    changed = 0
    for text, score, status in zip(texts, scores, statuses):
        got = read_score(text, lo, hi, other) if strip else PARSERS[other](text, lo, hi)
        changed += got != (float(score), status)
    return {"rule": other, "outputs": int(changed)}


class JudgeKind(MethodKind):
    """What the two judge kinds share: the judge prompts in the signature, the counts of judge
    outputs that gave no score in range (their ``judge`` section of metrics.json) in the summary."""

    sections: ClassVar[tuple[str, ...]] = ("judge",)

    def signature_fields(self, run: RunConfig) -> dict[str, Any]:
        return {"pair": run.pair.name, "prompt": f"judge/{judge_prompt(run).name}"}

    def summary_lines(self, metrics: dict) -> list[tuple[str, str]]:
        out = []
        judge = metrics.get("judge") or {}
        for name, counts in judge.get("invalid", {}).items():
            bad = {s: k for s, k in counts.items() if s not in ("n", "List", "Echo") and k}
            if bad:
                what = ", ".join(f"{k} {s}" for s, k in bad.items())
                out.append(("yellow", f"{name}: {sum(bad.values())} of {counts['n']} judge outputs gave no score "
                                      f"in range ({what}; per row in {rundir.PARSE}{name})"))
            if counts.get("List"):
                out.append(("yellow", f"{name}: {counts['List']} of {counts['n']} judge outputs read as a score from "
                                      f"list numbering (\"1. The summary...\", as the released parse does; "
                                      f"{rundir.PARSE}{name} = List)"))
            if counts.get("Echo"):
                every = "every judge output" if counts["Echo"] == counts["n"] else \
                    f"{counts['Echo']} of {counts['n']} judge outputs"
                out.append(("yellow", f"{name}: {every} echoed the prompt's range (\"1-5\"), read as its minimum "
                                      f"as the parse rule does, not a judgement ({rundir.PARSE}{name} = Echo)"))
        for name, change in judge.get("parse_changes", {}).items():
            if change.get("outputs"):
                n = judge.get("invalid", {}).get(name, {}).get("n", "?")
                out.append(("dim", f"{name}: method.parse={change['rule']} would read {change['outputs']} of {n} "
                                   "outputs otherwise (score or status)"))
        return out


def grid_points(run: RunConfig) -> list[tuple[float, float]]:
    """The (λ, t) of the run's sweep siblings that differ from it in ``method.lam`` / ``method.t``
    only (``RunConfig.sweep_others``); [] when ``runtime.share_grid`` is off."""
    if not run.runtime.share_grid:
        return []
    own = {"method.lam": run.params["lam"], "method.t": run.params["t"]}
    out = []
    for diff in run.sweep_others:
        if not diff or not set(diff) <= own.keys():
            continue
        try:
            point = {**own, **{k: float(v) for k, v in diff.items()}}
        except ValueError:  # an interpolation or another form: that job decodes for itself
            continue
        if point["method.lam"] >= 0 and point["method.t"] > 0:
            out.append((float(point["method.lam"]), float(point["method.t"])))
    return out
