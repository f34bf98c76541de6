"""The plan and score steps of judge methods (``KIND = "judge"``: cd_judge).

Score: render one judge prompt per item (the ``judge_prompt`` group, the expert's chat template),
run the judge pass once (``scorers.judge``; read from the statistics cache when it holds it), then
every row (the method, the main model alone, the assistant alone) is a function of the kept
statistics. Columns: ``score.<row>``, ``score.<row>_expected``, ``parse.<row>``, ``output.<row>``."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.errors import ConfigError

log = logging.getLogger("cscore")


@dataclass
class JudgeRun:
    """What score_stage's callers read: the statistics and one report per pass."""

    stats: object  # JudgeStats
    reports: dict = field(default_factory=dict)


def method_params(cfg: DictConfig) -> dict:
    from cscore.scorers import methods

    raw = {k: v for k, v in OmegaConf.to_container(cfg.method, resolve=True).items() if k not in ("name", "variant")}
    return methods.check_params(cfg.method.name, raw)


def plan_judge(cfg: DictConfig):
    from cscore.cli.run import Plan
    from cscore.scorers.variants import plan

    variants = plan(OmegaConf.to_container(cfg.method, resolve=True), baseline_t=cfg.baselines.t,
                    rows=list(cfg.baselines.rows))
    params = method_params(cfg)
    aspect = params["aspect"]
    if params.get("decode") == "first_token" and not cfg.judge_prompt.get("generation_prompt", True):
        raise ConfigError(f"method.decode=first_token reads the token after the prompt, but judge_prompt="
                          f"{cfg.judge_prompt.get('name')} has no generation prompt (its first token is the "
                          "assistant header, not a score): use method.decode=greedy, which skips special tokens")
    return Plan(variants, ["expert", "amateur"], [], extra_scores=[f"{v.name}_expected" for v in variants],
                targets=[f"{rundir.HUMAN}{aspect}"])


def encode_contexts(tokenizer, texts, spans, prefixes, max_length: int):
    """Token ids per judge prompt (the document cut at a word boundary when the prompt is longer
    than max_length minus the longest continuation), then the continuation contexts."""
    from cscore.scorers.tokenize import InputError, fit_source, text_ids

    room = max_length - max((len(p) for p in prefixes), default=0)
    kept, contexts, truncated = [], [], []
    for i, (text, span) in enumerate(zip(texts, spans)):
        ids = text_ids(tokenizer, text)
        cut = len(ids) > room
        if cut:
            fitted = fit_source(tokenizer, text, span, room)
            if fitted is None:
                raise InputError(f"item {i}: the judge prompt without its source still has more than "
                                 f"{room} tokens; raise runtime.max_length")
            text, ids = fitted
        kept.append(text)
        truncated.append(cut)
        contexts.append(ids)
        contexts.extend(ids + list(p) for p in prefixes)
    return kept, contexts, truncated


def judge_statistics(cfg, pair, contexts, *, values, value_ids, prefixes, n_items, progress=None):
    """The judge pass through the statistics cache (one entry per pair, prompts and range)."""
    from cscore.scorers import judge
    from cscore.scorers.cache import ids_digest, stats_key
    from cscore.scorers.identity import model_identity
    from cscore.scorers.judge_stats import FORMAT

    main, asst = pair.expert, pair.amateur
    early = asst.parent is main
    tok = pair.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0

    share = bool(cfg.runtime.get("prefix_sharing", True))

    def compute():
        return judge.compute(main.model, contexts, asst=None if early else asst.model,
                             asst_exit=asst.exit_layer if early else None, values=values, value_ids=value_ids,
                             prefixes=prefixes, n_items=n_items, decode_token=lambda t: tok.decode([t]),
                             token_budget=cfg.runtime.token_budget, padding_side=cfg.runtime.padding_side,
                             pad_id=pad_id, progress=progress, share_prefix=share)

    if asst.parent is not None and not early:
        raise ConfigError("the judge's assistant must be a whole model or an early exit of the main model")
    start = time.perf_counter()
    if not cfg.cache.enabled:
        stats, report = compute()
        report.fetch_seconds = time.perf_counter() - start
        return stats, report, None
    from cscore.cli.run import stats_cache
    from cscore.scorers import engine

    cache = stats_cache(cfg)
    parts = {"kind": "judge", "judge_format": FORMAT, "main": model_identity(main), "asst": model_identity(asst),
             "dtype": str(main.dtype), "device": main.device.type, "ids": ids_digest([(c, []) for c in contexts]),
             "values": list(values), "value_ids": [list(v) for v in value_ids], "token_budget": cfg.runtime.token_budget,
             "padding_side": cfg.runtime.padding_side}
    if share:  # packed rows batch differently (float32 rounding); unshared keys unchanged
        parts["prefix_sharing"] = True
    key = stats_key(parts)
    with cache.lock(key):
        hit = cache.load(key)
        if hit is not None:
            run = (hit.meta.get("extra") or {}).get("report", {})
            report = engine.EngineReport(run.get("seconds", float("nan")), run.get("tokens", 0),
                                         run.get("padded_tokens", 0), run.get("batches", 0), cached=True)
        else:
            stats, report = compute()
            extra = {"models": [f"main: {main.name}", f"asst: {asst.name}"],
                     "report": {"seconds": report.seconds, "tokens": report.tokens,
                                "padded_tokens": report.padded_tokens, "batches": report.batches}}
            cache.save(key, {"judge": stats}, parts, extra=extra)
    if hit is not None:
        stats = hit.stats["judge"]
    report.fetch_seconds = time.perf_counter() - start
    return stats, report, key


