"""The Python API the CLI is built on.

    from cscore import ModelPair
    pair = ModelPair.load("gguf:smollm2", amateur_early_exit="auto")
    stats = pair.statistics(prompts, hypotheses)          # one forward pass per model
    stats.score("contrast", gamma=0.1)                     # cheap, no model call
    stats.score("single", model="amateur", norm="mean")
    stats.tokens(0)                                        # per-token table of item 0
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeVar

import numpy as np
import pandas as pd

from cscore.errors import ConfigError
from cscore.scorers import methods
from cscore.scorers.engine import threads
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.report import EngineReport
from cscore.scorers.engine.runtime_defaults import MAX_LENGTH, TEMPERATURES
from cscore.scorers.engine.stats import TokenStats, exit_head
from cscore.scorers.engine.tokenize import EncodedItem, KnownIds, encode
from cscore.scorers.models.identity import model_identity
from cscore.scorers.store.cache import StatsCache, ids_digest
from cscore.scorers.store.runner import Done, InProcess, PassJob, PassReport, Pending, check_cache, pending_of, run_pass

if TYPE_CHECKING:
    from cscore.scorers.models.loaded import LoadedModel

# torch is imported only where a pair is built or a pass computed: a fully cached run imports none.

T = TypeVar("T")
log = logging.getLogger(__name__)

DEFAULT_TEMPERATURES = TEMPERATURES
# The head a cross-family model's pass is cached under, whatever its role (`B,A` reads `A,B`'s passes).
OWN_PASS = "expert"


def _keep(stats: dict, reports: dict, label: str, got: dict, report, start: float, own_role: str | None) -> None:
    """A pass's statistics and report into the run's (``own_role``: a cross-family model's, stored under its role)."""
    report.fetch_seconds = time.perf_counter() - start
    stats.update({own_role: got[OWN_PASS]} if own_role else got)
    reports[label] = report


def request_of(request: PassRequest | None, temperatures: Sequence[float] | None, models: Sequence[str] | None,
               overrides: dict) -> PassRequest:
    """``statistics``' keywords as one ``PassRequest``: ``request``, then ``temperatures`` / ``models``,
    then ``overrides`` (fields of ``PassRequest`` or ``PassOptions``; an unknown one is a TypeError)."""
    base = request if request is not None else PassRequest()
    own, named = {f.name for f in fields(PassRequest)}, {f.name for f in fields(PassOptions)}
    for key in overrides.keys() - own - named:
        raise TypeError(f"statistics() got an unexpected keyword argument {key!r}; its keywords are "
                        f"{', '.join(sorted(own | named))}")
    given = {k: v for k, v in overrides.items() if k in own}
    given.update({k: v for k, v in (("temperatures", temperatures), ("models", models)) if v is not None})
    options = given.pop("options", base.options)
    return replace(base, options=replace(options, **{k: v for k, v in overrides.items() if k not in own}), **given)


def partner_key(k) -> dict:
    """What a joint pass's cache key says of its partner."""
    return {"model": model_identity(k.source), "exit": k.exit_layer, "dtype": str(k.source.dtype)}


def _complete(found: dict[str, T | None]) -> dict[str, T]:
    """``found`` once every pass is in (None: a pass that never completed)."""
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise RuntimeError(f"passes without statistics: {missing}")
    return {k: v for k, v in found.items() if v is not None}


__all__ = ["ModelPair", "PairStatistics", "PassRequest", "ScoringInput", "load_model"]  # noqa: F822 (load_model: __getattr__)


def __getattr__(name: str):
    """``load_model``, imported with torch when first asked for."""
    if name == "load_model":
        from cscore.scorers.models.models import load_model

        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class ScoringInput:
    """Encoded items of both models; a cross-family pair has the amateur's own in ``amateur_items``."""

    items: list[EncodedItem]
    amateur_items: list[EncodedItem] | None = None
    hypotheses: list[str] | None = None

    def for_role(self, role: str) -> list[EncodedItem]:
        """The items the model in ``role`` reads (its own tokens)."""
        return self.amateur_items if role == "amateur" and self.amateur_items is not None else self.items

    @property
    def n_truncated(self) -> int:
        """Items whose source was cut (for either model of a cross-family pair)."""
        amateur: Sequence[EncodedItem | None] = self.amateur_items or [None] * len(self.items)
        return sum(it.truncated or bool(a and a.truncated) for it, a in zip(self.items, amateur))


@dataclass(frozen=True)
class PassRequest:
    """How a pair's passes run (``ModelPair.run``). ``models``: roles (None: both); ``cache`` None:
    computed, not stored; ``coordinator``: the job's, to split a pass over processes through the cache;
    ``progress(model_name, n_items)`` may return a per-batch callback."""

    temperatures: Sequence[float] = DEFAULT_TEMPERATURES
    models: Sequence[str] | None = None
    options: PassOptions = field(default_factory=PassOptions)
    cache: StatsCache | None = None
    coordinator: InProcess | None = None
    progress: Callable[[str, int], Callable[[int], None] | None] | None = None


@dataclass
class PairStatistics:
    """Per-token statistics of the loaded models on one list of items; every method is a pure function of them."""

    stats: dict[str, TokenStats]
    inputs: ScoringInput
    reports: dict[str, EngineReport] = field(default_factory=dict)
    tokenizers: dict | None = None  # a cross-family pair's, by role: methods compute on aligned units
    _units: dict[str, TokenStats] | None = field(default=None, repr=False)

    @property
    def models(self) -> list[str]:
        return list(self.stats)

    @property
    def aligned(self) -> bool:
        return self.tokenizers is not None and len(self.stats) > 1

    def unit_stats(self) -> dict[str, TokenStats]:
        """Each model's statistics summed over the aligned units (computed once, no model runs)."""
        if self._units is None:
            from cscore.scorers.engine import align

            tokenizers, texts = self.tokenizers, self.inputs.hypotheses
            if tokenizers is None or texts is None:
                raise ValueError("aligned units need a cross-family pair's statistics (its tokenizers and texts)")
            roles = list(self.stats)
            ids = {r: [it.hyp_ids for it in self.inputs.for_role(r)] for r in roles}
            units = align.align({r: tokenizers[r] for r in roles}, texts, ids)
            self._units = {r: align.unit_stats(self.stats[r], units.index[r], units.offsets) for r in roles}
        return self._units

    def method_stats(self, method: str, model: str = "expert") -> dict[str, TokenStats]:
        """What ``method`` reads: the token statistics, or a cross-family pair's unit statistics."""
        if not self.aligned:
            return self.stats
        if method == "single":
            return {model: self.stats[model]} if model in self.stats else self.stats
        methods.check_aligned(method)
        return self.unit_stats()

    def score(self, method: str, **params) -> np.ndarray:
        return methods.score(method, self.method_stats(method, params.get("model", "expert")), **params)

    def score_params(self, p: methods.MethodParams) -> np.ndarray:
        """Method ``p.name``'s scores with its settings already checked (a planned variant's)."""
        method = methods.get(p.name)
        return method.score(self.method_stats(p.name, method.needs(p)[0]), p)

    def token_scores(self, method: str, **params) -> np.ndarray:
        return methods.token_scores(method, self.method_stats(method, params.get("model", "expert")), **params)

    def tokens(self, i: int, tokenizer=None, temperature: float = 1.0) -> pd.DataFrame:
        """Per-token table of item ``i``: token id (and text) and each model's log-probs at ``temperature``."""
        first = next(iter(self.stats.values()))
        sl = first.item(i)
        table = {"token_id": first.token_ids[sl]}
        if tokenizer is not None:
            table["token"] = tokenizer.convert_ids_to_tokens(first.token_ids[sl].tolist())
        for name, st in self.stats.items():
            if self.aligned and st is not first:  # its own tokens: another table
                continue
            table[f"logp.{name}"] = st.lp(temperature)[sl]
            table[f"logp_max.{name}"] = st.lp_max(temperature)[sl]
        return pd.DataFrame(table)


def resume(cache: StatsCache, key: str, job: PassJob):
    """The checkpoint of ``job``'s pass (``key``), loaded with what an interrupted run kept (None: checkpoints off)."""
    if cache.checkpoint_seconds is None:
        return None
    checkpoint = cache.checkpoint(key, list(job.heads), job.offsets(), job.temperatures, cache.checkpoint_seconds)
    if checkpoint is not None and checkpoint.load():
        log.info("statistics (%s): resumed %d of %d items from a checkpoint", "+".join(job.heads), checkpoint.n_kept,
                 len(job.pairs))
    return checkpoint


def checkpointed(compute, checkpoint, label: str):
    """``compute(checkpoint)``; when it stops early (an error, Ctrl-C), the batches it completed are kept."""
    if checkpoint is None:
        return compute()
    try:
        got, report = compute(checkpoint)
    except BaseException as err:
        try:
            checkpoint.flush()
        except Exception:  # noqa: BLE001 - e.g. a device that failed: the first error is the one to see
            log.debug("checkpoint not flushed", exc_info=True)
        if isinstance(err, KeyboardInterrupt) and checkpoint.n_saved:  # for the one line Ctrl-C prints
            note = f"statistics ({label}): {checkpoint.n_saved} of {checkpoint.n_items} items kept in a checkpoint"
            if sys.version_info >= (3, 11):
                err.add_note(note)
            else:  # what add_note does (Python 3.10 has no add_note; cli/exits.py reads __notes__)
                setattr(err, "__notes__", [*getattr(err, "__notes__", ()), note])
        raise
    report.resumed = checkpoint.n_kept
    return got, report


def cached(cache: StatsCache, job: PassJob) -> Done:
    """One unsplit pass through the statistics cache: read, or computed (resuming from its checkpoint) and stored."""
    done: dict = {}  # the pass computed now: its report and checkpoint

    def compute_entry(key: str):
        done["checkpoint"] = resume(cache, key, job)
        got, done["report"] = checkpointed(job.compute, done["checkpoint"], "+".join(job.heads))
        return got, {"models": job.models, "report": done["report"].record()}

    def discard() -> None:  # the entry is stored: its checkpoint is not needed any more
        if done["checkpoint"] is not None:
            done["checkpoint"].discard()

    got, meta = cache.get_or_compute(job.parts, compute_entry, job.stats_type, on_saved=discard)
    return Done(got, PassReport.of_entry(meta) if meta is not None else done["report"])


class ModelPair:
    """An expert and (optionally) an amateur: two causal LMs, or two encoder-decoders sharing one
    tokenizer. Causal LMs with different tokenizers make a cross-family pair (``aligned``): each
    scores its own tokens and the methods compare them on aligned units (``cscore.scorers.engine.align``)."""

    def __init__(self, expert: LoadedModel, amateur: LoadedModel | None = None):
        from cscore.scorers.models import size
        from cscore.scorers.models.models import check_same_kind, check_same_vocabulary

        self.aligned = False
        if amateur is not None:
            check_same_kind(expert, amateur)
            if expert.is_encoder_decoder:
                check_same_vocabulary(expert, amateur)
            self.aligned = expert.tokenizer.get_vocab() != amateur.tokenizer.get_vocab()  # ids of other strings
            size.warn_if_upside_down(expert, amateur)  # one line when the amateur is not the smaller
        self.expert = expert
        self.amateur = amateur

    @classmethod
    def load(cls, expert: str, amateur: str | None = None, *, amateur_early_exit: int | str | None = None,
             revision: str | None = None, amateur_revision: str | None = None, device: str = "auto",
             dtype: str = "auto", lazy: bool = False) -> "ModelPair":
        """Load by spec. With ``amateur_early_exit`` (layer count or "auto") and no other amateur
        spec, the amateur is the expert's first layers. ``lazy``: weights load on first use."""
        from cscore.scorers.models.models import load_model

        get = partial(load_model, device=device, dtype=dtype, lazy=lazy)
        return cls._made(get, (expert, revision), (amateur, amateur_revision), amateur_early_exit)

    @classmethod
    def pooled(cls, expert: str, amateur: str | None = None, *, amateur_early_exit: int | str | None = None,
               revision: str | None = None, amateur_revision: str | None = None,
               options: PassOptions | None = None) -> "ModelPair":
        """``load`` from this process's model pool; pooled models this pair does not use are dropped."""
        from cscore.scorers.models import models as pool

        opts = options if options is not None else PassOptions()
        device, dtype = opts.device, opts.dtype
        wanted = [pool.pool_key(expert, device, dtype, revision)]
        if amateur is not None and amateur != expert:
            wanted.append(pool.pool_key(amateur, device, dtype, amateur_revision))
        pool.retain(wanted)
        get = partial(pool.pooled, device=device, dtype=dtype)
        return cls._made(get, (expert, revision), (amateur, amateur_revision), amateur_early_exit)

    @classmethod
    def _made(cls, get: Callable[..., LoadedModel], expert: tuple[str, str | None],
              amateur: tuple[str | None, str | None], amateur_early_exit: int | str | None) -> "ModelPair":
        """The pair of ``expert`` and ``amateur`` ((spec, revision) each), loaded by ``get(spec, revision=)``."""
        from cscore.scorers.models.models import early_exit

        (expert_spec, revision), (amateur_spec, amateur_revision) = expert, amateur
        exp = get(expert_spec, revision=revision)
        if amateur_early_exit is not None and amateur_spec in (None, expert_spec):
            return cls(exp, early_exit(exp, amateur_early_exit))
        if amateur_spec is None:
            return cls(exp, None)
        ama = get(amateur_spec, revision=amateur_revision)
        if amateur_early_exit is not None:
            ama = early_exit(ama, amateur_early_exit)
        return cls(exp, ama)

    @property
    def tokenizer(self):
        return self.expert.tokenizer

    @property
    def models(self) -> dict[str, LoadedModel]:
        out = {"expert": self.expert}
        if self.amateur is not None:
            out["amateur"] = self.amateur
        return out

    def encode(self, prompts: Sequence[str], hypotheses: Sequence[str], *, max_length: int = MAX_LENGTH,
               source_spans: Sequence[tuple[int, int] | None] | None = None,
               amateur_prompts: Sequence[str] | None = None,
               amateur_spans: Sequence[tuple[int, int] | None] | None = None) -> ScoringInput:
        """Encode with the expert's tokenizer; a cross-family pair also with the amateur's
        (``amateur_prompts`` / ``amateur_spans``: its own prompts, default the same)."""
        if len(prompts) != len(hypotheses):
            raise ValueError(f"{len(prompts)} prompts but {len(hypotheses)} hypotheses")
        spans = list(source_spans) if source_spans is not None else [None] * len(prompts)
        s2s = self.expert.is_encoder_decoder
        eos = self._eos() if s2s else None
        tok = KnownIds(self.tokenizer, [*prompts, *hypotheses], special=s2s)  # one batched call
        items = [encode(tok, p, h, max_length=max_length, source_span=s, index=i, seq2seq=s2s, eos_id=eos)
                 for i, (p, h, s) in enumerate(zip(prompts, hypotheses, spans))]
        if not self.aligned:
            return ScoringInput(items)
        a_prompts = list(prompts if amateur_prompts is None else amateur_prompts)
        a_spans = list(amateur_spans) if amateur_spans is not None else (
            spans if amateur_prompts is None else [None] * len(a_prompts))
        if len(a_prompts) != len(hypotheses):
            raise ValueError(f"{len(a_prompts)} amateur prompts but {len(hypotheses)} hypotheses")
        assert self.amateur is not None  # aligned: a pair of two models
        tok = KnownIds(self.amateur.tokenizer, [*a_prompts, *hypotheses], special=False)
        amateur_items = [encode(tok, p, h, max_length=max_length, source_span=s, index=i)
                         for i, (p, h, s) in enumerate(zip(a_prompts, hypotheses, a_spans))]
        return ScoringInput(items, amateur_items, list(hypotheses))

    def _eos(self) -> int:
        """The EOS a seq2seq target ends with: the tokenizer's, else the model config's."""
        eos = self.tokenizer.eos_token_id
        config = self.expert.config if self.expert.config is not None else getattr(self.expert.model, "config")
        eos = config.eos_token_id if eos is None else eos
        if isinstance(eos, (list, tuple)):
            eos = eos[0] if eos else None
        if eos is None:
            raise ConfigError(f"{self.expert.name!r} has no EOS token to end the decoder target with")
        return int(eos)

    def statistics(self, prompts: Sequence[str] | None = None, hypotheses: Sequence[str] | None = None, *,
                   inputs: ScoringInput | None = None, source_spans=None, temperatures: Sequence[float] | None = None,
                   models: Sequence[str] | None = None, request: PassRequest | None = None,
                   **overrides) -> PairStatistics:
        """Run each model once (``run``) on ``inputs``, or on ``prompts`` and ``hypotheses`` encoded here.
        ``request``, ``temperatures``, ``models`` and ``overrides`` (fields of ``PassRequest`` or
        ``PassOptions`` as keywords) make one ``PassRequest``. With a ``coordinator``, ends with
        ``Pending.stop`` when a pass waits for parts this process does not run."""
        req = request_of(request, temperatures, models, overrides)
        if inputs is None:
            if prompts is None or hypotheses is None:
                raise ValueError("give prompts and hypotheses, or inputs")
            inputs = self.encode(prompts, hypotheses, max_length=req.options.max_length, source_spans=source_spans)
        got = self.run(inputs, req)
        if isinstance(got, Pending):
            assert req.coordinator is not None  # only a split pass waits
            got.stop(req.coordinator)
        return got

    def run(self, inputs: ScoringInput, request: PassRequest) -> PairStatistics | Pending:
        """Run each model once on ``inputs`` as ``request`` says: the statistics, or ``Pending`` when a
        split pass waits for parts this process does not run. The passes run on ``options.threads``
        CPU threads (auto: the rule of ``cscore run``); torch's previous count is restored after."""
        with threads.using(request.options.threads):
            return self._run(inputs, request)

    def _run(self, inputs: ScoringInput, request: PassRequest) -> PairStatistics | Pending:
        from cscore.scorers.engine import engine

        opts, cache, progress, temperatures = request.options, request.cache, request.progress, request.temperatures
        coordinator, models = request.coordinator, request.models
        split = coordinator if coordinator is not None and coordinator.on else None
        if self.aligned and inputs.amateur_items is None and "amateur" in (models or ["amateur"]):
            raise ConfigError("a cross-family pair needs inputs encoded by its own encode() (each model's tokens)")
        check_cache(coordinator, cache)
        stats: dict[str, TokenStats | None] = {}  # None: a split pass still pending, in its place
        reports: dict[str, EngineReport | None] = {}
        waiting: dict[str, tuple[PassJob, float, str | None]] = {}
        for run_model, label, role, run_heads, pairs in self._pass_setups(inputs, models, opts):
            start, own_role = time.perf_counter(), role if self.aligned else None
            pad_id = (run_model.tokenizer if self.aligned else self.tokenizer).pad_token_id or 0

            def compute(checkpoint=None, run_model=run_model, heads=run_heads, label=label, pairs=pairs, pad_id=pad_id):
                callback = progress(label, len(pairs)) if progress else None
                return engine.compute(run_model.model, pairs, temperatures=temperatures, pad_id=pad_id,
                                      progress=callback, heads=heads, checkpoint=checkpoint, options=opts)

            if cache is None:
                got, report = compute()
            else:
                runs = {h: k.source if isinstance(k, engine.Partner) else run_model for h, k in run_heads.items()}
                names = [f"{h}: {getattr(m, 'name', run_model.name)}" for h, m in runs.items()]  # head: model name
                job = PassJob(self._parts(run_model, run_heads, pairs, temperatures, opts), run_heads, pairs,
                              list(temperatures), compute, label, names, TokenStats)
                outcome = cached(cache, job) if split is None else run_pass(cache, job, split)
                if isinstance(outcome, Pending):  # another process's batches missing: tried again after the others
                    reports[label], waiting[label] = None, (job, start, own_role)
                    stats.update(dict.fromkeys([own_role] if own_role else run_heads))  # its places, in pass order
                    continue
                got, report = outcome.stats, outcome.report
            _keep(stats, reports, label, got, report, start, own_role)
        pending: list[Pending] = []
        for label, (job, start, own_role) in waiting.items():  # tried again: other processes' parts may be in
            assert cache is not None and split is not None  # a pass waits only when split through the cache
            outcome = run_pass(cache, job, split)
            if isinstance(outcome, Done):
                _keep(stats, reports, label, outcome.stats, outcome.report, start, own_role)
            else:
                pending.append(outcome.named(label))
        if (merged := pending_of(pending)) is not None:
            return merged
        tokenizers = {r: m.tokenizer for r, m in self.models.items()} if self.aligned else None
        return PairStatistics(_complete(stats), inputs, _complete(reports), tokenizers)

    def pass_parts(self, inputs: ScoringInput, temperatures: Sequence[float], models: Sequence[str] | None,
                   opts: PassOptions) -> list[tuple[str, dict]]:
        """(label, cache key parts) of each pass ``run`` makes for ``inputs``."""
        return [(label, self._parts(run_model, heads, pairs, temperatures, opts))
                for run_model, label, _, heads, pairs in self._pass_setups(inputs, models, opts)]

    def _pass_setups(self, inputs: ScoringInput, models: Sequence[str] | None,
                     opts: PassOptions) -> Iterator[tuple[LoadedModel, str, str, dict, list]]:
        """(model, label, first role, heads it runs, (prompt ids, hypothesis ids) of each item) of each pass.
        A cross-family model runs alone: its pass is keyed by what it is (``OWN_PASS``), not its role."""
        for run_model, heads in self.passes(models, opts.distribution, opts.exits):
            role = next(iter(heads))
            pairs = [(it.prompt_ids, it.hyp_ids) for it in inputs.for_role(role)]
            yield run_model, "+".join(heads), role, {OWN_PASS: heads[role]} if self.aligned else heads, pairs

    @staticmethod
    def _parts(run_model, heads, pairs, temperatures, opts: PassOptions) -> dict:
        """The cache key's parts of one pass on ``pairs`` (a split pass has the same key)."""
        from cscore.scorers.engine import engine, seq2seq

        heads = {h: partner_key(k) if isinstance(k, engine.Partner) else k for h, k in heads.items()}
        parts = {"model": model_identity(run_model), "heads": heads, "dtype": str(run_model.dtype),
                 "device": run_model.device.type, "temperatures": [float(t) for t in temperatures],
                 "ids": ids_digest(pairs),
                 # an encoder-decoder's ids are (encoder ids, decoder targets): its key part instead of sharing's
                 **opts.key_parts(shared=opts.prefix_sharing and not run_model.is_encoder_decoder)}
        if run_model.is_encoder_decoder:  # causal keys unchanged
            parts.update(seq2seq.key_part(run_model))
        return parts

    def passes(self, wanted: Sequence[str] | None, distribution: bool = False,
               exits: Sequence[int] = ()) -> list[tuple[LoadedModel, dict]]:
        """Forward passes to run: an early-exit amateur rides on the expert's pass; with ``distribution``
        both run as one joint pass (the amateur an ``engine.Partner``). ``exits``: DoLa's candidate
        layers, heads ``layer_<k>`` of the expert's pass."""
        from cscore.scorers.engine import engine

        wanted = list(self.models) if wanted is None else list(wanted)
        passes: list[tuple[LoadedModel, dict]] = []
        if "expert" in wanted:
            passes.append((self.expert, {"expert": None, **self.exit_heads(exits)}))
        if "amateur" in wanted:
            ama = self.amateur
            if ama is None:
                raise ConfigError("this pair has no amateur model (give an amateur model or an early exit "
                                  "of the expert)")
            if distribution and self.aligned:
                raise ConfigError("the distributional statistics compare two distributions over one vocabulary, "
                                  "and this pair's tokenizers differ (a cross-family pair)")
            full = ama.parent or ama  # the model an early exit is cut from (its exit_layer: None when none)
            if ama.parent is self.expert and "expert" in wanted:
                passes[0][1]["amateur"] = ama.exit_layer
            elif distribution and "expert" in wanted:
                passes[0][1]["amateur"] = engine.Partner(full, ama.exit_layer)
            else:
                passes.append((full, {"amateur": ama.exit_layer}))
        return passes

    def exit_heads(self, exits: Sequence[int]) -> dict[str, int]:
        """{``layer_<k>``: k} for DoLa's candidate layers, each checked against the expert's depth."""
        if exits and self.expert.is_encoder_decoder:
            raise ConfigError("dola's candidate layers are early exits of a decoder-only expert; this expert is an "
                              "encoder-decoder")
        total = self.expert.info.get("layers")
        for k in exits:
            if k < 0 or (total is not None and k >= total):
                raise ConfigError(f"dola: candidate layer {k} is not an early exit of the expert "
                                  f"(0 to {'its depth' if total is None else total - 1}: 0 is the embedding output); "
                                  "give method.layers, e.g. the lower half of its layers")
        return {exit_head(k): int(k) for k in exits}

    def score(
        self, prompts: Sequence[str], hypotheses: Sequence[str], method: str = "contrast", **params
    ) -> np.ndarray:
        """One-call convenience: statistics then one method (temperatures taken from params)."""
        full = methods.with_defaults(method, params)
        temps = sorted({1.0} | {float(v) for k, v in full.items() if k in ("t", "t_exp", "t_ama", "t_weight")})
        needed = methods.token_method(method).needs(methods.params(method, params))
        joint = methods.get(method).distributional(full)  # the distributional statistics: a joint pass
        return self.statistics(prompts, hypotheses, temperatures=temps, models=needed, distribution=joint,
                               exits=methods.get(method).exits(full)).score(method, **params)
