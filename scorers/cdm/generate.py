"""Generative CDM (the CDM paper, Algorithm 1): negatives made by regenerating segments of a positive text
from the degraded amateur, log p_a^-(v) = log_softmax_v((1 + γ) · log p_a(v) − γ · log p_e(v)), spliced in
at character offsets. Seq2seq pairs infill at a sentinel; causal pairs continue the text before the
segment. Every draw is seeded by sha256 (docs/methods/cdm.md)."""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from cscore.errors import ConfigError
from cscore.scorers.cdm import STRATEGIES
from cscore.scorers.models.anatomy import cache_attribute, decoder_base
from cscore.scorers.models.loaded import eos_ids

LOGP_FLOOR = -1e4  # log-probabilities are floored here so that (1+γ)·log p_a − γ·log p_e never meets ∞ − ∞
SPEAKER = re.compile(r"^\s*(?:[A-Z][\w .'-]{0,30}|[Ss]peaker ?\w*):\s*")  # "User: ", "System: ", "A: "
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def seed_of(*parts) -> int:
    """A 63-bit integer from sha256 of the parts (the same on any machine and numpy / torch version)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def item_rng(seed: int, *parts) -> np.random.Generator:
    return np.random.default_rng(seed_of(seed, *parts))


def torch_generator(seed: int, *parts) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed_of(seed, *parts))
    return gen


def token_boundaries(tokenizer, text: str) -> list[int]:
    """Character offsets where the tokens of ``text`` start, plus len(text): strictly increasing, first 0."""
    if not text:
        return [0]
    try:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        starts = [s for s, e in enc["offset_mapping"] if e > s]
    except (NotImplementedError, KeyError, TypeError):  # a slow tokenizer: no offsets
        starts = [m.start() for m in re.finditer(r"\S+", text)]
    return sorted({0, *[s for s in starts if 0 < s < len(text)], len(text)})


def trim(text: str, a: int, b: int) -> tuple[int, int]:
    """[a, b) without whitespace at either end (may become empty: a == b)."""
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def snap(bounds: list[int], a: int, b: int) -> tuple[int, int]:
    """The smallest run of whole tokens covering [a, b)."""
    i = int(np.searchsorted(bounds, a, side="right")) - 1
    j = int(np.searchsorted(bounds, b, side="left"))
    return bounds[max(i, 0)], bounds[min(j, len(bounds) - 1)]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence, whitespace trimmed."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append(trim(text, start, m.start()))
        start = m.end()
    spans.append(trim(text, start, len(text)))
    return [(a, b) for a, b in spans if b > a]


def utterance_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every utterance: one non-empty line each, without its speaker label."""
    spans, start = [], 0
    for line in text.split("\n"):
        label = SPEAKER.match(line)
        a, b = trim(text, start + (label.end() if label else 0), start + len(line))
        if b > a:
            spans.append((a, b))
        start += len(line) + 1
    return spans


