"""Reading a score out of an LLM judge's output, and the token ids a score can be written with.

Two rules return ``(score, status)``: ``parse_paper`` (the CD-judge paper, Sec. 4.1, App. C.1) and
``parse_released`` (the released ``parse_output`` of ``src/meta_eval_summeval.py``). "No Pred", "Below"
and "Above" are the paper's invalid outputs; "List" and "Echo" are valid scores counted on their own. Pure Python."""

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

# the paper's rule: whitespace, a sign, then G-Eval's number: a run of digits and dots read with float()
_PAPER_NUMBER = re.compile(r"\s*([+-]?[\d.]+)")
# what the released parse_output deletes, in its order ("consistency" is not in the list)
RELEASED_REMOVALS = ("coherence", "relevance", "score", ": ", "- ", "answer")
# its pattern, as written there: at most one leading space, then sign, digits and dots in any mix
_RELEASED_NUMBER = re.compile(r"^ ?([+-]?[\d\.]+)")
# list numbering after the released removals: "1. the summary should"
_LIST_NUMBER = re.compile(r"^ ?[+-]?\d+\.[ \t]+[^\s\d.+-]")


def _in_range(value: float, lo: int, hi: int, rest: str) -> tuple[float, str]:
    """(score, status) of a number read, ``rest`` the text after it: Below / Above the range, else ok, or
    Echo for the minimum that goes on with the range's maximum: "-5", " to 5", " 5"."""
    if value < lo:
        return float(lo), BELOW
    if value > hi:
        return float(hi), ABOVE
    echo = value == lo and re.match(rf"(?:\s*(?:-|\u2013|\u2014|to\b)\s*|\s+){hi}(?![0-9.])", rest) is not None
    return value, ECHO if echo else OK


def parse_paper(text: str, lo: int, hi: int) -> tuple[float, str]:
    """The paper's rule: a number at the start (as G-Eval reads it), the rest ignored. No number ->
    ``(lo, "No Pred")``; below / above the range -> ``(lo, "Below")`` (the paper does not say: as the
    released code) / ``(hi, "Above")``; else ``(number, "ok")``, or ``(lo, "Echo")`` for the minimum
    followed by the maximum ("1-5")."""
    text = str(text)
    value, end = read_number(text)
    if value is None:
        return float(lo), NO_PRED
    return _in_range(value, lo, hi, text[end:])


def read_number(text: str, pattern: re.Pattern = _PAPER_NUMBER) -> tuple[float | None, int]:
    """(the number ``pattern`` reads at the start of ``text`` or None, where it ends); ``parse_paper``'s by default."""
    match = pattern.match(text)
    if match is None:
        return None, 0
    try:
        return float(match.group(1)), match.end()
    except ValueError:  # "1.2.3", ".", "3..": G-Eval's bare except (the released code's too), the lowest score
        return None, match.end()


# text that more text could still turn into a different paper-rule number ("", " 4", "3.", "-", ".")
_PAPER_OPEN = re.compile(r"\s*[+-]?[\d.]*")


def paper_decided(text: str) -> bool:
    """Whether ``parse_paper``'s reading of ``text`` can no longer change however the text goes on."""
    return _PAPER_OPEN.fullmatch(str(text)) is None


def released_response_text(decoded: str) -> str:
    """What the released ``llama_eval.py`` stores as a response: every "assistant" deleted, stripped."""
    return str(decoded).replace("assistant", "").strip()


def parse_released(text: str, lo: int, hi: int) -> tuple[float, str]:
    """The released ``parse_output``, step for step: lowercase, delete ``RELEASED_REMOVALS``, read the
    number; statuses as ``parse_paper``'s, and ``(value, "List")`` for list numbering ("1. The summary").
    "consistency" is NOT deleted ("Consistency: 3" yields no number); a refused float() is "No Pred"."""
    out = str(text).lower()
    for word in RELEASED_REMOVALS:
        out = out.replace(word, "")
    value, end = read_number(out, _RELEASED_NUMBER)
    if value is None:
        return float(lo), NO_PRED
    score, status = _in_range(value, lo, hi, out[end:])
    return (score, LIST) if status == OK and _LIST_NUMBER.match(out) else (score, status)


PARSERS = {"paper": parse_paper, "released": parse_released}
RULES = tuple(PARSERS)


def read_score(text: str, lo: int, hi: int, rule: str = "paper") -> tuple[float, str]:
    """A decoded output's ``(score, status)`` under ``rule``, after ``released_response_text``."""
    return PARSERS[rule](released_response_text(text), lo, hi)


ROLE_WORD = "assistant"


def _settled_prefix(text: str) -> str:
    """``text`` with every "assistant" deleted, less an end that could still grow into one ("assis")."""
    for k in range(len(ROLE_WORD) - 1, 0, -1):
        if text.endswith(ROLE_WORD[:k]):
            text = text[:-k]
            break
    return text.replace(ROLE_WORD, "")


def _echo_open(text: str, lo: int, hi: int) -> bool:
    """Whether more text could still make ``parse_paper(text)`` an Echo ("1", "1-", "1 t" of 1-5)."""
    value, end = read_number(text)
    if value is None or value != lo:
        return False
    digits = str(hi)
    head = "|".join(re.escape(digits[:k]) for k in range(1, len(digits) + 1))
    return re.fullmatch(rf"(?:\s*(?:-|\u2013|\u2014|to?)?\s*)(?:{head})?", text[end:]) is not None


def settled(text: str, rule: str = "paper", lo: int = 1, hi: int = 5) -> bool:
    """Whether ``read_score(text + more, lo, hi, rule)`` is the same for every ``more`` (sound, not
    always the earliest point; released: only a start that can be no number, as "4: 5" reads 45)."""
    if rule == "paper":
        kept = _settled_prefix(text)
        return paper_decided(kept) and not _echo_open(kept, lo, hi)
    head = _settled_prefix(text).lstrip().lower()
    if not head:
        return False
    first = head[0]
    return not (first.isdecimal() or first in "+-. " or any(w.startswith(first) for w in RELEASED_REMOVALS))


def score_tokens(tokenizer, lo: int, hi: int) -> dict[int, list[int]]:
    """``{v: token ids of str(v)}`` for every integer v in [lo, hi]; a ConfigError if a value encodes
    to nothing or two to the same ids."""
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


def digit_tokens(tokenizer) -> list[int]:
    """The ids of every token whose text is ASCII digits only (the tokens that go on writing a number)."""
    return sorted(int(i) for piece, i in tokenizer.get_vocab().items()
                  if piece.isascii() and piece.isdigit() and tokenizer.decode([i]) == piece)


def continuation_prefixes(tokens: dict[int, list[int]]) -> list[tuple[int, ...]]:
    """Every proper, non-empty prefix of the multi-token value encodings, sorted."""
    prefixes = {tuple(ids[:k]) for ids in tokens.values() for k in range(1, len(ids))}
    return sorted(prefixes)
