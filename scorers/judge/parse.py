"""Reading a score out of an LLM judge's output, and the token ids a score can be written with.

Two rules, both returning ``(score, status)`` (``STATUSES``): ``parse_paper`` (the CD-judge paper,
Sec. 4.1, Appendix C.1) and ``parse_released`` (the released ``parse_output`` of
``src/meta_eval_summeval.py``, step for step). ``"No Pred"`` (the range minimum), ``"Below"`` (set
to the minimum) and ``"Above"`` (clamped) are the paper's invalid outputs (Tables 6-7); ``"List"``
(list numbering) and ``"Echo"`` (the prompt's range echoed, read as its minimum) are valid scores
counted on their own. How tokenizers split digits: docs/methods/cd-judge.md. Pure Python: the
tokenizer is any callable that returns ``{"input_ids": [...]}``."""

from __future__ import annotations

import re

from cscore.errors import ConfigError
from cscore.score_range import check_range

OK = "ok"
NO_PRED = "No Pred"
BELOW = "Below"
ABOVE = "Above"
LIST = "List"
ECHO = "Echo"
STATUSES = (OK, NO_PRED, BELOW, ABOVE, LIST, ECHO)
VALID = (OK, LIST, ECHO)  # a score was read (the released code counts all three as valid)

# the paper's rule: optional leading whitespace, an optional sign, then G-Eval's number: the run of
# (Unicode) digits and dots read with float() (G-Eval's parse_output: ``^ ?([\d\.]+)``, float,
# anything float() refuses is unparsed), so "1.2.3" and "3.5." are no number, "\u0663" is 3
_PAPER_NUMBER = re.compile(r"\s*([+-]?[\d.]+)")
# what the released parse_output deletes, in its order ("consistency" is not in the list)
RELEASED_REMOVALS = ("coherence", "relevance", "score", ": ", "- ", "answer")
# its pattern, as written there: at most one leading space, then sign, digits and dots in any mix
_RELEASED_NUMBER = re.compile(r"^ ?([+-]?[\d\.]+)")
# list numbering after the released removals: an integer, one dot, spaces on the same line, then
# text that is no number ("1. the summary should", "2.  it")
_LIST_NUMBER = re.compile(r"^ ?[+-]?\d+\.[ \t]+[^\s\d.+-]")


def _echo(rest: str, hi: int) -> bool:
    """Whether ``rest`` (the text after a number read as the minimum) goes on with the range's
    maximum: "-5", " - 5", "–5", " to 5", " 5" (what "- " deletion leaves of "1 - 5"), and no
    further digit or dot."""
    return re.match(rf"(?:\s*(?:-|\u2013|\u2014|to\b)\s*|\s+){hi}(?![0-9.])", rest) is not None


def _in_range(value: float, lo: int, hi: int) -> tuple[float, str]:
    if value < lo:
        return float(lo), BELOW
    if value > hi:
        return float(hi), ABOVE
    return value, OK


def parse_paper(text: str, lo: int, hi: int) -> tuple[float, str]:
    """The paper's rule for the text of the chosen token(s): optional leading whitespace, then an
    optional sign and a number read as G-Eval's ``parse_output`` reads it (the whole run of digits
    and dots, Python's Unicode ``\\d``, ``float()``; a run float() refuses, "1.2.3", is no number);
    what follows the number is ignored. Below the minimum (the paper does not say) is set to the
    minimum, as the released code does.

    Returns ``(score, status)``: no number -> ``(lo, "No Pred")``; number < lo -> ``(lo, "Below")``;
    number > hi -> ``(hi, "Above")``; otherwise ``(number, "ok")``, or ``(lo, "Echo")`` when the
    number is the minimum followed by the maximum ("1-5", "1 to 5": the prompt's range)."""
    text = str(text)
    value, end = paper_number(text)
    if value is None:
        return float(lo), NO_PRED
    score, status = _in_range(value, lo, hi)
    return (score, ECHO) if status == OK and score == lo and _echo(text[end:], hi) else (score, status)


