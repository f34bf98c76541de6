"""The judge kind (``kind = "judge"``: cd_judge): one judge pass over the rendered judge prompts (cached), then
every row (the method, the main model alone, the assistant alone) a function of the kept statistics."""

from __future__ import annotations

import logging
import time
from typing import Any

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.errors import ConfigError
from cscore.progress import Progress
from cscore.run.kinds.base import REGISTRY, Loaded, Passes, Plan, RunState, Scored
from cscore.run.kinds.judging import JudgeKind, grid_points, invalid_counts, parse_changes
from cscore.run.kinds.pair import stats_cache
from cscore.run.kinds.prompts import fit_judge_prompt, judge_prompt, say_truncated
from cscore.scorers.store.runner import InProcess, PassReport, Pending, stop_early

log = logging.getLogger(__name__)


def encode_contexts(tokenizer, texts, spans, prefixes, max_length: int):
    """(texts, contexts, truncated): each judge prompt cut to fit with the longest continuation, then those."""
    room = max_length - max((len(p) for p in prefixes), default=0)
    fitted = [fit_judge_prompt(tokenizer, i, text, span, room) for i, (text, span) in enumerate(zip(texts, spans))]
    contexts = []  # each prompt, then the prompt with each continuation prefix
    for _, ids, _ in fitted:
        contexts += [ids, *(ids + list(p) for p in prefixes)]
    return [text for text, _, _ in fitted], contexts, [cut for _, _, cut in fitted]


def judge_statistics(run: RunConfig, pair, contexts, scale, coordinator: InProcess, progress=None):
    """(statistics, report, cache key) of the judge pass through the statistics cache, or ``Pending`` (a part
    of a split pass missing). ``scale``: the ``judge.Scale`` of the range."""
    from cscore.scorers.judge import judge
    from cscore.scorers.judge.stats import CHAIN_CS, CHAIN_FORMAT, FORMAT, JudgeStats
    from cscore.scorers.models.identity import model_identity
    from cscore.scorers.store.cache import ids_digest, stats_key

    main, asst = pair.expert, pair.amateur
    early = asst.parent is main
    pad_id = pair.tokenizer.pad_token_id or 0  # None: 0
    opts = run.passes

    def compute(checkpoint=None):
        return judge.compute(main.model, contexts, scale, asst=asst.exit_layer if early else asst.model,
                             pad_id=pad_id, progress=progress, options=opts, checkpoint=checkpoint)

    if asst.parent is not None and not early:
        raise ConfigError("the judge's assistant must be a whole model or an early exit of the main model")
    start = time.perf_counter()
    if not run.cache.enabled:
        stats, report = compute()
        report.fetch_seconds = time.perf_counter() - start
        return stats, report, None

    cache = stats_cache(run)
    parts = {"kind": "judge", "judge_format": FORMAT, "main": model_identity(main), "asst": model_identity(asst),
             "dtype": str(main.dtype), "device": main.device.type, "ids": ids_digest([(c, []) for c in contexts]),
             "values": list(scale.values), "value_ids": [list(v) for v in scale.value_ids],
             # packed rows batch differently (float32 rounding): a shared key says so; unshared keys unchanged
             **opts.key_parts(shared=opts.prefix_sharing)}
    if scale.digit_ids is not None:  # one-token ranges: keys unchanged
        parts["chain"] = {"format": CHAIN_FORMAT, "digits": scale.digit_ids, "c": list(CHAIN_CS)}
    if coordinator.on:
        got = judge.first_step(cache, parts, scale, compute, (main, asst), coordinator)
        if isinstance(got, Pending):
            return got.named("judge")
        stats, report = got.stats["judge"], got.report
    else:
        done: dict = {}

        def compute_entry(key: str):
            stats, done["report"] = compute()
            return {"judge": stats}, {"models": [f"main: {main.name}", f"asst: {asst.name}"],
                                      "report": done["report"].record()}

        entry, meta = cache.get_or_compute(parts, compute_entry, JudgeStats)
        stats, report = entry["judge"], PassReport.of_entry(meta) if meta is not None else done["report"]
    report.fetch_seconds = time.perf_counter() - start
    return stats, report, stats_key(parts)


