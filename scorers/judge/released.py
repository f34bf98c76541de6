"""cd_judge_released: the CD-judge contrastive decoding as its released code
(``akkikiki/contrastive_decoding_llm_judge`` at commit 764691b) computes it: t divides the MAIN logits, the
assistant's step-1 log-probs are fixed, the relative-top filter keeps max(top 1000, p >= 0.1 max); each step
is mapped to that code in docs/methods/cd-judge.md. No code is taken from it. Batch-independent, except that
with a repetition penalty a left-padded row's pad id (EOS) counts as seen, as there."""

from __future__ import annotations

import math
import numbers
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Collection, Sequence

import torch

from cscore.errors import ConfigError
from cscore.scorers.engine.engine import LayerTap
from cscore.scorers.engine.head import head_logits
from cscore.scorers.judge.parse import released_response_text
from cscore.scorers.models.anatomy import cache_attribute, decoder_base, decoder_layers

RELATIVE_TOP = 0.1  # _relative_top_filter(relative_top=0.1)
MIN_TOKENS_TO_KEEP = 1000  # _select_contrast passes min_tokens_to_keep=1000
ASST_FILTER_VALUE = -1e-3  # _relative_top_filter(base_filter_value=-1e-3)
MAX_NEW_TOKENS = 64  # llama_eval.py
MAX_PROMPT_TOKENS = 2048  # llama_eval.py: truncation=True, max_length=2048


def _whole(x) -> bool:
    """Whether ``x`` is an integer (not a bool)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _as_float(x: torch.Tensor) -> torch.Tensor:
    """float64 stays float64; anything else becomes float32 (the released ``.float()``)."""
    return x if x.dtype == torch.float64 else x.float()


def _check(lam: float | None, t: float, alpha: float, min_keep: int, vocab: int | None) -> None:
    if lam is not None and not math.isfinite(lam):
        raise ConfigError(f"cd_judge_released: lam must be finite, got {lam}")
    if not (t > 0 and math.isfinite(t)):
        raise ConfigError(f"cd_judge_released: t must be positive, got {t}")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"cd_judge_released: alpha must be in [0, 1], got {alpha}")
    if not _whole(min_keep) or not 1 <= min_keep <= (vocab or min_keep):  # the released code: an IndexError
        size = "" if vocab is None else f" ({vocab})"
        raise ConfigError(f"cd_judge_released: min_keep must be an integer between 1 and the vocabulary "
                          f"size{size}, got {min_keep!r}")


def relative_top_filter(main_logits: torch.Tensor, asst_logits: torch.Tensor, *, t: float,
                        alpha: float = RELATIVE_TOP, min_keep: int = MIN_TOKENS_TO_KEEP,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(main log-probs, assistant log-probs) [B, V] as the released ``_relative_top_filter``: main
    ``log_softmax(main_logits / t)``, assistant at temperature 1; tokens whose main log-prob is strictly below
    ``min(min_keep-th largest, max + log(alpha))`` get -inf (main) and -1e-3 (assistant); ``alpha=0`` keeps all."""
    main = _as_float(main_logits)
    if main.dim() != 2 or asst_logits.shape != main.shape:
        raise ValueError(f"main and assistant logits must both be [B, V]; got {tuple(main_logits.shape)} "
                         f"and {tuple(asst_logits.shape)}")
    _check(None, t, alpha, min_keep, main.shape[-1])
    main = (main / t).log_softmax(dim=-1)
    asst = asst_logits.to(device=main.device, dtype=main.dtype).log_softmax(dim=-1)
    kth = main.topk(int(min_keep), dim=-1).values[:, -1]  # = sorted descending [..., min_keep - 1]
    rel = main.max(dim=-1).values + (math.log(alpha) if alpha > 0 else -math.inf)
    drop = main < torch.minimum(kth, rel)[:, None]
    return main.masked_fill(drop, -math.inf), asst.masked_fill(drop, ASST_FILTER_VALUE)


def relative_top_scores(main_logits: torch.Tensor, asst_logprobs: torch.Tensor, *, lam: float, t: float,
                        alpha: float = RELATIVE_TOP, min_keep: int = MIN_TOKENS_TO_KEEP) -> torch.Tensor:
    """One step's contrasted scores [B, V] (``contrastive_decoding.py::_select_contrast``):
    ``main_logprob - lam * asst_logprob`` after ``relative_top_filter``."""
    if not math.isfinite(lam):
        raise ConfigError(f"cd_judge_released: lam must be finite, got {lam}")
    main, asst = relative_top_filter(main_logits, asst_logprobs, t=t, alpha=alpha, min_keep=min_keep)
    return main - lam * asst