def paper_number(text: str) -> tuple[float | None, int]:
    """(the number ``parse_paper`` reads at the start of ``text`` or None, where it ends)."""
    match = _PAPER_NUMBER.match(text)
    if match is None:
        return None, 0
    try:
        return float(match.group(1)), match.end()
    except ValueError:  # "1.2.3", ".", "3..": G-Eval's bare except, the lowest score
        return None, match.end()


# text that more text could still turn into a different paper-rule number ("", " 4", "3.", "-", ".")
_PAPER_OPEN = re.compile(r"\s*[+-]?[\d.]*")


def paper_decided(text: str) -> bool:
    """Whether ``parse_paper``'s reading of ``text`` can no longer change however the text goes on:
    a whole number followed by something else ("4\n", "3.5 "), or a start that is no number
    ("The", "-x"). Greedy decoding stops there (the parse of the full output is the same)."""
    return _PAPER_OPEN.fullmatch(str(text)) is None


def released_response_text(decoded: str) -> str:
    """What the released ``llama_eval.py`` stores as a response (and later hands to
    ``parse_output``): the generated tokens decoded without special tokens, every "assistant"
    deleted, then stripped of surrounding whitespace."""
    return str(decoded).replace("assistant", "").strip()


def parse_released(text: str, lo: int, hi: int) -> tuple[float, str]:
    """The released ``parse_output``, step for step: lowercase; delete, one after the other, every
    ``RELEASED_REMOVALS`` ("consistency" is NOT deleted: "Consistency: 3" yields no number); match
    ``^ ?([+-]?[\\d\\.]+)``; no match, or a match ``float()`` refuses ("1.2.3"), -> ``(lo, "No Pred")``
    (the original's ``--ignore_score`` and bare ``except``); below / above the range ->
    ``(lo, "Below")`` / ``(hi, "Above")``; otherwise ``(value, "ok")``, ``(value, "List")`` for list
    numbering ("Coherence: 1. The summary should…" -> 1; "4.", "4.5", "4.\\nThe…" stay "ok"), or
    ``(lo, "Echo")`` for the minimum followed by the maximum ("Coherence: 1-5")."""
    out = str(text).lower()
    for word in RELEASED_REMOVALS:
        out = out.replace(word, "")
    match = _RELEASED_NUMBER.search(out)
    if match is None:
        return float(lo), NO_PRED
    try:
        value = float(match.group(1))
    except ValueError:
        return float(lo), NO_PRED
    score, status = _in_range(value, lo, hi)
    if status == OK and score == lo and _echo(out[match.end():], hi):
        return score, ECHO
    return (score, LIST) if status == OK and _LIST_NUMBER.match(out) else (score, status)


PARSERS = {"paper": parse_paper, "released": parse_released}
RULES = tuple(PARSERS)


def read_score(text: str, lo: int, hi: int, rule: str = "paper") -> tuple[float, str]:
    """A decoded output's ``(score, status)`` as the released pipeline reads it, under ``rule``
    ("paper" or "released"): ``released_response_text`` first (so "assistant\n4" gives 4)."""
    return PARSERS[rule](released_response_text(text), lo, hi)


ROLE_WORD = "assistant"


def _settled_prefix(text: str) -> str:
    """The part of ``released_response_text``'s deletion that more text cannot change: every
    "assistant" deleted from ``text`` without its end when that end could still grow into one
    ("The a", "assis"). "assistant" has no border (no proper prefix is also a suffix), so later
    text never joins an "assistant" that ends before that end."""
    for k in range(len(ROLE_WORD) - 1, 0, -1):
        if text.endswith(ROLE_WORD[:k]):
            text = text[:-k]
            break
    return text.replace(ROLE_WORD, "")


