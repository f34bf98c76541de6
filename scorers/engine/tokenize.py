"""(prompt, hypothesis) strings to token ids as the paper does, tokenized separately without special tokens
(``seq2seq``: with them, the target ending with EOS); over-long items have the source cut from its end,
never the hypothesis."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.errors import InputError  # defined in errors.py


@dataclass
class EncodedItem:
    prompt: str  # the prompt string actually scored (after truncation)
    prompt_ids: list[int]
    hyp_ids: list[int]
    truncated: bool

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.hyp_ids)


class KnownIds:
    """``tokenizer`` with the ids of ``texts`` read from one batched call; anything else goes to it."""

    def __init__(self, tokenizer, texts, special: bool):
        distinct = list(dict.fromkeys(t for t in texts if isinstance(t, str) and t))
        self.tokenizer, self.special = tokenizer, special
        got = tokenizer(distinct, add_special_tokens=special)["input_ids"] if distinct else []
        self.known = dict(zip(distinct, got))

    def __call__(self, text, add_special_tokens: bool = True, **kw):
        if not kw and add_special_tokens == self.special and isinstance(text, str) and text in self.known:
            return {"input_ids": self.known[text]}
        return self.tokenizer(text, add_special_tokens=add_special_tokens, **kw)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def text_ids(tokenizer, text: str, special: bool = False) -> list[int]:
    """The ids of ``text`` (with ``special``: the tokenizer's special tokens added, even to an empty text)."""
    return list(tokenizer(text, add_special_tokens=special)["input_ids"]) if text or special else []


def target_ids(tokenizer, text: str, eos_id: int | None) -> list[int]:
    """A seq2seq decoder target: the text with the tokenizer's special tokens, ending with EOS."""
    ids = text_ids(tokenizer, text, special=True)
    if eos_id is not None and (not ids or ids[-1] != eos_id):
        ids.append(eos_id)
    return ids


def fit_source(tokenizer, prompt: str, span: tuple[int, int], budget: int,
               special: bool = False) -> tuple[str, list[int]] | None:
    """Largest cut of prompt[a:b] (kept from its start) whose prompt fits ``budget`` tokens."""
    a, b = span
    cuts = sorted({a} | {i for i in range(a + 1, b) if prompt[i].isspace()})

    def render(c: int) -> tuple[str, list[int]]:
        text = prompt[:c].rstrip() if c > a else prompt[:a]
        text = text + prompt[b:]
        return text, text_ids(tokenizer, text, special)

    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:  # binary search: token count grows with the cut point
        mid = (lo + hi) // 2
        text, ids = render(cuts[mid])
        if len(ids) <= budget:
            best, lo = (text, ids), mid + 1
        else:
            hi = mid - 1
    return best


def encode(tokenizer, prompt: str, hypothesis: str, *, max_length: int, source_span: tuple[int, int] | None = None,
           index: int | None = None, seq2seq: bool = False, eos_id: int | None = None) -> EncodedItem:
    """One item: (prompt ids, hypothesis ids), or (encoder ids, decoder target) with ``seq2seq``."""
    where = f"item {index}: " if index is not None else ""
    if not isinstance(hypothesis, str) or not hypothesis.strip():
        raise InputError(f"{where}empty hypothesis; nothing to score")
    hyp_ids = target_ids(tokenizer, hypothesis, eos_id) if seq2seq else text_ids(tokenizer, hypothesis)
    prompt_ids = text_ids(tokenizer, prompt, special=seq2seq)
    if not prompt_ids:
        bos = getattr(tokenizer, "bos_token_id", None)
        if seq2seq:
            raise InputError(f"{where}empty prompt and the tokenizer adds no special token: nothing to encode")
        if bos is None:
            raise InputError(f"{where}empty prompt and the tokenizer has no BOS token to condition the first token on")
        prompt_ids = [bos]
    budget = max_length if seq2seq else max_length - len(hyp_ids)
    if budget < 1 or len(hyp_ids) > max_length:
        raise InputError(f"{where}the hypothesis alone has {len(hyp_ids)} tokens, more than max_length={max_length} "
                         "allows; the hypothesis is never truncated: raise runtime.max_length")
    if len(prompt_ids) <= budget:
        return EncodedItem(prompt, prompt_ids, hyp_ids, False)
    if seq2seq:
        have, n, exceed = "the encoder input has", len(prompt_ids), "the encoder input exceeds"
    else:
        have, n, exceed = "prompt + hypothesis have", len(prompt_ids) + len(hyp_ids), "prompt + hypothesis exceed"
    if source_span is None:
        raise InputError(f"{where}{have} {n} tokens > max_length={max_length} and no source span is known to "
                         "truncate; raise runtime.max_length")
    fitted = fit_source(tokenizer, prompt, source_span, budget, special=seq2seq)
    if fitted is None:
        raise InputError(f"{where}even with the source removed, {exceed} max_length={max_length}")
    text, ids = fitted
    return EncodedItem(text, ids, hyp_ids, True)