def decoded_texts(run: RunConfig, pair, judged: tuple, prompts, plan, factory,
                  coordinator: InProcess) -> tuple[dict, list, dict] | Pending:
    """({row: its decoded text per prompt}, the sweep's other (λ, t) points decoded too, {"decode": its report})
    under method.decode=greedy, else ({}, [], {}); ``Pending`` while a part of a split decode is missing.
    ``judged``: what ``judge_statistics`` gave."""
    p: Any = run.method  # cd_judge's Params
    if p.decode != "greedy":
        return {}, [], {}
    stats, report, key = judged
    from cscore.scorers.judge.decode import Paths, greedy_paths, path_text, rule_of

    c = p.lam / p.t
    rules = {v.name: rule_of(v.who, c) for v in plan.variants}
    grid = grid_points(run) if key and any(v.who == "contrast" for v in plan.variants) else []
    extra = [rule_of("contrast", lam / t) for lam, t in grid]
    timing: dict = {}
    start = time.perf_counter()
    how = Paths(p.alpha, p.max_new_tokens, judge_key=key, stop=None if p.full_output else p.parse,
                coordinator=coordinator, adopt=not report.cached, extra_rules=extra)
    paths = greedy_paths(pair, stats, prompts, list(rules.values()), how, cache=stats_cache(run) if key else None,
                         progress=factory("decode", len(prompts)) if factory else None, timing=timing)
    if isinstance(paths, Pending):
        return paths
    also = [[lam, t] for (lam, t), rule in zip(grid, extra) if rule in paths and rule not in rules.values()]
    tok = pair.tokenizer
    # tokens: the prompts (run again to build the KV cache) and the decoded tokens of this run's rows
    tokens = sum(len(p) for p in prompts) + sum(len(x) for rule in set(rules.values()) for x in paths[rule])
    decode = PassReport(timing["seconds"], tokens, tokens, len(prompts), cached=timing["cached"],
                        fetch_seconds=time.perf_counter() - start, shared=timing["call"]).adopt(timing.get("merged"))
    return {name: [path_text(tok, p) for p in paths[rule]] for name, rule in rules.items()}, also, {"decode": decode}


def score_rows(run: RunConfig, stats, plan, decoded: dict, table) -> tuple[dict, dict]:
    """Each row's score, expected score, parse status and text into ``table``; (invalid counts, parse changes)."""
    from cscore.scorers.methods.cd_judge import judge

    p: Any = run.method  # cd_judge's Params
    lo, hi = p.score_range
    invalid, changes = {}, {}
    for v in plan.variants:
        got = judge(stats, who=v.who, lam=p.lam, t=p.t, alpha=p.alpha, score_range=[lo, hi],
                    texts=decoded.get(v.name), parse=p.parse)
        table[f"{rundir.SCORE}{v.name}"] = got["score"]
        table[f"{rundir.SCORE}{v.name}_expected"] = got["expected"]
        table[f"{rundir.PARSE}{v.name}"] = got["status"]
        table[f"{rundir.OUTPUT}{v.name}"] = got["text"]
        invalid[v.name] = invalid_counts(got["status"])
        changes[v.name] = parse_changes(got["text"], got["score"], got["status"], lo, hi, p.parse)
    return invalid, changes


def judge_passes(run: RunConfig, pair, plan, progress: Progress, contexts, scale,
                 coordinator: InProcess) -> tuple | Pending:
    """The judge pass, then its rows' greedy decode: (statistics, the pass's report, the decoded texts, the grid
    points decoded too, the decode's report), or ``Pending`` (a part missing, or ``runner.stop_early``).
    ``scale``: the ``judge.Scale`` of the range."""
    from cscore.scorers.engine.passes import per_item

    step = 1 + len(scale.prefixes)  # each item's contexts: its prompt, then the prompt with each continuation prefix
    with progress.live() as factory:
        got = judge_statistics(run, pair, contexts, scale, coordinator,
                               progress=per_item(factory, step)("judge", len(contexts)) if factory else None)
        if isinstance(got, Pending):
            return got
        stats, report, key = got
        texts = decoded_texts(run, pair, got, contexts[::step], plan, factory, coordinator)
    if isinstance(texts, Pending):
        return texts
    decoded, also, decode_report = texts
    stop = stop_early(coordinator, [report, *decode_report.values()])
    return stop if stop is not None else (stats, report, decoded, also, decode_report)


