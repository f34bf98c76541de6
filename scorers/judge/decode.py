"""Greedy decoding of the judge's output under Eq. 1 (``method.decode=greedy`` of cd_judge): each step
chooses argmax over V_head of log p_main(v) − c · z_v (c = λ / t); a run's rules decode together as one
tree per prompt. Paths are cached as ``cscore.scorers.judge.stats.DecodedPaths``."""

from __future__ import annotations

import copy
import logging
import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Collection, Sequence

import numpy as np
import torch

from cscore.scorers.engine.decode_clock import DecodeClock, Unit
from cscore.scorers.engine.engine import LayerTap
from cscore.scorers.engine.head import head_logits
from cscore.scorers.engine.passes import announce, decode_ticks
from cscore.scorers.judge.judge import assistant
from cscore.scorers.judge.stats import DECODE_FORMAT, DecodedPaths
from cscore.scorers.models.anatomy import cache_attribute, decoder_base
from cscore.scorers.models.loaded import eos_ids
from cscore.scorers.store.runner import InProcess, Pending

log = logging.getLogger(__name__)


def choose(a: torch.Tensor, z: torch.Tensor, c: float | None, alpha: float) -> int:
    """One step of Eq. 1 (a = log p_main, z = assistant logits): argmax over V_head of a − c·z (first id on
    ties); c None: argmax z."""
    if c is None:
        return int(torch.argmax(z))
    score = a - c * z if c else a.clone()
    if alpha > 0:
        score[a < a.max() + math.log(alpha)] = -torch.inf
    return int(torch.argmax(score))


class Stepper:
    """Forwards of the main model and the assistant (a second model, or main's first k layers) with KV caches."""

    def __init__(self, main, asst=None, asst_exit: int | None = None):
        self.models = [main] if asst is None else [main, asst]
        self.bases = [decoder_base(m) for m in self.models]
        self.names = [cache_attribute(b) for b in self.bases]
        self.tap = LayerTap(main, asst_exit) if asst_exit is not None else None
        self.device = next(main.parameters()).device

    def step(self, ids: list[int], caches):
        """(a, z, caches) after feeding ``ids`` on top of ``caches`` (None: a fresh prompt)."""
        x = torch.tensor([ids], device=self.device)
        logits, new = [], []
        for k, (model, base, name) in enumerate(zip(self.models, self.bases, self.names)):
            past = {name: caches[k]} if caches is not None else {}
            out = base(input_ids=x, use_cache=True, **past)
            new.append(getattr(out, name))
            logits.append(head_logits(model, out.last_hidden_state[0, -1]).double())
        if self.tap is not None:
            logits.append(head_logits(self.models[0], self.tap.normed()[0, -1]).double())
        return torch.log_softmax(logits[0], dim=-1), logits[1], tuple(new)


@torch.inference_mode()
def decode_prompt(stepper: Stepper, prompt: list[int], firsts: Sequence[int], cs: Sequence[float | None],
                  how: Steps) -> list[list[int]]:
    """The path of each rule ``cs[j]`` (its first token ``firsts[j]``) on one prompt, as a tree."""
    out: list = [None] * len(cs)
    first = _groups([[f] for f in firsts], range(len(cs)))

    def stops(seq):
        return seq[-1] in how.eos_ids or len(seq) >= how.max_new_tokens or how.done(seq)

    stack, shared = [(seq, js, None) for seq, js in first], {}  # shared: caches still to hand to several nodes
    if not all(stops(seq) for seq, _ in first):  # else no step after the first: the prompt needs no forward
        _, _, root = stepper.step(list(prompt), None)
        stack, shared = [(seq, js, root) for seq, js in first], {id(root): len(first)}
    while stack:
        seq, js, caches = stack.pop()
        if stops(seq):
            for j in js:
                out[j] = seq
            shared[id(caches)] = shared.get(id(caches), 1) - 1
            continue
        if shared.get(id(caches), 1) > 1:  # a sibling still needs this cache as it is
            shared[id(caches)] -= 1
            caches = copy.deepcopy(caches)
        a, z, caches = stepper.step([seq[-1]], caches)
        kids = _groups([seq + [choose(a, z, cs[j], how.alpha)] for j in js], js)
        shared[id(caches)] = len(kids)
        stack.extend((s, g, caches) for s, g in kids)
    return out


