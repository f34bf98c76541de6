"""Aligned units for two models whose tokenizers differ: a unit is the shortest byte span whose ends are token
ends in both tokenizations, its log-probability the sum of its tokens' (docs/cross-family.md#how-units-are-found)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from cscore.errors import AlignmentError
from cscore.scorers.engine.stats import TokenStats

BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")  # SentencePiece byte fallback
SPACE = "\u2581"  # SentencePiece's visible space


@lru_cache(maxsize=1)
def byte_level_table() -> dict[str, int]:
    """The byte-level BPE alphabet: printable bytes as themselves, the others from code point 256 on."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAC + 1)) | set(range(0xAE, 0xFF + 1))
    shifted = [b for b in range(256) if b not in keep]
    return {**{chr(b): b for b in keep}, **{chr(256 + i): b for i, b in enumerate(shifted)}}


def is_byte_level(tokenizer) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and type(backend.decoder).__name__ == "ByteLevel"


def token_bytes(tokenizer, token_id: int, byte_level: bool | None = None) -> bytes:
    """The bytes a token stands for (``<0xNN>``, byte-level, or its text with ``▁`` as a space; checked
    against the text before it is trusted)."""
    piece = tokenizer.convert_ids_to_tokens(int(token_id))
    if piece is None:
        return b""
    m = BYTE_TOKEN.match(piece)
    if m:
        return bytes([int(m.group(1), 16)])
    if is_byte_level(tokenizer) if byte_level is None else byte_level:
        table = byte_level_table()
        if all(c in table for c in piece):
            return bytes(table[c] for c in piece)
    return piece.replace(SPACE, " ").encode("utf-8")


def offsets_of(tokenizer, text: str, ids: list[int], where: str = "") -> list[tuple[int, int]]:
    """Character offsets of the hypothesis tokens, re-tokenizing ``text`` (it must give ``ids``)."""
    if not getattr(tokenizer, "is_fast", False):
        raise AlignmentError(f"{where}aligned units need a fast tokenizer (character offsets); "
                             f"{type(tokenizer).__name__} has none")
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(enc["input_ids"]) != [int(i) for i in ids]:
        raise AlignmentError(f"{where}re-tokenizing the hypothesis gives other tokens than the ones scored")
    return [(int(a), int(b)) for a, b in enc["offset_mapping"]]


def token_ends(tokenizer, text: str, ids: list[int], where: str = "") -> np.ndarray:
    """Byte position where each token ends, or -1 inside a character whose pieces cannot be placed."""
    offsets = offsets_of(tokenizer, text, ids, where)
    sizes = [len(c.encode("utf-8", "surrogatepass")) for c in text]
    c2b = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)  # each character's byte offset
    n, size = len(ids), len(text)
    starts = [min(a, size) for a, _ in offsets]
    ends_c = np.maximum.accumulate([min(b, size) for _, b in offsets]) if n else np.zeros(0, np.int64)
    nxt = np.array(starts[1:] + [size], dtype=np.int64)[:n]  # where the next token starts
    ends = np.where(ends_c <= nxt, c2b[ends_c], -1).astype(np.int64)
    if n:
        ends[-1] = c2b[size]
    data = text.encode("utf-8", "surrogatepass")
    byte_level = is_byte_level(tokenizer)
    for k in range(n - 2, -1, -1):  # inside a shared character: walk back by the next token's bytes
        if ends[k] < 0 <= ends[k + 1]:
            raw = token_bytes(tokenizer, ids[k + 1], byte_level)
            at = ends[k + 1] - len(raw)
            if raw and at > c2b[starts[k]] and data[at:ends[k + 1]] == raw:
                ends[k] = at
    before = np.maximum.accumulate(np.concatenate([[-1], ends]))[:-1]  # the largest end before each token
    return np.where(ends < before, -1, ends)  # ends only move forward: one before an earlier token's is dropped


def effective_ends(ends: np.ndarray) -> np.ndarray:
    """Each token's end, or for a token that ends nowhere the end of the next one that does."""
    out = ends.copy()
    for k in range(len(out) - 2, -1, -1):
        if out[k] < 0:
            out[k] = out[k + 1]
    return out


def common_units(ends_a: np.ndarray, ends_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(unit of each token of a, of each token of b, number of units) of one hypothesis."""
    common = np.intersect1d(ends_a[ends_a >= 0], ends_b[ends_b >= 0])
    unit_a = np.searchsorted(common, effective_ends(ends_a), side="left")
    unit_b = np.searchsorted(common, effective_ends(ends_b), side="left")
    return unit_a.astype(np.int64), unit_b.astype(np.int64), len(common)


@dataclass
class Units:
    """Aligned units of every item (``offsets``) and per model the unit of each scored token."""

    offsets: np.ndarray
    index: dict[str, np.ndarray]

    @property
    def n_units(self) -> int:
        return int(self.offsets[-1])


def align(tokenizers: dict[str, object], texts: list[str], ids: dict[str, list[list[int]]]) -> Units:
    """Units of two models (``tokenizers`` and ``ids`` keyed by role, two roles) on ``texts``."""
    (ra, ta), (rb, tb) = tokenizers.items()
    idx_a, idx_b, counts = [], [], [0]
    for i, text in enumerate(texts):
        where = f"item {i}: "
        ua, ub, n = common_units(token_ends(ta, text, ids[ra][i], where), token_ends(tb, text, ids[rb][i], where))
        idx_a.append(ua + counts[-1])
        idx_b.append(ub + counts[-1])
        counts.append(counts[-1] + n)
    flat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)  # noqa: E731
    return Units(np.asarray(counts, dtype=np.int64), {ra: flat(idx_a), rb: flat(idx_b)})


def unit_sum(values: np.ndarray, index: np.ndarray, n_units: int) -> np.ndarray:
    """Per unit, the sum of its tokens' values left to right (a one-token unit's value bit for bit)."""
    values = np.asarray(values, dtype=np.float64)
    rows = values.reshape(-1, values.shape[-1])
    out = np.zeros((rows.shape[0], n_units), dtype=np.float64)
    if index.size:
        first = np.concatenate([[True], index[1:] != index[:-1]])
        out[:, index[first]] = rows[:, first]
        rest = np.flatnonzero(~first)
        for r in range(rows.shape[0]):  # ufunc.at adds in order: left to right within a unit
            np.add.at(out[r], index[rest], rows[r, rest])
    return out.reshape(values.shape[:-1] + (n_units,))


def unit_stats(stats: TokenStats, index: np.ndarray, offsets: np.ndarray) -> TokenStats:
    """One model's statistics on units: ``logp`` summed, ``logp - logp_max`` the smallest of its tokens'."""
    n = int(offsets[-1])
    if len(index) != int(stats.offsets[-1]):
        raise ValueError(f"{len(index)} unit indices for {int(stats.offsets[-1])} tokens")
    logp = unit_sum(stats.logp, index, n)
    gap = np.asarray(stats.logp, dtype=np.float64) - np.asarray(stats.logp_max, dtype=np.float64)
    min_gap = np.full(logp.shape, np.inf)
    for row in range(gap.shape[0]):
        np.minimum.at(min_gap[row], index, gap[row])
    counts = np.bincount(index, minlength=n)
    single = unit_sum(stats.logp_max, index, n)
    with np.errstate(invalid="ignore"):
        logp_max = np.where(counts == 1, single, logp - min_gap)
    return TokenStats(stats.temperatures, np.asarray(offsets, dtype=np.int64), np.arange(n, dtype=np.int64),
                      logp, logp_max)