def apply_repetition_penalty(scores: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """transformers' ``RepetitionPenaltyLogitsProcessor`` on the ids marked in ``seen`` ([B, >= V] bool)."""
    if penalty == 1.0:
        return scores
    seen = seen[:, :scores.shape[-1]]
    return torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)


def _left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device):
    """(ids, attention mask, position ids) [B, W], left-padded; positions count real tokens from 0."""
    if not prompts:
        raise ValueError("no prompts")
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError(f"prompt {i} is empty")
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
        mask[r, width - len(p):] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device)


def _seen(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """[B, V + 1] bool: which ids occur in each row of ``ids``; column V collects every id >= V."""
    seen = torch.zeros((ids.shape[0], vocab + 1), dtype=torch.bool, device=ids.device)
    seen.scatter_(1, ids.clamp(max=vocab), True)
    return seen


def _logits(model, hidden: torch.Tensor, vocab_size: int | None) -> torch.Tensor:
    logits = head_logits(model, hidden)
    return logits if vocab_size is None else logits[:, :vocab_size]


def _asst_logprobs(model, hidden, ids, vocab_size, penalty) -> torch.Tensor:
    """Step-1 assistant log-probs from its last hidden state (vocabulary cut, repetition penalty applied)."""
    logits = _logits(model, hidden, vocab_size)
    logits = apply_repetition_penalty(logits, _seen(ids, logits.shape[-1]), penalty)
    return logits.log_softmax(dim=-1)


@torch.inference_mode()
def first_step_logprobs(model, prompts: Sequence[Sequence[int]], *, pad_id: int, exit_layer: int | None = None,
                        vocab_size: int | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """The assistant's log-probs [B, V] for the first new token, from one left-padded pass over ``prompts``;
    with ``exit_layer=k`` the assistant is ``model``'s first k layers. ``vocab_size`` cuts the logits;
    ``repetition_penalty`` (the main model's, as the released assistant's ``generate`` applies) comes first."""
    padded = _left_pad(prompts, pad_id, next(model.parameters()).device)
    out, exited = _forward(model, padded, exit_layer, use_cache=False)
    hidden = out.last_hidden_state[:, -1] if exited is None else exited
    return _asst_logprobs(model, hidden, padded[0], vocab_size, repetition_penalty)


def _forward(model, padded, exit_layer: int | None, use_cache: bool):
    """(the decoder's output over ``padded``, the normed state after ``exit_layer`` layers at the last position
    or None)."""
    ids, mask, positions = padded
    if exit_layer is not None and not (_whole(exit_layer) and 1 <= exit_layer <= len(decoder_layers(model))):
        raise ConfigError("cd_judge_released: the assistant's exit layer must be between 1 and "
                          f"{len(decoder_layers(model))}, got {exit_layer!r}")
    with LayerTap(model, int(exit_layer)) if exit_layer is not None else nullcontext() as tap:
        out = decoder_base(model)(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=use_cache)
        return out, None if tap is None else tap.norm(tap.kept()[:, -1])


@dataclass(frozen=True)
class Decoding:
    """The released decode's settings besides the rule (λ, t) and the assistant (``decode``)."""
    eos_ids: Collection[int]
    pad_id: int
    alpha: float = RELATIVE_TOP
    min_keep: int = MIN_TOKENS_TO_KEEP
    max_new_tokens: int = MAX_NEW_TOKENS
    vocab_size: int | None = None
    repetition_penalty: float = 1.0


@torch.inference_mode()
def decode(model, prompts: Sequence[Sequence[int]], asst_first: torch.Tensor | None = None, *, how: Decoding,
           lam: float, t: float, asst_exit_layer: int | None = None,
           return_first_scores: bool = False) -> list[list[int]] | tuple[list[list[int]], torch.Tensor]:
    """Greedy contrastive decoding as the released ``_contrastive_decoding``: the new ids per row.

    The assistant's step-1 log-probs are fixed for every step: ``asst_first`` [B, V] or, with
    ``asst_exit_layer=k``, ``model``'s first k layers on the prefill. Each step: ``relative_top_scores``,
    the repetition penalty, argmax; a row stops at an id of ``eos_ids`` (not returned) or after
    ``max_new_tokens``. ``return_first_scores``: also the step-1 scores [B, V] on the CPU."""
    max_new_tokens, vocab_size, repetition_penalty = how.max_new_tokens, how.vocab_size, how.repetition_penalty
    contrast, batch = (lam, t, how.alpha, how.min_keep), len(prompts)
    _check_decode(asst_first, asst_exit_layer, max_new_tokens, contrast, repetition_penalty, batch)
    eos = {int(e) for e in how.eos_ids}
    device = next(model.parameters()).device
    ids, mask, positions = _left_pad(prompts, how.pad_id, device)
    if max_new_tokens == 0:
        empty: list[list[int]] = [[] for _ in range(batch)]
        return (empty, torch.empty(0)) if return_first_scores else empty
    base, cache, logits, asst, seen, next_pos = _prefill(model, (ids, mask, positions), asst_first, asst_exit_layer,
                                                         how, [contrast])
    vocab = logits.shape[-1]
    results: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    first_scores = torch.empty(0)  # the step-1 scores (step 0 always runs: max_new_tokens > 0)
    token = None
    for step in range(max_new_tokens):
        if step > 0:
            mask, cache, next_pos, logits = _step(model, base, token, mask, next_pos, cache, vocab_size)
        scores = _step_scores(logits, asst, contrast, seen, repetition_penalty)
        if step == 0 and return_first_scores:
            first_scores = scores.cpu()
        chosen = scores.argmax(dim=-1).tolist()
        for r in range(batch):  # appended to the unfinished rows; a row stops at EOS, finished rows are fed pad
            if done[r]:
                chosen[r] = int(how.pad_id)
            elif chosen[r] in eos:
                done[r] = True
            else:
                results[r].append(chosen[r])
        if all(done):
            break
        token = torch.tensor(chosen, dtype=torch.long, device=device)
        if seen is not None:
            seen.scatter_(1, token.clamp(max=vocab)[:, None], True)
    return (results, first_scores) if return_first_scores else results


@torch.inference_mode()
def decode_tree(model, prompts: Sequence[Sequence[int]], asst_first: torch.Tensor | None = None, *, how: Decoding,
                rules: Sequence[tuple[float, float]], asst_exit_layer: int | None = None) -> list[list[list[int]]]:
    """``decode`` under several (lam, t) ``rules`` at once: ``out[j][i]`` is ``decode``'s row i under
    rules[j]. One prefill; each batch row is a (prompt, path) some rules reached, branching where they differ."""
    max_new_tokens, vocab_size, repetition_penalty = how.max_new_tokens, how.vocab_size, how.repetition_penalty
    batch = len(prompts)
    contrasts = [(lam, t, how.alpha, how.min_keep) for lam, t in rules]
    for contrast in contrasts:
        _check_decode(asst_first, asst_exit_layer, max_new_tokens, contrast, repetition_penalty, batch)
    out: list[list[list[int]]] = [[[] for _ in range(batch)] for _ in rules]
    if max_new_tokens == 0 or not rules:
        return out
    device = next(model.parameters()).device
    ids, mask, positions = _left_pad(prompts, how.pad_id, device)
    base, cache, logits, asst, seen, next_pos = _prefill(model, (ids, mask, positions), asst_first, asst_exit_layer,
                                                         how, contrasts)
    vocab = logits.shape[-1]
    # (prompt, rules, path so far)
    rows: list[tuple[int, list[int], list[int]]] = [(i, list(range(len(rules))), []) for i in range(batch)]
    eos = {int(e) for e in how.eos_ids}
    token = None
    for step in range(max_new_tokens):
        if step > 0:
            mask, cache, next_pos, logits = _step(model, base, token, mask, next_pos, cache, vocab_size)
        picks = _tree_picks(logits, asst, rows, contrasts, seen, repetition_penalty)
        rows, keep, chosen = _branch(rows, picks, eos, out, last=step == max_new_tokens - 1)
        if not rows:
            break
        index = torch.tensor(keep, dtype=torch.long, device=device)
        cache.reorder_cache(index)
        mask, next_pos = mask[index], next_pos[index]
        token = torch.tensor(chosen, dtype=torch.long, device=device)
        if seen is not None:
            seen = seen[index]
            seen.scatter_(1, token.clamp(max=vocab)[:, None], True)
    return out


def _tree_picks(logits, asst, rows, contrasts, seen, penalty) -> dict[tuple[int, int], int]:
    """{(row, rule): the token the rule chooses on that row}."""
    picks = {}
    for j, contrast in enumerate(contrasts):
        members = [k for k, (_, js, _) in enumerate(rows) if j in js]
        if not members:
            continue
        sel = torch.tensor(members, dtype=torch.long, device=logits.device)
        prm = torch.tensor([rows[k][0] for k in members], dtype=torch.long, device=logits.device)
        scores = _step_scores(logits[sel], asst[prm], contrast, None if seen is None else seen[sel], penalty)
        for k, tok in zip(members, scores.argmax(dim=-1).tolist()):
            picks[k, j] = int(tok)
    return picks


def _branch(rows, picks, eos: set[int], out, last: bool):
    """(rows, old row of each, token each is fed) after one step: each row's rules grouped by their
    token; a group at EOS or its last allowed token ends (its path goes to ``out``)."""
    new_rows, keep, chosen = [], [], []
    for k, (i, js, path) in enumerate(rows):
        groups: dict[int, list[int]] = {}
        for j in js:
            groups.setdefault(picks[k, j], []).append(j)
        for tok, group in groups.items():
            if tok in eos or last:
                for j in group:
                    out[j][i] = path if tok in eos else path + [tok]
                continue
            new_rows.append((i, group, path + [tok]))
            keep.append(k)
            chosen.append(tok)
    return new_rows, keep, chosen


def _step(model, base, token, mask, next_pos, cache, vocab_size):
    """One cached decoding step (the chosen ``token`` per row in): (mask, cache, next positions, logits)."""
    cache_name = cache_attribute(base)
    mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
    out = base(input_ids=token[:, None], attention_mask=mask, position_ids=next_pos[:, None],
               use_cache=True, **{cache_name: cache})
    logits = _logits(model, out.last_hidden_state[:, -1], vocab_size)
    return mask, getattr(out, cache_name), next_pos + 1, logits


def _step_scores(logits, asst, contrast: tuple, seen, repetition_penalty: float) -> torch.Tensor:
    """A step's contrasted scores, the repetition penalty applied where ``seen`` is kept."""
    lam, t, alpha, min_keep = contrast
    scores = relative_top_scores(logits, asst, lam=lam, t=t, alpha=alpha, min_keep=min_keep)
    if seen is not None:
        scores = apply_repetition_penalty(scores, seen, repetition_penalty)
    return scores


def _check_decode(asst_first, asst_exit_layer, max_new_tokens, contrast: tuple[float | None, float, float, int],
                  repetition_penalty, batch: int) -> None:
    """decode's arguments checked."""
    if (asst_first is None) == (asst_exit_layer is None):
        raise ValueError("give exactly one of asst_first (the assistant's step-1 log-probs) and asst_exit_layer")
    if not _whole(max_new_tokens) or max_new_tokens < 0:
        raise ConfigError(f"cd_judge_released: max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    _check(*contrast, None)
    if not repetition_penalty > 0:
        raise ConfigError(f"cd_judge_released: repetition_penalty must be positive, got {repetition_penalty}")
    if asst_first is not None and asst_first.shape[0] != batch:
        raise ValueError(f"asst_first has {asst_first.shape[0]} rows for {batch} prompts")


def _prefill(model, padded, asst_first, asst_exit_layer, how: Decoding,
             contrasts: list[tuple[float, float, float, int]]):
    """decode's prefill over ``padded``: (decoder base, KV cache, last main logits, the assistant's fixed
    log-probs, the ids seen per row or None, next positions); ``contrasts`` are checked against the vocabulary."""
    ids = padded[0]
    vocab_size, repetition_penalty = how.vocab_size, how.repetition_penalty
    base = decoder_base(model)
    out, asst_hidden = _forward(model, padded, asst_exit_layer, use_cache=True)
    cache = getattr(out, cache_attribute(base))
    logits = _logits(model, out.last_hidden_state[:, -1], vocab_size)
    batch, vocab = len(ids), logits.shape[-1]
    if asst_hidden is not None:
        asst = _asst_logprobs(model, asst_hidden, ids, vocab_size, repetition_penalty)
    else:
        asst = asst_first.to(device=ids.device, dtype=_as_float(logits).dtype)
    if asst.shape != (batch, vocab):
        raise ValueError(f"the assistant's log-probs are {tuple(asst.shape)}, the main model's logits "
                         f"{(batch, vocab)}: the vocabularies differ (vocab_size cuts both)")
    for contrast in contrasts:
        _check(*contrast, vocab)
    return base, cache, logits, asst, _seen(ids, vocab) if repetition_penalty != 1.0 else None, padded[2][:, -1] + 1


def released_prompt_ids(tokenizer, text: str, *, role: str = "system", add_generation_prompt: bool = False,
                        max_length: int = MAX_PROMPT_TOKENS) -> list[int]:
    """Token ids of one filled prompt as ``llama_eval.py`` builds them: one ``role`` message through the
    chat template as text, then the tokenizer with its special tokens (a second BOS where the template wrote
    one), truncated to ``max_length`` on the tokenizer's ``truncation_side`` (right: the first tokens stay)."""
    chat = tokenizer.apply_chat_template([{"role": role, "content": text}], tokenize=False,
                                         add_generation_prompt=add_generation_prompt)
    return list(tokenizer(chat, truncation=True, max_length=max_length)["input_ids"])


def released_text(tokenizer, ids: Sequence[int]) -> str:
    """The text ``llama_eval.py`` keeps from the generated ids: ``released_response_text`` of their decoding."""
    return released_response_text(tokenizer.decode(list(ids), skip_special_tokens=True))