def _groups(seqs: list[list[int]], js) -> list[tuple[list[int], list[int]]]:
    """The rules ``js`` grouped by the sequence each reached."""
    groups: dict[tuple, list[int]] = {}
    for seq, j in zip(seqs, js):
        groups.setdefault(tuple(seq), []).append(j)
    return [(list(seq), g) for seq, g in groups.items()]


@dataclass(frozen=True)
class Steps:
    """How each path of a tree steps and ends; ``each(i, paths)`` is told prompt i's paths once decoded."""
    alpha: float
    max_new_tokens: int
    eos_ids: Collection[int]
    done: Callable[[list[int]], bool]
    each: Callable[[int, list], None] | None = None


def decode_all(main, prompts: Sequence[list[int]], firsts: Sequence[Sequence[int]], cs: Sequence[float | None],
               how: Steps, *, asst, progress=None) -> list[DecodedPaths]:
    """One ``DecodedPaths`` per rule of ``cs``; ``firsts[i][j]``: prompt i's first token under cs[j];
    ``asst``: another model or an int k (main's first k layers)."""
    max_new_tokens, each = how.max_new_tokens, how.each
    stepper = Stepper(main, *assistant(asst))
    paths: list[list] = [[] for _ in cs]
    rules = len(set(cs))
    # items: the prompts this call decodes (a part's, a resumed run's), not all of the progress's
    announce(progress, tokens=sum(len(p) for p in prompts), steps=len(prompts) * rules * max_new_tokens,
             items=len(prompts),
             detail=f"{len(prompts)} prompts x {rules} rules x up to {max_new_tokens} new tokens, one tree per prompt")
    clock = None  # a tree a unit, for a progress that takes a share; a path stops early: no prior share
    if getattr(progress, "part", None) is not None:
        models = len(stepper.models)
        clock = DecodeClock([Unit(len(p) * models, rules * max(max_new_tokens - 1, 0) * models) for p in prompts],
                            time.perf_counter(), prior=None)
    with stepper.tap or nullcontext():  # an early exit's tap, closed at the end
        for prompt, first in zip(prompts, firsts):
            with decode_ticks(stepper.models, clock, progress):
                got = decode_prompt(stepper, prompt, first, cs, how)
            for j, seq in enumerate(got):
                paths[j].append(seq)
            if each is not None:
                each(len(paths[0]) - 1, got)
            if progress is not None:
                progress(1)
    return [DecodedPaths.from_lists(p) for p in paths]


def path_text(tokenizer, ids) -> str:
    """The text of a decoded path without special tokens, as the released code reads it."""
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def rule_of(who: str, c: float) -> float | None:
    """The decoding rule of a row: its c (the main model alone is c = 0), None for the assistant."""
    return None if who == "asst" else (float(c) if who == "contrast" else 0.0)


def first_tokens(stats, rule: float | None, alpha: float) -> list[int]:
    """Each prompt's first token under ``rule``, read from the judge statistics."""
    ctx = np.arange(stats.n_items) * (1 + len(stats.prefixes))
    if rule is None:
        return stats.asst_top[ctx].tolist()
    return stats.pick(ctx, "contrast", rule, alpha).tolist()


STOPS = {"paper": "settled_paper", "released": "settled_released", None: "eos"}  # cache key names


@dataclass(frozen=True)
class Paths:
    """What a rule's greedy paths depend on besides the rule (their cache key), and how they are dealt."""
    alpha: float
    max_new_tokens: int
    judge_key: str | None = None
    stop: str | None = "paper"
    coordinator: InProcess | None = None  # the job's: prompts dealt to its parts; no key part
    adopt: bool = False  # this process merged the split first-step pass: parts that left then are its own
    extra_rules: Sequence[float | None] = ()  # other points of the run's sweep (greedy_paths); not a key part


