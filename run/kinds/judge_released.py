"""The released judge kind (``kind = "judge_released"``: cd_judge_released): the released code's decode, each
decoded row cached, a sweep's λ / t points decoded in the first job's tree (``decode_rows``)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import numpy as np

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.progress import Progress
from cscore.run.kinds.base import REGISTRY, Loaded, Passes, Plan, RunState, Scored
from cscore.run.kinds.judging import JudgeKind, grid_points, invalid_counts, parse_changes
from cscore.run.kinds.pair import stats_cache
from cscore.scorers.engine.report import EngineReport
from cscore.scorers.store.runner import InProcess, PassReport, Pending, stop_early

log = logging.getLogger(__name__)


def released_outputs(pair, prompts: list[list[int]], *, rows: dict[str, tuple[float, float] | None], params,
                     progress=None, batches=None, each=None) -> dict[str, list[list[int]]]:
    """Generated ids per prompt of each row; ``rows`` maps a name to the (λ, t) it decodes on the main model or
    to None (the assistant alone). The main model's rows decode as one tree; ``batches``: only those batches of
    ``plan_batches`` (a part's); ``each(batch, {name: ids per prompt of the batch})`` as each batch ends."""
    from cscore.scorers.engine.passes import announce, decode_ticks  # torch: when a run decodes
    from cscore.scorers.judge import released as jr

    main, asst, tok = pair.expert, pair.amateur, pair.tokenizer
    cfg_eos = main.model.generation_config.eos_token_id
    eos = set(cfg_eos if isinstance(cfg_eos, (list, tuple)) else [cfg_eos]) - {None} or {tok.eos_token_id}
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    penalty = params.repetition_penalty or getattr(main.model.generation_config, "repetition_penalty", None) or 1.0
    common = jr.Decoding(eos, pad_id, alpha=params.alpha, max_new_tokens=params.max_new_tokens, vocab_size=len(tok),
                         repetition_penalty=penalty)
    plan = plan_batches(prompts, params.batch_size) if batches is None else batches
    out: dict[str, list] = {name: [None] * len(prompts) for name in rows}
    on_main = {name: rule for name, rule in rows.items() if rule is not None}
    n = sum(len(idx) for idx in plan)
    announce(progress, tokens=sum(len(prompts[i]) for idx in plan for i in idx),
             steps=n * len(rows) * params.max_new_tokens,
             detail=f"{n} prompts x {len(rows)} rows x up to {params.max_new_tokens} new tokens, "
                    f"{len(plan)} batches of up to {params.batch_size}")
    clock, models = batch_clock(pair, prompts, plan, rows, params.max_new_tokens, progress)
    for idx in plan:
        batch = [prompts[i] for i in idx]
        with decode_ticks(models, clock, progress):
            got = _main_rows(jr, pair, batch, on_main, params, common, penalty, pad_id) if on_main else {}
            for name in rows.keys() - on_main.keys():  # the assistant alone: λ = 0, its assistant term is not used
                got[name] = _alone(jr, asst.model, batch, params, common, len(tok))
        for name in rows:
            for i, ids in zip(idx, got[name]):
                out[name][i] = ids
        if each is not None:
            each(idx, {name: got[name] for name in rows})
        if progress is not None:
            progress(len(idx))
    return out


def batch_clock(pair, prompts, plan, rows: dict, max_new_tokens: int, progress):
    """(the decode clock of ``released_outputs``, None where progress takes no share; the models it watches)."""
    from cscore.scorers.engine.decode_clock import DecodeClock, Unit
    from cscore.scorers.models.anatomy import layer_list

    main, asst = pair.expert, pair.amateur
    alone = sum(rule is None for rule in rows.values())
    rules = {rule for rule in rows.values() if rule is not None}
    separate = asst.parent is not main
    models = [main.model] + [asst.model] * (separate or alone > 0)
    if getattr(progress, "part", None) is None:
        return None, models
    cut = 1.0 if separate else len(layer_list(asst.model)) / len(layer_list(main.model))  # the alone decode's
    prefills = bool(rules) + alone * cut + (separate and bool(rules - {MAIN_ALONE}))
    decodes = bool(rules) + alone * cut

    def unit(idx: list[int]) -> Unit:
        padded = len(idx) * max(len(prompts[i]) for i in idx)
        return Unit(padded * prefills, decodes * max(max_new_tokens - 1, 0), len(idx) * max(len(rules), 1))

    return DecodeClock([unit(idx) for idx in plan], time.perf_counter()), models


def plan_batches(prompts, batch_size: int) -> list[list[int]]:
    """The released decode's batches: prompt indices by length, longest first, ``batch_size`` each."""
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    return [order[s:s + batch_size] for s in range(0, len(order), batch_size)]


def _alone(jr, model, batch, params, common, n_tok) -> list[list[int]]:
    import torch

    return jr.decode(model, batch, torch.zeros(len(batch), n_tok), lam=0.0, t=1.0,
                     how=replace(common, min_keep=min(params.min_keep, _vocab(model))))


def _main_rows(jr, pair, batch, rows: dict, params, common, penalty, pad_id) -> dict[str, list[list[int]]]:
    """One batch of the main model's rows ({name: (λ, t)}), as one tree where they differ."""
    main, asst = pair.expert, pair.amateur
    if set(rows.values()) == {MAIN_ALONE}:
        alone = _alone(jr, main.model, batch, params, common, len(pair.tokenizer))
        return {name: alone for name in rows}
    how = replace(common, min_keep=min(params.min_keep, _vocab(main.model)))
    exit_layer = asst.exit_layer if asst.parent is main else None
    first = None if exit_layer is not None else jr.first_step_logprobs(
        asst.model, batch, pad_id=pad_id, vocab_size=len(pair.tokenizer), repetition_penalty=penalty)
    rules = list(dict.fromkeys(rows.values()))  # one tree rule per distinct (λ, t)
    if len(rules) == 1:  # one contrast (its main-alone row came from the cache)
        paths = jr.decode(main.model, batch, first, how=how, lam=rules[0][0], t=rules[0][1], asst_exit_layer=exit_layer)
        return {name: paths for name in rows}
    got = dict(zip(rules, jr.decode_tree(main.model, batch, first, how=how, rules=rules, asst_exit_layer=exit_layer)))
    return {name: got[rule] for name, rule in rows.items()}


def _vocab(model) -> int:
    return model.get_output_embeddings().weight.shape[0]


MAIN_ALONE = (0.0, 1.0)  # the main model alone: λ = 0 (the assistant's term is 0), t = 1


def decode_rows(pair, prompts, plan, params, cache, base, factory, grid=()) -> tuple[dict, float, list]:
    """({row: (ids per prompt, from the cache, seconds of the decode that made them)}, this call's seconds, the
    ``grid`` points decoded too): the rows the statistics cache lacks decode in one call; ``grid``'s (λ, t) points
    the cache lacks join the contrast row's tree and are stored for their own jobs."""
    from cscore.scorers.judge.decode import released_parts, through_cache_many

    who, rows, parts = _row_plan(pair, prompts, plan, params, base)
    extra = {}
    if "contrast" in who.values():
        for lam, t in dict.fromkeys(grid):
            if (lam, t) != (float(params.lam), float(params.t)):  # not the contrast row's own
                name = f"λ={lam!r} t={t!r}"
                extra[name] = released_parts(pair, prompts, "contrast", replace(params, lam=lam, t=t), base)
                rows[name] = (lam, t)

    def compute(names: list[str]) -> dict[str, list[list[int]]]:
        others = len(set(names) - who.keys())
        shown = [n for n in names if n in who] + ([f"{others} grid points"] if others else [])
        bar = factory(f"decode {'+'.join(shown)}", len(prompts)) if factory else None
        return released_outputs(pair, prompts, rows={n: rows[n] for n in names}, params=params, progress=bar)

    start = time.perf_counter()
    decoded = through_cache_many(cache, parts, compute, extra=extra)  # out of memory with extra: parts alone
    also = [list(rows[n]) for n in extra if n in decoded]
    return {n: decoded[n] for n in who}, time.perf_counter() - start, also


def decode_run(run, pair, prompts, plan, cache, base, factory,
               coordinator: InProcess) -> tuple[dict, float, list, dict] | Pending:
    """``decode_rows`` with the sweep's grid points, or split over processes the rows decoded in parts
    (``partials.decodes``: a batch a unit, dealt by its padded cost; no grid points; ``Pending`` while a part is
    missing); and a split decode's merge reports by row."""
    params = run.method  # cd_judge_released's Params
    if cache is None or not coordinator.on:
        grid = grid_points(run) if cache is not None else []
        return (*decode_rows(pair, prompts, plan, params, cache, base, factory, grid), {})
    from cscore.scorers.judge.partials import decodes

    _, rows, parts = _row_plan(pair, prompts, plan, params, base)
    start = time.perf_counter()

    def cost(u: list[int]) -> int:  # the unit's padded tokens: its prompts and the steps it may take
        return len(u) * (max(len(prompts[i]) for i in u) + params.max_new_tokens)

    units = sorted(plan_batches(prompts, params.batch_size), key=lambda u: -cost(u))

    def compute(names, todo, done):
        bar = factory(f"decode {'+'.join(names)}", sum(len(u) for u in todo)) if factory else None
        released_outputs(pair, prompts, rows={n: rows[n] for n in names}, params=params, progress=bar,
                         batches=todo, each=done)

    merged: dict = {}
    decoded = decodes(cache, parts, (units, [cost(u) for u in units], [len(x) for x in prompts]), compute, "released",
                      coordinator, merged)
    return decoded if isinstance(decoded, Pending) else (decoded, time.perf_counter() - start, [], merged)


def _row_plan(pair, prompts, plan, params, base) -> tuple[dict, dict, dict]:
    """({row: who decodes it}, {row: its (λ, t) rule, None for the assistant}, {row: its cache key parts})."""
    from cscore.scorers.judge.decode import released_parts

    who = {v.name: v.who for v in plan.variants}
    rule = {"main": MAIN_ALONE, "asst": None, "contrast": (float(params.lam), float(params.t))}
    rows = {name: rule[w] for name, w in who.items()}
    parts = {name: released_parts(pair, prompts, w, params, base) for name, w in who.items()}
    return who, rows, parts


def released_prompts(tok, texts: list[str], jp, max_prompt_tokens: int) -> tuple[list[list[int]], list[bool]]:
    """(each prompt's ids as the released code builds them, whether it was cut to ``max_prompt_tokens``)."""
    from cscore.scorers.judge.released import released_prompt_ids

    role, gen_prompt = jp["role"], jp["generation_prompt"]
    prompts = [released_prompt_ids(tok, x, role=role, add_generation_prompt=gen_prompt,
                                   max_length=max_prompt_tokens) for x in texts]
    chats = [tok.apply_chat_template([{"role": role, "content": x}], tokenize=False,
                                     add_generation_prompt=gen_prompt) for x in texts]
    truncated = [len(tok(c)["input_ids"]) > max_prompt_tokens for c in chats]
    if any(truncated):
        log.warning("%d of %d prompts cut to their first %d tokens, as the released code does (its end, with the "
                    "summary, is lost)", sum(truncated), len(texts), max_prompt_tokens)
    return prompts, truncated


@REGISTRY
class JudgeReleased(JudgeKind):
    name = "judge_released"

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress,
              state: RunState, coordinator: InProcess) -> Scored | Pending:
        from cscore.data import judge_prompts
        from cscore.scorers.judge.parse import PARSERS
        from cscore.scorers.judge.released import released_text
        from cscore.scorers.models.identity import model_identity
        from cscore.scorers.store.cache import ids_digest

        p, examples, pair, jp = self.setup(run, loaded, plan)
        lo, hi = p.score_range
        tok = pair.tokenizer
        texts, _ = judge_prompts.build(examples, jp, aspect=p.aspect, lo=lo, hi=hi, chat=None)
        prompts, truncated = released_prompts(tok, texts, jp, p.max_prompt_tokens)
        state["stage"] = "score"
        cache, base = stats_cache(run), {}  # base: the key parts all rows share
        if cache is not None:
            base = {"main": model_identity(pair.expert), "asst": model_identity(pair.amateur),
                    "dtype": str(pair.expert.dtype), "device": pair.expert.device.type,
                    "ids": ids_digest([(x, []) for x in prompts])}
        table = examples.assign(prompt=[tok.decode(x) for x in prompts], prompt_tokens=[len(x) for x in prompts],
                                truncated=truncated)
        invalid, changes = {}, {}
        reports: dict[str, EngineReport] = {}
        with progress.live() as factory:
            got = decode_run(run, pair, prompts, plan, cache, base, factory, coordinator)
        if isinstance(got, Pending):
            return got
        decoded, spent, also, merged = got
        if also:
            log.info("decoded %d other grid point(s) of this sweep with this one (one tree): their jobs read them "
                     "from the cache", len(also))
        for v in plan.variants:
            ids, cached, seconds, call = decoded[v.name]
            outputs = [released_text(tok, x) for x in ids]
            parsed = [PARSERS[p.parse](x, lo, hi) for x in outputs]  # outputs: the released response text
            status = np.array([p[1] for p in parsed], dtype=object)
            scores = np.array([p[0] for p in parsed], dtype=np.float64)
            table[f"{rundir.SCORE}{v.name}"] = scores
            table[f"{rundir.PARSE}{v.name}"] = status
            table[f"{rundir.OUTPUT}{v.name}"] = np.array(outputs, dtype=object)
            invalid[v.name] = invalid_counts(status)
            changes[v.name] = parse_changes(outputs, scores, status, lo, hi, p.parse, strip=False)
            tokens = sum(len(x) for x in prompts) + sum(len(x) for x in ids)
            # seconds: of the decode that made the row; fetch_seconds: what this run spent on its rows
            rep = PassReport(seconds, tokens, tokens, -(-len(prompts) // p.batch_size),
                                cached=cached, fetch_seconds=spent, shared=call, fetch_shared="decode")
            reports[f"decode {v.name}"] = rep.adopt(merged.get(v.name))
        stop = stop_early(coordinator, list(reports.values()))
        if stop is not None:
            return stop
        judge_info = {"score_range": [lo, hi], "aspect": p.aspect, "lam": p.lam, "t": p.t,
                      "invalid": invalid, "parse": p.parse, "parse_changes": changes,
                      "judge_prompt": jp.get("name"), "preset": "released", "grid_decoded_too": also,
                      **{k: getattr(p, k) for k in ("alpha", "min_keep", "max_new_tokens", "max_prompt_tokens",
                                                    "batch_size", "repetition_penalty")}}
        return Scored(table, Passes(None, reports), pair.models, int(sum(truncated)), metrics={"judge": judge_info})
