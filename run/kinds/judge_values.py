"""The judge kind's score step under ``method.decode=values`` (``scorers/judge/values.py``): each model scores
every value of the range after its own rendering of the judge prompt, through the token statistics pass."""

from __future__ import annotations

import logging

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.run.kinds.base import RunState, Scored
from cscore.run.kinds.pair import stats_cache
from cscore.run.kinds.prompts import fit_judge_prompt, say_truncated
from cscore.scorers.store.runner import InProcess, Pending

log = logging.getLogger(__name__)


def value_items(tok, texts, spans, values: list[int], max_length: int):
    """One ``EncodedItem`` per (prompt, value), item-major; each prompt cut once to fit with the longest value."""
    from cscore.scorers.engine.tokenize import EncodedItem
    from cscore.scorers.judge.parse import score_tokens

    ids_of = score_tokens(tok, values[0], values[-1])
    room = max_length - max(len(ids) for ids in ids_of.values())
    fitted = [fit_judge_prompt(tok, i, text, span, room) for i, (text, span) in enumerate(zip(texts, spans))]
    items = [EncodedItem(text, ids, list(ids_of[v]), cut) for text, ids, cut in fitted for v in values]
    return items, [cut for _, _, cut in fitted], {str(v): list(ids_of[v]) for v in values}


def value_inputs(run: RunConfig, pair, examples, jp: dict, p, values: list[int]):
    """(ScoringInput, per role: truncated flags and value token ids): each tokenizer renders the judge prompts
    with its chat template (none: the plain text); a shared tokenizer: the expert's prompts."""
    from cscore.data import judge_prompts
    from cscore.scorers.api import ScoringInput

    lo, hi = p.score_range
    built = {}
    for role in ("expert", "amateur") if pair.aligned else ("expert",):
        tok = pair.models[role].tokenizer
        templated = getattr(tok, "chat_template", None)
        chat = judge_prompts.chat_renderer(tok, jp["role"], jp["generation_prompt"]) if templated else None
        if chat is None:
            log.warning("the %s's tokenizer has no chat template: its judge prompts are the plain prompt text", role)
        texts, spans = judge_prompts.build(examples, jp, aspect=p.aspect, lo=lo, hi=hi, chat=chat)
        built[role] = value_items(tok, texts, spans, values, run.passes.max_length)
    hyps = [str(v) for _ in range(len(examples)) for v in values]
    inputs = ScoringInput(built["expert"][0], built["amateur"][0] if pair.aligned else None,
                          hyps if pair.aligned else None)
    return inputs, {role: (got[1], got[2]) for role, got in built.items()}


def score_values(run: RunConfig, setup: tuple, plan, progress, state: RunState,
                 coordinator: InProcess) -> Scored | Pending:
    """``setup``: what ``JudgeKind.setup`` gave; ``Pending`` while a part of the split pass is missing."""
    from cscore.scorers.api import PassRequest
    from cscore.scorers.engine.passes import per_item
    from cscore.scorers.judge import values as judge_values

    p, examples, pair, jp = setup
    lo, hi = p.score_range
    values = list(range(lo, hi + 1))
    inputs, per_role = value_inputs(run, pair, examples, jp, p, values)
    truncated = [any(flags) for flags in zip(*(f for f, _ in per_role.values()))]
    say_truncated(sum(truncated), len(examples), run.passes.max_length, "judge prompts")
    state["stage"] = "score"
    with progress.live() as factory:
        stats = pair.run(inputs, PassRequest(judge_values.temperatures(p.t), plan.models, run.passes, stats_cache(run),
                                             coordinator, per_item(factory, len(values))))
    if isinstance(stats, Pending):
        return stats
    n = len(values)
    a = judge_values.value_logp(stats.stats["expert"], n)
    b = {t: judge_values.value_logp(stats.stats["amateur"], n, t) for t in {1.0, float(p.t)}}
    first = inputs.items[::n]
    table = examples.assign(prompt=[it.prompt for it in first], prompt_tokens=[len(it.prompt_ids) for it in first],
                            truncated=truncated)
    for v in plan.variants:
        got = judge_values.judge(a, b, values, who=v.who, lam=p.lam, t=p.t, alpha=p.alpha)
        table[f"{rundir.SCORE}{v.name}"] = got["score"]
        table[f"{rundir.SCORE}{v.name}_expected"] = got["expected"]
        table[f"{rundir.PARSE}{v.name}"] = got["status"]
        table[f"{rundir.OUTPUT}{v.name}"] = got["text"]
    invalid = {v.name: {"No Pred": 0, "Below": 0, "Above": 0, "n": len(examples)} for v in plan.variants}
    info = {"score_range": [lo, hi], "aspect": p.aspect, "lam": p.lam, "t": p.t,
            "c": p.lam / p.t, "alpha": p.alpha, "decode": "values", "invalid": invalid,
            "judge_prompt": jp.get("name"), "value_tokens": per_role["expert"][1],
            "chat_template": {role: bool(getattr(m.tokenizer, "chat_template", None))
                              for role, m in pair.models.items()}}
    if pair.aligned:  # each model writes the values in its own tokens
        info["value_tokens_amateur"] = per_role["amateur"][1]
    metrics = {"judge": info, **({"units": "values"} if pair.aligned else {})}
    return Scored(table, stats, pair.models, int(sum(truncated)), metrics=metrics)