def greedy_paths(pair, stats, prompts, rules, how: Paths, *, cache=None, progress=None,
                 timing: dict | None = None) -> dict | Pending:
    """{rule: decoded ids per prompt}: read from ``cache``, the rest decoded together and stored.
    ``extra_rules`` join the tree only when a rule of ``rules`` is decoded, and are returned too.
    ``timing`` receives ``cached``, ``seconds`` and ``call`` (and ``merged`` for a split decode).
    ``stop``: a path also stops once ``cscore.scorers.judge.parse.settled`` says its score is fixed.
    A split decode whose parts are not all done gives ``Pending``."""
    alpha, max_new_tokens, judge_key, stop = how.alpha, how.max_new_tokens, how.judge_key, how.stop
    eos = eos_ids(pair.expert.config, pair.tokenizer)

    def parts(rule) -> dict:
        return {"judge": judge_key, "rule": "asst" if rule is None else rule, "alpha": alpha if rule else 0.0,
                "max_new_tokens": max_new_tokens, "eos": sorted(eos), "stop": STOPS[stop]}

    own = {f"rule {r}": r for r in dict.fromkeys(rules)}
    named = {**{f"rule {r}": r for r in dict.fromkeys(how.extra_rules)}, **own}

    def decode(names: list[str], only=None, each=None) -> list[list[list[int]]]:
        return _decode_rules(pair, stats, prompts, [named[n] for n in names], how, eos, progress, (only, each))

    own_parts = {n: parts(r) for n, r in own.items()}
    if judge_key and cache is not None and how.coordinator is not None and how.coordinator.on:  # this point's only
        got = split_paths(cache, own_parts, prompts, how, decode, timing)
        if isinstance(got, Pending):
            return got
    else:
        got = through_cache_many(cache if judge_key else None, own_parts, lambda names: dict(zip(names, decode(names))),
                                 extra={n: parts(r) for n, r in named.items() if n not in own})
    mine = [got[n] for n in own]
    calls = {call: seconds for _, _, seconds, call in mine}
    if timing is not None:
        timing.update(cached=all(c for _, c, _, _ in mine), seconds=sum(calls.values()), call=",".join(sorted(calls)))
    return {named[n]: paths for n, (paths, *_) in got.items()}


def _decode_rules(pair, stats, prompts, rules, how: Paths, eos, progress, part) -> list[list[list[int]]]:
    """Decoded ids per prompt of each rule, in one ``decode_all``; ``part``: (a part's prompt indices or None,
    ``Steps.each``)."""
    from cscore.scorers.judge.parse import settled

    alpha, stop = how.alpha, how.stop
    main, asst, tok = pair.expert, pair.amateur, pair.tokenizer
    only, each = part
    firsts = list(zip(*[first_tokens(stats, r, alpha) for r in rules]))
    if only is not None:
        prompts, firsts = [prompts[i] for i in only], [firsts[i] for i in only]

    lo, hi = int(stats.values.min()), int(stats.values.max())

    def done(ids) -> bool:
        return stop is not None and settled(path_text(tok, ids), stop, lo, hi)

    got = decode_all(main.model, prompts, firsts, rules, Steps(alpha, how.max_new_tokens, eos, done, each),
                     asst=asst.exit_layer if asst.parent is main else asst.model, progress=progress)
    return [paths.paths() for paths in got]


