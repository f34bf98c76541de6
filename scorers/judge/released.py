"""cd_judge_released: the contrastive decoding of the CD-judge paper ("Contrastive Decoding
Mitigates Score Range Bias in LLM-as-a-Judge", seed 001) as its released code computes it, which
is not quite the paper's Eq. 1 (``log p_main - lam * log p_asst`` with t on the assistant).

Written from a reading of GitHub ``akkikiki/contrastive_decoding_llm_judge`` at commit 764691b
(``src/contrastive_decoding.py``, ``src/llama_eval.py``, ``src/biggen_eval_contrastive.py``);
no code is taken from it. The released run uses transformers >= 4.49 (its pyproject.toml).

The scoring step (``contrastive_decoding.py::_select_contrast`` calling ``_relative_top_filter``
with ``min_tokens_to_keep=1000``, ``relative_top=0.1``), for one step of one row:

==========================  ================================================================
main logits                 ``outputs.logits[:, -1, :].float()`` of the main model
                            (``ContrastiveGenerationMixin._contrastive_decoding``), raw: no
                            logits processor has touched them.
temperature t               divides the MAIN logits (``scores = scores / temperature``), then
                            ``log_softmax``. The flag is named ``--contrastive_asst_temperature``
                            and the paper puts t on the assistant; the code does not.
assistant                   ``log_softmax`` of its first-step scores at temperature 1 (t is never
                            applied to it). Its input is ``base_logits[:, 0, :]``, see below.
relative-top filter         ``thr = min(v_k, max + log(alpha))`` with ``v_k`` the
                            ``min_keep``-th largest main log-prob (``sorted[..., k - 1]``);
                            a token is filtered iff ``main_logprob < thr`` (strict). So the kept
                            set is the union (= the larger) of {top ``min_keep``} and
                            {log p >= max + log alpha}, and every token tied with the k-th
                            value is kept (the kept set can exceed ``min_keep``).
filtered tokens             main log-prob := -inf, assistant log-prob := -1e-3 (the
                            assistant's value never shows: -inf - lam * (-1e-3) = -inf).
score                       ``main_logprob - lam * asst_logprob`` (``_select_contrast``).
after the contrast          the generation config's logits processors run on the contrasted
                            scores (``next_token_scores = logits_processor(input_ids, ...)``):
                            for Llama-3.x-Instruct none; for Qwen2.5-Instruct, whose
                            generation_config.json sets ``repetition_penalty`` 1.05, the
                            repetition penalty (score / 1.05 if >= 0 else score * 1.05 for every
                            id in the row so far: pads, prompt, generated). Sampling warpers
                            (temperature / top_p / top_k) are off: ``do_sample=False``.
choice                      ``torch.argmax`` (first index among ties): greedy.
==========================  ================================================================

With ``min_keep=1000`` and a vocabulary of 128k-152k tokens the alpha rule almost never binds:
the 1000-token set is the larger one unless the distribution is very flat.

The decoding loop (``_contrastive_decoding``, driven by ``generate_contrastive``):

==========================  ================================================================
assistant logits            ``_, base_logits = candidate_generator.get_candidates(input_ids)``
                            once, BEFORE the loop: the assistant (an HF
                            ``AssistedCandidateGenerator``) greedily drafts a few tokens from the
                            padded prompt and ``base_logits[:, 0, :]`` (its scores for the first
                            new token) is reused at every step. Those scores went through the
                            assistant ``generate``'s logits processors, built from the MAIN
                            model's generation config: raw logits for Llama, repetition-penalised
                            over the padded prompt ids for Qwen2.5-Instruct.
main model                  advances with its KV cache (``prepare_inputs_for_generation`` /
                            ``_update_model_kwargs_for_generation``), attention mask extended by
                            one per step, position ids from the mask's cumsum.
stopping                    per row at an id of the main model's ``generation_config.eos_token_id``
                            (Llama-3.1-8B-Instruct: 128001, 128008, 128009; Qwen2.5-Instruct:
                            151645, 151643), at most ``max_new_tokens=64`` (the whole batch runs
                            until every row stopped). A finished row gets the generation pad id
                            (``generation_config.pad_token_id``, else eos[0]) from then on.
output text                 ``tokenizer.decode(seq[prompt_width:], skip_special_tokens=True)
                            .replace('assistant', '').strip()`` (llama_eval.py): EOS, pads and
                            every other special token vanish, and so does every "assistant".
first-step scores           llama_eval.py also saves the contrasted step-1 scores of the tokens
                            "0".."9" (``all_logits``; -inf where filtered).
==========================  ================================================================

The run around it (``src/llama_eval.py``; ``biggen_eval_contrastive.py`` where it differs):

==========================  ================================================================
chat formatting             one ``system`` message holding the whole filled prompt,
                            ``apply_chat_template(tokenize=False)`` WITHOUT
                            ``add_generation_prompt``; so the model first writes an assistant
                            header (``<|start_header_id|>assistant<|end_header_id|>`` for Llama,
                            ``<|im_start|>assistant`` for Qwen) before the score, and the fixed
                            assistant step-1 log-probs are those for that header position.
                            BiGGen: one ``user`` message, ``add_generation_prompt=True``.
tokenisation                ``tokenizer(texts, padding="longest", truncation=True,
                            max_length=2048)``: the templated text already starts with the BOS
                            (Llama ``<|begin_of_text|>``) and the tokenizer adds another one;
                            truncation keeps the FIRST 2048 tokens (the tokenizer's
                            ``truncation_side``, "right" by default: the end of a long prompt goes).
padding                     ``padding_side='left'``, ``pad_token = eos_token`` (llama_eval sets it
                            always, BiGGen only when the tokenizer has none).
batch / dtype / attention   batches of 16 in file order; bf16 weights; flash-attention 2
                            hard-coded; logits cast to float32 before any arithmetic.
length                      ``max_new_tokens=64`` (BiGGen: 256), ``do_sample=False``.
Qwen vocabularies           main and assistant ``resize_token_embeddings(len(tokenizer))``:
                            logits cut to the tokenizer's length (151665), the same for both.
lam, t                      ``--contrastive_lamb``, ``--contrastive_asst_temperature`` (default
                            1.0 each; the paper's per-setting values are in its Tables 3-5).
parsing                     ``meta_eval_summeval.py::parse_output`` (cscore:
                            ``scorers/judge/parse.py::parse_released``), not here.
==========================  ================================================================

Line references (commit 764691b): ``contrastive_decoding.py`` 154 (assistant scores once, before
the loop), 166-187 (cached main forward, ``.float()`` logits at 180), 191-199 (contrast, then the
logits processors), 227 (argmax), 230-233 (pad for finished rows), 241-243 (EOS / length stop),
887-896 ``_select_contrast`` (893 ``base_logits[:, 0, :]``, 894 ``min_tokens_to_keep=1000``, 895
``final - lamb * base``), 899-923 ``_relative_top_filter`` (912 t on the main logits, 913-914 both
log_softmaxed, 916-919 the threshold, 921-922 -1e-3 / -inf); ``llama_eval.py`` 18 (batch 16),
26-27 (pad = eos, left padding), 31/35/47 (bf16, flash-attention 2), 36-45 (Qwen resize), 77-81
(system message, no generation prompt), 83-90 (longest padding, truncation at 2048), 94-101
(``generate_contrastive``, 64 tokens, greedy), 138-156 (decoding the text, "0".."9" step-1 scores).

This module: ``relative_top_filter`` / ``relative_top_scores`` (the scoring step),
``first_step_logprobs`` (the assistant's fixed step-1 log-probs, from a separate model or an early
exit of a model), ``decode`` (greedy decoding over the contrasted scores with the main model's KV
cache; an early-exit assistant is read from the main model's own prefill pass), ``decode_tree``
(``decode`` for several (λ, t) at once: one prefill, shared steps while the paths agree), and the
two text helpers ``released_prompt_ids`` / ``released_text``. Results do not depend on the batch (exactly,
up to floating-point summation order): each row sees only its own tokens. One exception kept from
the released code: with a repetition penalty the pad id counts as seen in a left-padded row (the
released code penalises ``input_ids`` including pads); the released pad is the EOS/end-of-turn
token, which every chat-formatted prompt contains anyway.
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass
from typing import Collection, Sequence

import torch

from cscore.errors import ConfigError
from cscore.scorers.engine.engine import LayerTap
from cscore.scorers.engine.head import head_logits
from cscore.scorers.models.anatomy import decoder_base, decoder_layers

RELATIVE_TOP = 0.1  # _relative_top_filter(relative_top=0.1)
MIN_TOKENS_TO_KEEP = 1000  # _select_contrast passes min_tokens_to_keep=1000
ASST_FILTER_VALUE = -1e-3  # _relative_top_filter(base_filter_value=-1e-3)
MAX_NEW_TOKENS = 64  # llama_eval.py
MAX_PROMPT_TOKENS = 2048  # llama_eval.py: truncation=True, max_length=2048
BATCH_SIZE = 16  # llama_eval.py --batch_size default


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
    if (
        isinstance(min_keep, bool)
        or not isinstance(min_keep, numbers.Integral)
        or not 1 <= min_keep <= (vocab or min_keep)
    ):
        # the released code indexes sorted[..., min_keep - 1]: an IndexError when V < min_keep
        size = "" if vocab is None else f" ({vocab})"
        raise ConfigError(f"cd_judge_released: min_keep must be an integer between 1 and the vocabulary "
                          f"size{size}, got {min_keep!r}")


def relative_top_filter(main_logits: torch.Tensor, asst_logits: torch.Tensor, *, t: float,
                        alpha: float = RELATIVE_TOP, min_keep: int = MIN_TOKENS_TO_KEEP,
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(main log-probs, assistant log-probs), both [B, V], filtered as
    ``contrastive_decoding.py::_relative_top_filter`` does:

    * main: ``log_softmax(main_logits / t)`` (t divides the MAIN logits);
    * assistant: ``log_softmax(asst_logits)`` at temperature 1 (so log-probs or raw logits may be
      passed: log_softmax of log-probs is the same log-probs);
    * threshold ``min(min_keep-th largest main log-prob, max main log-prob + log(alpha))``;
      tokens with main log-prob strictly below it get -inf (main) and -1e-3 (assistant).
      ``alpha=0`` keeps every token (log 0 = -inf, as ``np.log`` gives).

    Computed in float32 (float64 inputs stay float64)."""
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
    """The contrasted scores [B, V] of one step, ``contrastive_decoding.py::_select_contrast``:
    ``main_logprob - lam * asst_logprob`` after ``relative_top_filter`` (see there: t on the main
    model, the assistant log-softmaxed at temperature 1, filtered tokens -inf)."""
    if not math.isfinite(lam):
        raise ConfigError(f"cd_judge_released: lam must be finite, got {lam}")
    main, asst = relative_top_filter(main_logits, asst_logprobs, t=t, alpha=alpha, min_keep=min_keep)
    return main - lam * asst