def _echo_open(text: str, lo: int, hi: int) -> bool:
    """Whether more text could still make ``parse_paper(text)`` an Echo: the number read is the
    minimum and what follows it is the start of a separator and the maximum ("1", "1-", "1 t",
    "2 - 1" of 2-10), or all of it (a digit may still follow)."""
    value, end = paper_number(text)
    if value is None or value != lo:
        return False
    digits = str(hi)
    head = "|".join(re.escape(digits[:k]) for k in range(1, len(digits) + 1))
    return re.fullmatch(rf"(?:\s*(?:-|\u2013|\u2014|to?)?\s*)(?:{head})?", text[end:]) is not None


def settled(text: str, rule: str = "paper", lo: int = 1, hi: int = 5) -> bool:
    """Whether ``read_score(text + more, lo, hi, rule)`` is the same for every ``more`` (greedy
    decoding stops there; sound, not always the earliest point). paper: ``paper_decided`` of the text
    after the "assistant" deletion, unless the minimum may still become an echo ("The", "4\\n":
    settled; "assistant\\n", "4a", "1-" of 1-5: not). released: only a start that is no number
    whatever follows (no digit, sign, dot or space, and no start of a ``RELEASED_REMOVALS`` word);
    a number is never settled before the end ("4: 5" reads 45)."""
    if rule == "paper":
        kept = _settled_prefix(text)
        return paper_decided(kept) and not _echo_open(kept, lo, hi)
    head = _settled_prefix(text).lstrip().lower()
    if not head:
        return False
    first = head[0]
    return not (first.isdecimal() or first in "+-. " or any(w.startswith(first) for w in RELEASED_REMOVALS))


def score_tokens(tokenizer, lo: int, hi: int) -> dict[int, list[int]]:
    """``{v: token ids of str(v)}`` for every integer v in [lo, hi], encoded without special
    tokens. A ConfigError if a value encodes to nothing or two values to the same ids (the judge
    could not tell them apart)."""
    check_range(lo, hi)
    tokens: dict[int, list[int]] = {}
    seen: dict[tuple[int, ...], int] = {}
    for value in range(lo, hi + 1):
        ids = [int(i) for i in tokenizer(str(value), add_special_tokens=False)["input_ids"]]
        if not ids:
            raise ConfigError(f"the tokenizer encodes the score {value} to no token at all")
        if tuple(ids) in seen:
            raise ConfigError(f"the tokenizer encodes the scores {seen[tuple(ids)]} and {value} to the same "
                              f"tokens {ids}; the judge could not tell them apart")
        seen[tuple(ids)] = value
        tokens[value] = ids
    return tokens


def single_token_values(tokens: dict[int, list[int]]) -> bool:
    """Whether every value is written with exactly one token (one next-token distribution decides)."""
    return all(len(ids) == 1 for ids in tokens.values())


def digit_tokens(tokenizer) -> list[int]:
    """The ids of every token whose text is ASCII digits only ("0".."9" on SmolLM2 and Qwen2.5;
    also "10".."999" on Llama 3): the tokens that go on writing a number (the expected score's
    chain, ``judge_stats``). Read from the vocabulary's token strings, each confirmed by decoding."""
    out = []
    for piece, i in tokenizer.get_vocab().items():
        if piece.isascii() and piece.isdigit() and tokenizer.decode([i]) == piece:
            out.append(int(i))
    return sorted(out)


def continuation_prefixes(tokens: dict[int, list[int]]) -> list[tuple[int, ...]]:
    """Every proper, non-empty prefix of the multi-token value encodings, once each, sorted: the
    contexts after which the judge must look at one more token. Range 1-10 on a tokenizer with one
    digit per token gives ``[(id of "1",)]``; range 0-4, or any range on Llama 3, gives ``[]``."""
    prefixes = {tuple(ids[:k]) for ids in tokens.values() for k in range(1, len(ids))}
    return sorted(prefixes)