def split_paths(cache, parts: dict[str, dict], prompts, how: Paths, decode: Callable, timing=None) -> dict | Pending:
    """``through_cache_many`` split over processes, a prompt's tree a unit; ``Pending`` while a part is missing."""
    from cscore.scorers.judge.partials import decodes

    order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))  # longest first: the deal balances

    def compute(names, units, done):
        decode(names, [u[0] for u in units], lambda k, seqs: done(units[k], {n: [s] for n, s in zip(names, seqs)}))

    reports: dict = {}
    plan = ([[i] for i in order], [len(prompts[i]) + how.max_new_tokens for i in order], [len(p) for p in prompts])
    got = decodes(cache, parts, plan, compute, "greedy", how.coordinator, reports, how.judge_key if how.adopt else None)
    if isinstance(got, Pending):
        return got
    if timing is not None and reports:
        timing["merged"] = next(iter(reports.values()))
    return got


def through_cache_many(cache, parts: dict[str, dict], compute: Callable[[list[str]], dict[str, list[list[int]]]],
                       extra: dict[str, dict] | None = None) -> dict[str, tuple[list[list[int]], bool, float, str]]:
    """Named decodes read under the keys of ``parts``, else computed: {name: (paths, from the cache, seconds, call id)};
    the names the cache lacks are computed in one ``compute(names)`` call and stored. ``extra``: more
    decodes, computed only alongside a missing name of ``parts`` (dropped if that runs out of memory).
    Every key is locked, in sorted order (no two runs wait on each other), while this runs."""
    import uuid
    from contextlib import ExitStack

    from cscore.scorers.store.cache import stats_key

    extra = extra or {}
    call = uuid.uuid4().hex
    if cache is None:
        start = time.perf_counter()
        got = compute(list(parts))
        return {name: (paths, False, time.perf_counter() - start, call) for name, paths in got.items()}
    full = {name: {"kind": "judge_decode", "decode_format": DECODE_FORMAT, **p}
            for name, p in {**parts, **extra}.items()}
    keys = {name: stats_key(p) for name, p in full.items()}
    out: dict[str, tuple[list[list[int]], bool, float, str]] = {}
    with ExitStack() as stack:
        for key in sorted(set(keys.values())):
            stack.enter_context(cache.lock(key))
        for name in parts:
            hit = cache.load(keys[name], DecodedPaths)
            if hit is not None:
                was = (hit.meta.get("extra") or {}).get("report") or {}
                out[name] = (hit.stats["paths"].paths(), True, was.get("seconds", float("nan")),
                             was.get("call") or keys[name])
        todo = [name for name in parts if name not in out]
        more = [name for name in extra if keys[name] not in {keys[n] for n in parts} and keys[name] not in cache]
        start = time.perf_counter()
        got = _with_extras(compute, todo, more) if todo else {}
        seconds = time.perf_counter() - start
        todo += [name for name in more if name in got]
        for name in todo:
            cache.save(keys[name], {"paths": DecodedPaths.from_lists(got[name])}, full[name],
                       extra={"report": {"seconds": seconds, "call": call}})
            out[name] = (got[name], False, seconds, call)
    return out


def _with_extras(compute, todo: list[str], more: list[str]) -> dict:
    """``compute(todo + more)``; ``compute(todo)`` when that runs out of memory."""
    from cscore.scorers.engine.budget import free_device_memory, is_oom

    if not more:
        return compute(todo)
    try:
        return compute(todo + more)
    except RuntimeError as err:
        if not is_oom(err):
            raise
        free_device_memory()
        log.warning("out of memory decoding %d other grid points with this one: this point's rows decode alone "
                    "and the other points' jobs decode their own (runtime.share_grid=false skips the attempt)",
                    len(more))
        return compute(todo)


def released_parts(pair, prompts, who: str, params, base: dict) -> dict:
    """A released-preset decode's cache key parts; λ and t only for the contrast row (the other rows
    decode with λ = 0, t = 1, one decode for every grid point)."""
    keep = ("alpha", "min_keep", "max_new_tokens", "batch_size", "repetition_penalty")
    point = {"lam": params.lam, "t": params.t} if who == "contrast" else {}
    return {**base, "preset": "cd_judge_released", "who": who, **{k: getattr(params, k) for k in keep}, **point,
            "eos": sorted(eos_ids(pair.expert.config, pair.tokenizer)), "pad": pair.tokenizer.pad_token_id}