def check_aspect(examples, aspect: str) -> None:
    from cscore.scorers.methods.params import suggest

    have = [c.removeprefix(rundir.HUMAN) for c in rundir.human_columns(examples.columns)]
    if aspect not in have:
        raise ConfigError(f"method.aspect={aspect} but this data has no human.{aspect}{suggest(aspect, have)}; "
                          f"it has {', '.join(have) or 'no human scores'}")


def _setup(cfg: DictConfig, loaded, plan):
    """What both judge kinds start with: (method params, examples, the loaded pair, judge prompt config)."""
    from transformers.utils import logging as hf_logging

    from cscore.cli.run import load_pair, model_line

    hf_logging.disable_progress_bar()
    params = method_params(cfg)
    check_aspect(loaded.examples, params["aspect"])
    pair = load_pair(cfg, plan.models)
    for role, m in pair.models.items():
        log.info(model_line(role, m))
    return params, loaded.examples, pair, OmegaConf.to_container(cfg.judge_prompt, resolve=True)


def decoded_texts(cfg, pair, stats, key, prompts, plan, params, factory) -> dict:
    """{row: its decoded text per prompt} under method.decode=greedy (``scorers.judge_decode``;
    paths cached next to the statistics); {} for first_token."""
    if params["decode"] != "greedy":
        return {}
    from cscore.cli.run import stats_cache
    from cscore.scorers.judge_decode import greedy_paths, path_text, rule_of

    c = params["lam"] / params["t"]
    rules = {v.name: rule_of(v.params["who"], c) for v in plan.variants}
    paths = greedy_paths(pair, stats, prompts, list(rules.values()), alpha=params["alpha"],
                         max_new_tokens=params["max_new_tokens"], cache=stats_cache(cfg) if key else None,
                         judge_key=key, progress=factory("decode", len(prompts)) if factory else None)
    tok = pair.tokenizer
    return {name: [path_text(tok, p) for p in paths[rule]] for name, rule in rules.items()}