def apply_repetition_penalty(scores: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """transformers' ``RepetitionPenaltyLogitsProcessor``: for the ids marked in ``seen``
    ([B, V] bool; extra columns are ignored), a score s becomes s * penalty if s < 0 else
    s / penalty (-inf stays -inf)."""
    if penalty == 1.0:
        return scores
    seen = seen[:, :scores.shape[-1]]
    return torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)


# --- models ---------------------------------------------------------------------------------------


def _device(model) -> torch.device:
    return next(model.parameters()).device


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


def _check_exit_layer(model, k: int) -> int:
    total = len(decoder_layers(model))
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= total:
        raise ConfigError(f"cd_judge_released: the assistant's exit layer must be between 1 and {total}, got {k!r}")
    return int(k)


def _seen(ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """[B, V + 1] bool: which ids occur in each row of ``ids``; column V collects every id >= V
    (outside the cut vocabulary: never penalised, as in transformers)."""
    seen = torch.zeros((ids.shape[0], vocab + 1), dtype=torch.bool, device=ids.device)
    seen.scatter_(1, ids.clamp(max=vocab), True)
    return seen


def cache_attribute(base) -> str:
    """The keyword (and output field) of the decoder's KV cache: ``cache`` in transformers >= 5.x
    where ``past_key_values`` is deprecated, else ``past_key_values``."""
    try:
        params = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params and "past_key_values" not in params else "past_key_values"


def _logits(model, hidden: torch.Tensor, vocab_size: int | None) -> torch.Tensor:
    logits = head_logits(model, hidden)
    return logits if vocab_size is None else logits[:, :vocab_size]


def _asst_logprobs(model, hidden, ids, vocab_size, penalty) -> torch.Tensor:
    """Step-1 assistant log-probs from its last-position hidden state: LM head, vocabulary cut,
    the repetition penalty over the padded prompt ids (the released assistant's ``generate``
    applies the main model's logits processors), log_softmax at temperature 1."""
    logits = _logits(model, hidden, vocab_size)
    logits = apply_repetition_penalty(logits, _seen(ids, logits.shape[-1]), penalty)
    return logits.log_softmax(dim=-1)


@torch.inference_mode()
def first_step_logprobs(model, prompts: Sequence[Sequence[int]], *, pad_id: int, exit_layer: int | None = None,
                        vocab_size: int | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """The assistant's log-probs [B, V] for the first new token, i.e. at the last prompt position
    (the released ``base_logits[:, 0, :]`` after ``_relative_top_filter``'s log_softmax), from one
    left-padded pass over ``prompts`` (token ids) without cache.

    ``model``: the assistant (a transformers causal LM), or, with ``exit_layer=k``, the model whose
    first k decoder layers + final norm + LM head are the assistant (read with
    ``engine.LayerTap``; equal to running the model truncated to k layers; this runs the whole
    model, so for an assistant alone pass ``models.early_exit(...).model`` instead, or let
    ``decode(asst_exit_layer=k)`` read it from the main model's prefill for free).
    ``vocab_size``: cut the logits to the first ``vocab_size`` ids (the released Qwen runs resize
    both models to ``len(tokenizer)``). ``repetition_penalty``: the main model's
    generation_config value (1.0 for Llama-3.x-Instruct, 1.05 for Qwen2.5-Instruct), applied to
    the assistant's logits over the padded prompt ids before the log_softmax.
    Float32 (float64 for a float64 model)."""
    ids, mask, positions = _left_pad(prompts, pad_id, _device(model))
    tap = LayerTap(model, _check_exit_layer(model, exit_layer)) if exit_layer is not None else None
    try:
        out = decoder_base(model)(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
        hidden = out.last_hidden_state[:, -1] if tap is None else tap.norm(tap.kept()[:, -1])
    finally:
        if tap is not None:
            tap.close()
    return _asst_logprobs(model, hidden, ids, vocab_size, repetition_penalty)


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
    finished_pad_id: int | None = None


@torch.inference_mode()
def decode(model, prompts: Sequence[Sequence[int]], asst_first: torch.Tensor | None = None, *, how: Decoding,
           lam: float, t: float, asst_exit_layer: int | None = None,
           return_first_scores: bool = False) -> list[list[int]] | tuple[list[list[int]], torch.Tensor]:
    """Greedy contrastive decoding as the released ``_contrastive_decoding`` does it (``how``: its settings).

    ``prompts``: token ids per row (chat-formatted and truncated already: ``released_prompt_ids``),
    left-padded here with ``pad_id`` under an attention mask, position ids counting real tokens.
    The assistant's step-1 log-probs are FIXED for every step: either ``asst_first`` [B, V]
    (``first_step_logprobs`` of a separate assistant) or, with ``asst_exit_layer=k``, an early
    exit of ``model`` after k layers read from this call's own prefill pass (no second pass).
    The main model advances with its KV cache (one token per row per step after the prefill; the
    LM head runs on the last position only). Each step: ``relative_top_scores(main_logits, asst,
    lam, t, alpha, min_keep)``, then the repetition penalty (``repetition_penalty`` != 1: over the
    row's padded prompt ids and the tokens chosen so far), then argmax.

    A row stops at the first id in ``eos_ids`` (the main model's generation_config
    ``eos_token_id``), which is NOT returned; every row stops after ``max_new_tokens`` tokens; no
    forward pass runs once every row stopped. Finished rows are fed ``finished_pad_id`` (the
    released generation pad id; default ``pad_id``), which changes nothing in the other rows.
    Returns the new ids per row (decode them with ``released_text``); with
    ``return_first_scores`` also the contrasted (penalised) step-1 scores [B, V] on the CPU, as
    ``llama_eval.py`` saves them for "0".."9". ``vocab_size``: cut the main logits (and the
    early-exit assistant's) to the first ``vocab_size`` ids (Qwen: ``len(tokenizer)``)."""
    alpha, min_keep, max_new_tokens, eos_ids = how.alpha, how.min_keep, how.max_new_tokens, how.eos_ids
    pad_id, vocab_size, repetition_penalty = how.pad_id, how.vocab_size, how.repetition_penalty
    batch = len(prompts)
    _check_decode(asst_first, asst_exit_layer, max_new_tokens, (lam, t, alpha, min_keep), repetition_penalty, batch)
    eos = {int(e) for e in eos_ids}
    fill = int(pad_id if how.finished_pad_id is None else how.finished_pad_id)
    device = _device(model)
    ids, mask, positions = _left_pad(prompts, pad_id, device)
    if max_new_tokens == 0:
        empty: list[list[int]] = [[] for _ in range(batch)]
        return (empty, torch.empty(0)) if return_first_scores else empty
    base = decoder_base(model)
    cache, logits, asst = _prefill(model, base, ids, mask, positions, asst_first, asst_exit_layer, how)
    vocab = logits.shape[-1]
    _check(lam, t, alpha, min_keep, vocab)
    seen = _seen(ids, vocab) if repetition_penalty != 1.0 else None
    next_pos = positions[:, -1] + 1
    results: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    first_scores = torch.empty(0)  # the step-1 scores (step 0 always runs: max_new_tokens > 0)
    token = None
    for step in range(max_new_tokens):
        if step > 0:
            mask, cache, next_pos, logits = _step(model, base, token, mask, next_pos, cache, vocab_size)
        scores = _step_scores(logits, asst, (lam, t, alpha, min_keep), seen, repetition_penalty)
        if step == 0 and return_first_scores:
            first_scores = scores.cpu()
        chosen = scores.argmax(dim=-1).tolist()
        _take(chosen, done, eos, fill, results)
        if all(done):
            break
        token = torch.tensor(chosen, dtype=torch.long, device=device)
        if seen is not None:
            seen.scatter_(1, token.clamp(max=vocab)[:, None], True)
    return (results, first_scores) if return_first_scores else results


@torch.inference_mode()
def decode_tree(model, prompts: Sequence[Sequence[int]], asst_first: torch.Tensor | None = None, *, how: Decoding,
                rules: Sequence[tuple[float, float]], asst_exit_layer: int | None = None) -> list[list[list[int]]]:
    """``decode`` under several (lam, t) ``rules`` at once, sharing what their paths share:
    ``out[j][i]`` is ``decode(model, prompts, ..., lam, t = rules[j])[i]``. The prompts are run
    once (one prefill for every rule); each row of the batch is a (prompt, path so far) that one or
    more rules reached, fed once per step; where the rules of a row choose different tokens the
    row branches (its KV-cache rows are copied) and a rule that meets an EOS id or
    ``max_new_tokens`` leaves. Each rule's scores are ``decode``'s, row by row (the filter, the
    contrast and the repetition penalty see one row at a time), so the paths are the same. With
    rule (0, 1) the main model alone (λ = 0: the assistant's term is 0)."""
    alpha, min_keep, max_new_tokens, eos_ids = how.alpha, how.min_keep, how.max_new_tokens, how.eos_ids
    pad_id, vocab_size, repetition_penalty = how.pad_id, how.vocab_size, how.repetition_penalty
    batch = len(prompts)
    for lam, t in rules:
        _check_decode(asst_first, asst_exit_layer, max_new_tokens, (lam, t, alpha, min_keep), repetition_penalty,
                      batch)
    out: list[list[list[int]]] = [[[] for _ in range(batch)] for _ in rules]
    if max_new_tokens == 0 or not rules:
        return out
    device = _device(model)
    ids, mask, positions = _left_pad(prompts, pad_id, device)
    base = decoder_base(model)
    cache, logits, asst = _prefill(model, base, ids, mask, positions, asst_first, asst_exit_layer, how)
    vocab = logits.shape[-1]
    for lam, t in rules:
        _check(lam, t, alpha, min_keep, vocab)
    seen = _seen(ids, vocab) if repetition_penalty != 1.0 else None
    next_pos = positions[:, -1] + 1
    # (prompt, rules, path so far)
    rows: list[tuple[int, list[int], list[int]]] = [(i, list(range(len(rules))), []) for i in range(batch)]
    eos = {int(e) for e in eos_ids}
    token = None
    for step in range(max_new_tokens):
        if step > 0:
            mask, cache, next_pos, logits = _step(model, base, token, mask, next_pos, cache, vocab_size)
        picks = _tree_picks(logits, asst, rows, [(lam, t, alpha, min_keep) for lam, t in rules], seen,
                            repetition_penalty)
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
    """{(row, rule): the token the rule chooses on that row}: ``_step_scores`` on the rows each
    rule is on (the assistant's row of each row's prompt), then argmax."""
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
    """The next rows after one step: each row's rules grouped by the token they chose; a group
    that chose an EOS id, or made its last allowed token, ends (its path goes to ``out``).
    Returns (rows, the old row of each new row, the token each new row is fed)."""
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
    """decode's arguments: one assistant, a whole max_new_tokens >= 0, valid (lam, t, alpha, min_keep),
    a positive penalty, one assistant row per prompt."""
    if (asst_first is None) == (asst_exit_layer is None):
        raise ValueError("give exactly one of asst_first (the assistant's step-1 log-probs) and asst_exit_layer")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ConfigError(f"cd_judge_released: max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    _check(*contrast, None)
    if not repetition_penalty > 0:
        raise ConfigError(f"cd_judge_released: repetition_penalty must be positive, got {repetition_penalty}")
    if asst_first is not None and asst_first.shape[0] != batch:
        raise ValueError(f"asst_first has {asst_first.shape[0]} rows for {batch} prompts")


def _prefill(model, base, ids, mask, positions, asst_first, asst_exit_layer, how: Decoding):
    """decode's prefill pass: (KV cache, main logits at the last position, the assistant's fixed log-probs)."""
    vocab_size, repetition_penalty = how.vocab_size, how.repetition_penalty
    tap = LayerTap(model, _check_exit_layer(model, asst_exit_layer)) if asst_exit_layer is not None else None
    try:
        out = base(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        asst_hidden = None if tap is None else tap.norm(tap.kept()[:, -1])
    finally:
        if tap is not None:
            tap.close()
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
    return cache, logits, asst


def _take(chosen: list[int], done: list[bool], eos: set[int], fill: int, results: list[list[int]]) -> None:
    """One step's chosen ids: appended to the unfinished rows, a row stops at EOS, finished rows get ``fill``."""
    for r in range(len(chosen)):
        if done[r]:
            chosen[r] = fill
        elif chosen[r] in eos:
            done[r] = True
        else:
            results[r].append(chosen[r])


# --- text ----------------------------------------------------------------------------------------


def released_prompt_ids(tokenizer, text: str, *, role: str = "system", add_generation_prompt: bool = False,
                        max_length: int = MAX_PROMPT_TOKENS) -> list[int]:
    """Token ids of one filled prompt as ``llama_eval.py`` builds them: one ``role`` message
    (llama_eval: ``system``, no generation prompt; BiGGen: ``user`` with it) through
    ``apply_chat_template(tokenize=False)``, then the tokenizer with its special tokens (a second
    BOS where the template already wrote one) and ``truncation=True, max_length=2048`` on the
    tokenizer's ``truncation_side`` (right by default: the first 2048 tokens stay)."""
    chat = tokenizer.apply_chat_template([{"role": role, "content": text}], tokenize=False,
                                         add_generation_prompt=add_generation_prompt)
    return list(tokenizer(chat, truncation=True, max_length=max_length)["input_ids"])


def released_text(tokenizer, ids: Sequence[int]) -> str:
    """The text ``llama_eval.py`` keeps from the generated ids: special tokens skipped, every
    "assistant" removed (the header the model writes first), stripped."""
    return tokenizer.decode(list(ids), skip_special_tokens=True).replace("assistant", "").strip()