@REGISTRY
class Judge(JudgeKind):
    name = "judge"
    sections = ("judge", "units")  # units: "values" for a cross-family pair (method.decode=values)

    def plan(self, run: RunConfig) -> Plan:
        decode = run.method.decode  # type: ignore[attr-defined]  # cd_judge's Params
        if decode in ("first_token", "values") and not judge_prompt(run).generation_prompt:
            raise ConfigError(f"method.decode={decode} reads the token after the prompt, but judge_prompt="
                              f"{judge_prompt(run).name} has no generation prompt (its first token is the "
                              "assistant header, not a score): use method.decode=greedy, which skips special tokens")
        plan = super().plan(run)
        plan.extra_scores = [f"{v.name}_expected" for v in plan.variants]
        return plan

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        from cscore.data import judge_prompts
        from cscore.scorers.judge.parse import continuation_prefixes, digit_tokens, score_tokens

        if run.method.decode == "values":  # type: ignore[attr-defined]  # the contrast over the range's values
            from cscore.run.kinds.judge_values import score_values

            return score_values(run, self.setup(run, loaded, plan), plan, progress, state, coordinator)
        p, examples, pair, jp = self.setup(run, loaded, plan)
        lo, hi = p.score_range
        tok = pair.tokenizer
        chat = judge_prompts.chat_renderer(tok, jp["role"], jp["generation_prompt"])
        texts, spans = judge_prompts.build(examples, jp, aspect=p.aspect, lo=lo, hi=hi, chat=chat)
        tokens = score_tokens(tok, lo, hi)
        values = list(range(lo, hi + 1))
        value_ids = [tuple(tokens[v]) for v in values]
        prefixes = continuation_prefixes(tokens)
        kept, contexts, truncated = encode_contexts(tok, texts, spans, prefixes, run.passes.max_length)
        n_truncated = int(sum(truncated))
        say_truncated(n_truncated, len(examples), run.passes.max_length, "judge prompts")
        state["stage"] = "score"
        from cscore.scorers.judge.judge import Scale  # torch: after the pair loaded

        # digits: the chain arrays where some value is more than one token
        scale = Scale(values, value_ids, prefixes, len(examples), lambda t: tok.decode([t]),
                      digit_tokens(tok) if prefixes else None)
        got = judge_passes(run, pair, plan, progress, contexts, scale, coordinator)
        if isinstance(got, Pending):
            return got
        stats, report, decoded, also, decode_report = got
        table = examples.assign(prompt=kept, prompt_tokens=[len(c) for c in contexts[::1 + len(prefixes)]],
                                truncated=truncated)
        invalid, changes = score_rows(run, stats, plan, decoded, table)
        sizes = stats.front_sizes
        judge_info = {"score_range": [lo, hi], "aspect": p.aspect, "lam": p.lam, "t": p.t,
                      "c": p.lam / p.t, "alpha": p.alpha, "decode": p.decode,
                      "max_new_tokens": p.max_new_tokens, "full_output": p.full_output,
                      "parse": p.parse, "invalid": invalid, "parse_changes": changes,
                      "judge_prompt": jp.get("name"), "grid_decoded_too": also,
                      "value_tokens": {str(v): list(ids) for v, ids in zip(values, value_ids)},
                      "continuation_prefixes": [list(x) for x in prefixes],
                      "kept_tokens_per_context": {"mean": float(sizes.mean()), "max": int(sizes.max()),
                                                  "vocabulary": stats.vocab}}
        # why a row's expected score is NaN: a multi-token range at a c off the kept grid
        notes = {v.name: stats.expected_note(v.who, p.lam / p.t) for v in plan.variants}
        missing = {name: note for name, note in notes.items() if note is not None}
        for name, note in missing.items():
            log.warning("score.%s_expected is not computed (NaN): %s", name, note)
        if missing:
            judge_info["expected_not_computed"] = missing
        log.info("judge statistics: %.1f tokens kept per context on average (max %d) of a %d-token vocabulary",
                 sizes.mean(), sizes.max(), stats.vocab)
        label = "judge: " + "+".join(pair.models)
        return Scored(table, Passes(stats, {label: report, **decode_report}), pair.models, n_truncated,
                      metrics={"judge": judge_info})