def score_judge(cfg: DictConfig, loaded, plan, console, state: dict | None = None):
    from cscore.cli.run import Scored, progress_bar
    from cscore.data import judge_prompts
    from cscore.scorers import methods
    from cscore.scorers.judge_parse import continuation_prefixes, score_tokens

    params, examples, pair, jp = _setup(cfg, loaded, plan)
    lo, hi = params["score_range"]
    tok = pair.tokenizer
    chat = judge_prompts.chat_renderer(tok, jp.get("role", "user"), jp.get("generation_prompt", True))
    texts, spans = judge_prompts.build(examples, jp, aspect=params["aspect"], lo=lo, hi=hi, chat=chat)
    tokens = score_tokens(tok, lo, hi)
    values = list(range(lo, hi + 1))
    value_ids = [tuple(tokens[v]) for v in values]
    prefixes = continuation_prefixes(tokens)
    kept, contexts, truncated = encode_contexts(tok, texts, spans, prefixes, cfg.runtime.max_length)
    n_truncated = int(sum(truncated))
    if n_truncated:
        log.warning("%d of %d judge prompts had their source truncated to fit runtime.max_length=%d", n_truncated,
                    len(examples), cfg.runtime.max_length)
    if state is not None:
        state["stage"] = "score"
    bar, factory = progress_bar(console, cfg.runtime.progress)
    if bar:
        bar.start()
    try:
        stats, report, key = judge_statistics(cfg, pair, contexts, values=values, value_ids=value_ids, prefixes=prefixes,
                                         n_items=len(examples), progress=factory("judge", len(contexts)) if factory else None)
        texts = decoded_texts(cfg, pair, stats, key, [contexts[i * (1 + len(prefixes))] for i in range(len(examples))],
                              plan, params, factory)
    finally:
        if bar:
            bar.stop()
    table = examples.copy()
    table["prompt"] = kept
    table["prompt_tokens"] = [len(contexts[i * (1 + len(prefixes))]) for i in range(len(examples))]
    table["truncated"] = truncated
    invalid = {}
    module = methods.get(cfg.method.name)
    for v in plan.variants:
        got = module.judge(stats, who=v.params["who"], lam=params["lam"], t=params["t"], alpha=params["alpha"],
                           score_range=[lo, hi], texts=texts.get(v.name))
        table[f"{rundir.SCORE}{v.name}"] = got["score"]
        table[f"{rundir.SCORE}{v.name}_expected"] = got["expected"]
        table[f"parse.{v.name}"] = got["status"]
        table[f"output.{v.name}"] = got["text"]
        counts = {s: int((got["status"] == s).sum()) for s in ("No Pred", "Below", "Above")}
        invalid[v.name] = {**counts, "n": len(examples)}
    sizes = stats.front_sizes
    judge_info = {"score_range": [lo, hi], "aspect": params["aspect"], "lam": params["lam"], "t": params["t"],
                  "c": params["lam"] / params["t"], "alpha": params["alpha"], "decode": params["decode"],
                  "max_new_tokens": params["max_new_tokens"], "invalid": invalid, "judge_prompt": jp.get("name"),
                  "value_tokens": {str(v): list(ids) for v, ids in zip(values, value_ids)},
                  "continuation_prefixes": [list(p) for p in prefixes],
                  "kept_tokens_per_context": {"mean": float(sizes.mean()), "max": int(sizes.max()),
                                              "vocabulary": stats.vocab}}
    log.info("judge statistics: %.1f tokens kept per context on average (max %d) of a %d-token vocabulary",
             sizes.mean(), sizes.max(), stats.vocab)
    label = "judge: " + "+".join(pair.models)
    return Scored(table, JudgeRun(stats, {label: report}), pair.models, n_truncated, metrics={"judge": judge_info})


# ---------------------------------------------------------------------------------------------
# cd_judge_released: the released code's decode (no judge statistics; every point decodes)


def released_outputs(pair, prompts: list[list[int]], *, who: str, params: dict, progress=None) -> list[list[int]]:
    """Generated ids per prompt, batched ``batch_size`` at a time in order of length."""
    import torch

    from cscore.scorers import judge_released as jr

    main, asst = pair.expert, pair.amateur
    tok = pair.tokenizer
    cfg_eos = main.model.generation_config.eos_token_id
    eos = set(cfg_eos if isinstance(cfg_eos, (list, tuple)) else [cfg_eos]) - {None} or {tok.eos_token_id}
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    penalty = params["repetition_penalty"] or getattr(main.model.generation_config, "repetition_penalty", None) or 1.0
    model = main.model if who != "asst" else (asst.model if asst.parent is None else asst.model)
    lam = params["lam"] if who == "contrast" else 0.0
    t = params["t"] if who == "contrast" else 1.0
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    out: list = [None] * len(prompts)
    for s in range(0, len(order), params["batch_size"]):
        idx = order[s:s + params["batch_size"]]
        batch = [prompts[i] for i in idx]
        common = dict(lam=lam, t=t, alpha=params["alpha"], min_keep=min(params["min_keep"], _vocab(model)),
                      max_new_tokens=params["max_new_tokens"], eos_ids=eos, pad_id=pad_id,
                      repetition_penalty=penalty, vocab_size=len(tok))
        if who == "contrast" and asst.parent is main:
            got = jr.decode(main.model, batch, asst_exit_layer=asst.exit_layer, **common)
        elif who == "contrast":
            first = jr.first_step_logprobs(asst.model, batch, pad_id=pad_id, vocab_size=len(tok),
                                           repetition_penalty=penalty)
            got = jr.decode(main.model, batch, first, **common)
        else:  # one model alone: λ = 0, the assistant term is not used
            got = jr.decode(model, batch, torch.zeros(len(batch), len(tok)), **common)
        for i, ids in zip(idx, got):
            out[i] = ids
        if progress is not None:
            progress(len(idx))
    return out