def random_spans(n_units: int, n: int, max_span: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """n non-overlapping runs of 1..max_span units out of n_units, at least one unit apart, in order
    (fewer when they do not fit)."""
    n = max(0, min(n, (n_units + 1) // 2))
    if n == 0:
        return []
    lengths = rng.integers(1, max_span + 1, size=n)
    while lengths.sum() > n_units - (n - 1):  # shorten the longest until they fit (n <= room: each keeps >= 1)
        lengths[int(np.argmax(lengths))] -= 1
    slack = n_units - int(lengths.sum()) - (n - 1)
    gaps = np.sort(rng.choice(slack + n, size=n, replace=False)) - np.arange(n)
    starts = gaps + np.cumsum(lengths) - lengths + np.arange(n)  # the gap, the runs before and one unit each
    return [(int(a), int(a + k)) for a, k in zip(starts, lengths)]


def choose_segments(text: str, bounds: list[int], strategy: str, rng: np.random.Generator, *,
                    max_span: int = 20, n_segments: int = 3) -> list[tuple[int, int]]:
    """Character spans [a, b) of ``text`` to regenerate: sorted, non-overlapping, non-empty, trimmed
    ([] when the text offers none). ``bounds``: token_boundaries."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"cdm.generate.strategy must be {' | '.join(STRATEGIES)}, got {strategy!r}")
    units = len(bounds) - 1
    if units < 1:
        return []
    if strategy in ("sentence", "utterance"):
        spans = sentence_spans(text) if strategy == "sentence" else utterance_spans(text)
        if not spans:
            return []
        a, b = spans[int(rng.integers(len(spans)))]
        a, b = snap(bounds, a, b)
        return [trim(text, a, b)]
    n = 1 if strategy == "span" else n_segments
    for _ in range(10):  # a run of whitespace-only tokens trims to nothing: draw again
        runs = random_spans(units, n, max_span, rng)
        spans = [trim(text, bounds[i], bounds[j]) for i, j in runs]
        if spans and all(b > a for a, b in spans):
            return spans
    return [s for s in spans if s[1] > s[0]]


def degraded_logprobs(logp_a: torch.Tensor, logp_e: torch.Tensor, gamma: float, *, temperature: float = 1.0,
                      top_k: int | None = None, top_p: float | None = None,
                      banned: list[int] | None = None) -> torch.Tensor:
    """log p_a^- over the vocabulary at temperature T, without ``banned``, cut to top_k and / or top_p."""
    a = logp_a.double().clamp(min=LOGP_FLOOR)
    e = logp_e.double().clamp(min=LOGP_FLOOR)
    z = ((1.0 + gamma) * a - gamma * e) / temperature
    if banned:
        z[banned] = -torch.inf
    if top_k is not None and top_k < z.numel():
        kth = torch.topk(z, top_k).values[-1]
        z = torch.where(z < kth, -torch.inf, z)
    if top_p is not None and top_p < 1.0:
        lp = torch.log_softmax(z, dim=-1)
        order = torch.argsort(lp, descending=True)
        before = torch.cumsum(lp[order].exp(), dim=0) - lp[order].exp()  # mass of the tokens ranked above
        drop = order[before >= top_p]
        z[drop] = -torch.inf
    return torch.log_softmax(z, dim=-1)


@dataclass
class Sampling:
    gamma: float = 1.0
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None


class DegradedSampler:
    """Samples fills from p_a^- of a ``cscore.scorers.api.ModelPair``, one item at a time, KV cache kept."""

    def __init__(self, pair, sampling: Sampling):
        if pair.amateur is None:
            raise ConfigError("generative CDM needs an amateur: set pair.amateur.path or pair.amateur.early_exit")
        self.pair, self.sampling = pair, sampling
        self.tokenizer = pair.tokenizer
        self.seq2seq = pair.expert.is_encoder_decoder
        self.passes = pair.passes(["expert", "amateur"])  # [(model, {role: None | exit layer})]
        self.eos = eos_ids(pair.expert.model.config, self.tokenizer)
        self.vocab = len(self.tokenizer)
        if self.seq2seq:
            self.sentinel0, self.sentinel1, self.sentinels = sentinels(self.tokenizer, pair.expert.name)

    def _sample(self, lps: dict, gen: torch.Generator, banned: list[int] | None = None) -> int:
        n = min(self.vocab, lps["expert"].numel(), lps["amateur"].numel())  # head rows past the tokenizer: never
        s = self.sampling
        lp = degraded_logprobs(lps["amateur"][:n].cpu(), lps["expert"][:n].cpu(), s.gamma, temperature=s.temperature,
                               top_k=s.top_k, top_p=s.top_p, banned=banned)
        return int(torch.multinomial(lp.exp(), 1, generator=gen))

    @torch.inference_mode()
    def continue_causal(self, context_ids: list[int], n_tokens: int, gen: torch.Generator) -> list[int]:
        """Up to ``n_tokens`` tokens sampled after ``context_ids``; stops at EOS (not included)."""
        from cscore.scorers.engine.engine import LayerTap
        from cscore.scorers.engine.head import head_logits

        out: list[int] = []
        with contextlib.ExitStack() as stack:
            taps = {}
            for lm, heads in self.passes:
                for role, k in heads.items():
                    if k is not None:
                        taps[role] = LayerTap(lm.model, k)
                        stack.callback(taps[role].close)
            past = [None] * len(self.passes)
            feed = list(context_ids)
            for _ in range(n_tokens):
                lps = {}
                for r, (lm, heads) in enumerate(self.passes):  # one forward pass per model and step
                    x = torch.tensor([feed], device=lm.device)
                    base = decoder_base(lm.model)
                    cache = cache_attribute(base)  # the keyword and the output's field
                    o = base(input_ids=x, use_cache=True, **{cache: past[r]})
                    past[r] = getattr(o, cache)
                    for role, k in heads.items():
                        h = o.last_hidden_state[:, -1] if k is None else taps[role].normed()[:, -1]
                        lps[role] = torch.log_softmax(head_logits(lm.model, h)[0].double(), dim=-1)
                tok = self._sample(lps, gen)
                if tok in self.eos:
                    break
                out.append(tok)
                feed = [tok]
        return out

    @torch.inference_mode()
    def infill(self, encoder_ids: list[int], max_tokens: int, gen: torch.Generator) -> list[int]:
        """The fill of <extra_id_0>, sampled until <extra_id_1>, EOS or ``max_tokens``."""
        from cscore.scorers.engine.seq2seq import decoder_start

        models = [(role, lm) for lm, heads in self.passes for role in heads]  # seq2seq: no early exits
        encoded: dict[str, tuple[Any, torch.Tensor]] = {}
        for role, lm in models:
            x = torch.tensor([encoder_ids], device=lm.device)
            encoded[role] = (lm.model.get_encoder()(input_ids=x, attention_mask=torch.ones_like(x)),
                             torch.ones_like(x))
        past: dict[str, Any] = dict.fromkeys(encoded)
        stop = {self.sentinel1, *self.eos} - {None}
        banned = sorted((set(self.sentinels) - stop) | {self.tokenizer.pad_token_id} - {None})
        feed = [decoder_start(self.pair.expert.model), self.sentinel0]
        out: list[int] = []
        for _ in range(max_tokens):
            lps = {}
            for role, lm in models:
                enc, mask = encoded[role]
                x = torch.tensor([feed], device=lm.device)
                cache = cache_attribute(lm.model)
                o = lm.model(encoder_outputs=enc, attention_mask=mask, use_cache=True, decoder_input_ids=x,
                             **{cache: past[role]})
                past[role] = getattr(o, cache)
                lps[role] = torch.log_softmax(o.logits[0, -1].double(), dim=-1)
            tok = self._sample(lps, gen, banned=banned)
            if tok in stop:
                break
            out.append(tok)
            feed = [tok]
        return out

    def fill(self, prompt: str, text: str, a: int, b: int, n_tokens: int | None,
             gen: torch.Generator) -> tuple[int, str]:
        """Regenerate text[a:b]: (where the replaced part starts, the new text for text[start:b]).
        ``n_tokens`` None: as many tokens as the segment has (seq2seq: a cap of twice that + 5)."""
        tok = self.tokenizer
        if self.seq2seq:
            removed = len(tok(text[a:b], add_special_tokens=False)["input_ids"])
            joiner = "" if not prompt or prompt[-1].isspace() else "\n"
            masked = prompt + joiner + text[:a] + tok.convert_ids_to_tokens(self.sentinel0) + text[b:]
            ids = list(tok(masked, add_special_tokens=True)["input_ids"])
            cap = n_tokens if n_tokens is not None else 2 * removed + 5
            return a, tok.decode(self.infill(ids, cap, gen), skip_special_tokens=True).strip()
        start = a
        # the context ends on a word (" word" is one token) or a line break
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        removed = len(tok(text[start:b], add_special_tokens=False)["input_ids"])
        context = list(tok(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
        context += list(tok(text[:start], add_special_tokens=False)["input_ids"]) if start else []
        if not context:
            if tok.bos_token_id is None:
                raise ConfigError("an empty prompt and a segment at the start of the text: nothing to condition on "
                                  "and the tokenizer has no BOS token")
            context = [tok.bos_token_id]
        new = self.continue_causal(context, n_tokens if n_tokens is not None else removed, gen)
        return start, tok.decode(new, skip_special_tokens=True)


def sentinels(tokenizer, name: str = "the model") -> tuple[int, int | None, list[int]]:
    """(<extra_id_0>, <extra_id_1> or None, every <extra_id_k>) ids; a ConfigError when there are none."""
    vocab = tokenizer.get_vocab()
    found = sorted((int(m.group(1)), i) for t, i in vocab.items() if (m := re.fullmatch(r"<extra_id_(\d+)>", t)))
    if not found or found[0][0] != 0:
        raise ConfigError(f"{name}: span infilling with an encoder-decoder pair needs T5-style sentinel tokens "
                          "(<extra_id_0>, <extra_id_1>, ...) and this tokenizer has none; use a T5-family pair "
                          "or a decoder-only (causal) pair")
    ids = dict(found)
    return ids[0], ids.get(1), [i for _, i in found]


@dataclass
class Settings:
    strategy: str = "span"
    max_span: int = 20
    n_segments: int = 3
    seed: int = 0
    n_negatives: int = 1
    max_tries: int = 3
    on_identical: str = "keep"
    fill_tokens: int | None = None  # tokens to sample per segment (None: as many as it had)
    sampling: Sampling = field(default_factory=Sampling)


def make_negatives(sampler: DegradedSampler, item_id: str, prompt: str, positive: str, s: Settings) -> list[dict]:
    """``s.n_negatives`` records for one positive (``negative`` None when dropped)."""
    bounds = token_boundaries(sampler.tokenizer, positive)
    records = []
    for k in range(s.n_negatives):
        rng = item_rng(s.seed, item_id, k, "segments")
        segments = choose_segments(positive, bounds, s.strategy, rng, max_span=s.max_span, n_segments=s.n_segments)
        text, shift, spans = positive, 0, []
        for j, (a, b) in enumerate(segments):  # left to right: later contexts see the earlier fills
            for t in range(s.max_tries):
                start, new = sampler.fill(prompt, text, a + shift, b + shift, s.fill_tokens,
                                          torch_generator(s.seed, item_id, k, j, t))
                removed = text[start:b + shift]
                if new != removed:
                    break
            pos_start = start - shift
            text = text[:start] + new + text[b + shift:]
            spans.append({"start": pos_start, "end": b, "neg_start": start, "neg_end": start + len(new),
                          "removed": removed, "fill": new, "tries": t + 1, "identical": new == removed})
            shift += len(new) - (b - pos_start)
        identical = text == positive
        dropped = identical and s.on_identical == "drop"
        records.append({"index": k, "negative": None if dropped else text, "spans": spans, "identical": identical,
                        "dropped": dropped, "segments": len(segments),
                        "segments_asked": s.n_segments if s.strategy == "multi" else 1})
    return records
