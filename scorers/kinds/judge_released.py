"""The released judge kind (``KIND = "judge_released"``: cd_judge_released): the released
code's decode, no judge statistics; every grid point decodes. Columns: ``score.<row>``,
``parse.<row>``, ``output.<row>``."""

from __future__ import annotations

import logging
import time

import numpy as np

from cscore import rundir
from cscore.scorers.config import RunConfig
from cscore.scorers.kinds.base import REGISTRY, Passes, Plan, Scored
from cscore.scorers.kinds.shared import JudgeKind, judge_setup, plan_variants, stats_cache

log = logging.getLogger("cscore")


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


def _vocab(model) -> int:
    return model.get_output_embeddings().weight.shape[0]


def released_cache(run: RunConfig, pair, prompts):
    """The statistics cache (None when off) and the key parts all rows of a released run share."""
    from cscore.scorers.cache import ids_digest
    from cscore.scorers.identity import model_identity

    if not run.cache.enabled:
        return None, {}
    return stats_cache(run), {"main": model_identity(pair.expert), "asst": model_identity(pair.amateur),
                              "dtype": str(pair.expert.dtype), "device": pair.expert.device.type,
                              "ids": ids_digest([(p, []) for p in prompts])}


def score_released(run: RunConfig, loaded, plan, progress, state: dict):
    from cscore.data import judge_prompts
    from cscore.scorers import engine
    from cscore.scorers.judge_decode import released_parts, through_cache
    from cscore.scorers.judge_parse import parse_released
    from cscore.scorers.judge_released import released_prompt_ids, released_text

    params, examples, pair, jp = judge_setup(run, loaded, plan)
    lo, hi = params["score_range"]
    tok = pair.tokenizer
    texts, _ = judge_prompts.build(examples, jp, aspect=params["aspect"], lo=lo, hi=hi, chat=None)
    role, gen_prompt = jp.get("role", "system"), jp.get("generation_prompt", False)
    prompts = [released_prompt_ids(tok, x, role=role, add_generation_prompt=gen_prompt,
                                   max_length=params["max_prompt_tokens"]) for x in texts]
    chats = [tok.apply_chat_template([{"role": role, "content": x}], tokenize=False, add_generation_prompt=gen_prompt)
             for x in texts]
    untruncated = [len(tok(c)["input_ids"]) for c in chats]
    truncated = [n > params["max_prompt_tokens"] for n in untruncated]
    if any(truncated):
        log.warning("%d of %d prompts cut to their first %d tokens, as the released code does (its end, with the "
                    "summary, is lost)", sum(truncated), len(texts), params["max_prompt_tokens"])
    state["stage"] = "score"
    cache, base = released_cache(run, pair, prompts)
    table = examples.copy()
    table["prompt"] = [tok.decode(p) for p in prompts]
    table["prompt_tokens"] = [len(p) for p in prompts]
    table["truncated"] = truncated
    invalid, reports = {}, {}
    with progress.live() as factory:
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
            table[f"{rundir.PARSE}{v.name}"] = status
            table[f"{rundir.OUTPUT}{v.name}"] = np.array(outputs, dtype=object)
            invalid[v.name] = {**{s: int((status == s).sum()) for s in ("No Pred", "Below", "Above")},
                               "n": len(examples)}
            tokens = sum(len(p) for p in prompts) + sum(len(x) for x in ids)
            rep = engine.EngineReport(seconds, tokens, tokens, -(-len(prompts) // params["batch_size"]), cached=cached)
            rep.fetch_seconds = seconds
            reports[f"decode {v.name}"] = rep
    judge_info = {"score_range": [lo, hi], "aspect": params["aspect"], "lam": params["lam"], "t": params["t"],
                  "invalid": invalid, "judge_prompt": jp.get("name"), "preset": "released",
                  **{k: params[k] for k in ("alpha", "min_keep", "max_new_tokens", "max_prompt_tokens", "batch_size",
                                            "repetition_penalty")}}
    return Scored(table, Passes(None, reports), pair.models, int(sum(truncated)), metrics={"judge": judge_info})


def plan_released(run: RunConfig) -> Plan:
    variants = plan_variants(run)
    aspect = run.params["aspect"]
    # no score.<row>_expected: the released code decodes text
    return Plan(variants, ["expert", "amateur"], [], targets=[f"{rundir.HUMAN}{aspect}"])


@REGISTRY.register
class JudgeReleased(JudgeKind):
    name = "judge_released"

    def plan(self, run: RunConfig) -> Plan:
        return plan_released(run)

    def score(self, run, loaded, plan, progress, state) -> Scored:
        return score_released(run, loaded, plan, progress, state)