def released_cache(cfg, pair, prompts):
    """The statistics cache (None when off) and the key parts all rows of a released run share."""
    from cscore.cli.run import stats_cache
    from cscore.scorers.cache import ids_digest
    from cscore.scorers.identity import model_identity

    if not cfg.cache.enabled:
        return None, {}
    return stats_cache(cfg), {"main": model_identity(pair.expert), "asst": model_identity(pair.amateur),
                              "dtype": str(pair.expert.dtype), "device": pair.expert.device.type,
                              "ids": ids_digest([(p, []) for p in prompts])}


def _vocab(model) -> int:
    return model.get_output_embeddings().weight.shape[0]


def score_released(cfg: DictConfig, loaded, plan, console, state: dict | None = None):
    from cscore.cli.run import Scored, progress_bar
    from cscore.data import judge_prompts
    from cscore.scorers import engine
    from cscore.scorers.judge_decode import released_parts, through_cache
    from cscore.scorers.judge_parse import parse_released
    from cscore.scorers.judge_released import released_prompt_ids, released_text

    params, examples, pair, jp = _setup(cfg, loaded, plan)
    lo, hi = params["score_range"]
    tok = pair.tokenizer
    texts, _ = judge_prompts.build(examples, jp, aspect=params["aspect"], lo=lo, hi=hi, chat=None)
    prompts = [released_prompt_ids(tok, x, role=jp.get("role", "system"),
                                   add_generation_prompt=jp.get("generation_prompt", False),
                                   max_length=params["max_prompt_tokens"]) for x in texts]
    untruncated = [len(tok(tok.apply_chat_template([{"role": jp.get("role", "system"), "content": x}], tokenize=False,
                                                   add_generation_prompt=jp.get("generation_prompt", False)))["input_ids"])
                   for x in texts]
    truncated = [n > params["max_prompt_tokens"] for n in untruncated]
    if any(truncated):
        log.warning("%d of %d prompts cut to their first %d tokens, as the released code does (its end, with the "
                    "summary, is lost)", sum(truncated), len(texts), params["max_prompt_tokens"])
    if state is not None:
        state["stage"] = "score"
    table = examples.copy()
    table["prompt"] = [tok.decode(p) for p in prompts]
    table["prompt_tokens"] = [len(p) for p in prompts]
    table["truncated"] = truncated
    invalid, reports = {}, {}
    cache, base = released_cache(cfg, pair, prompts)
    bar, factory = progress_bar(console, cfg.runtime.progress)
    if bar:
        bar.start()
    try:
        for v in plan.variants:
            start = time.perf_counter()
            ids, cached = through_cache(cache, released_parts(pair, prompts, v.params["who"], params, base), lambda: (
                released_outputs(pair, prompts, who=v.params["who"], params=params,
                                 progress=factory(f"decode {v.name}", len(prompts)) if factory else None)))
            seconds = time.perf_counter() - start
            outputs = [released_text(tok, x) for x in ids]
            parsed = [parse_released(x, lo, hi) for x in outputs]
            status = np.array([p[1] for p in parsed], dtype=object)
            table[f"{rundir.SCORE}{v.name}"] = np.array([p[0] for p in parsed], dtype=np.float64)
            table[f"parse.{v.name}"] = status
            table[f"output.{v.name}"] = np.array(outputs, dtype=object)
            invalid[v.name] = {**{s: int((status == s).sum()) for s in ("No Pred", "Below", "Above")},
                               "n": len(examples)}
            tokens = sum(len(p) for p in prompts) + sum(len(x) for x in ids)
            rep = engine.EngineReport(seconds, tokens, tokens, -(-len(prompts) // params["batch_size"]), cached=cached)
            rep.fetch_seconds = seconds
            reports[f"decode {v.name}"] = rep
    finally:
        if bar:
            bar.stop()
    judge_info = {"score_range": [lo, hi], "aspect": params["aspect"], "lam": params["lam"], "t": params["t"],
                  "invalid": invalid, "judge_prompt": jp.get("name"), "preset": "released",
                  **{k: params[k] for k in ("alpha", "min_keep", "max_new_tokens", "max_prompt_tokens", "batch_size",
                                            "repetition_penalty")}}
    return Scored(table, JudgeRun(None, reports), pair.models, int(sum(truncated)), metrics={"judge": judge_info})


def plan_released(cfg: DictConfig):
    plan = plan_judge(cfg)
    plan.extra_scores = []  # no expected score: the released code decodes text
    return plan
