"""What a judge pass keeps per prompt, and the choices computed from it (no torch here).

CD-judge, Eq. 1: choice(c) = argmax_v [a_v − c · z_v], a = log p_main, z = assistant logits, c = λ / t.
Kept per context, exact for every c ≥ 0 (ties to the smallest token id, as ``torch.argmax``): the Pareto
front of the points (z_v, a_v), ``main_top`` /
``asst_top``, a and z of the score tokens, and the text of every token it may choose. Context index =
item · (1 + len(prefixes)) + k (k = 0: the prompt). Multi-token values: the ``chain_*`` arrays
(docs/methods/cd-judge.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from cscore.scorers.judge.values import expected as softmax_mean

FORMAT = 1  # bump when the arrays or their meaning change
WHO = ("contrast", "main", "asst")
CHAIN_FORMAT = 1  # the chain arrays' meaning (a cache-key part only where a range needs them)
# c = λ/t of the paper's grid (λ 0.01, 0.1, 0.5, 1; t 0.5, 1, 2, 3, 4, 5): the contrast's normalisers
# kept at the continuation contexts
CHAIN_CS = tuple(sorted({lam / t for lam in (0.01, 0.1, 0.5, 1.0) for t in (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)}))
CHAIN_ARRAYS = ("chain_ids", "chain_digit", "chain_a", "chain_z", "lse_z", "chain_c", "lse_c")


def _empty(dtype, *shape):
    return field(default_factory=lambda: np.zeros(shape, dtype=dtype))


@dataclass
class JudgeStats:
    # a cache payload (scorers.store.cache.Payload)
    ENTRY_KIND: ClassVar[str | None] = "judge"
    ENTRY_FORMAT: ClassVar[tuple[str, int] | None] = ("judge_format", FORMAT)
    ARRAY_NAMES: ClassVar[tuple[str, ...]] = ("n_items", "prefixes", "values", "value_ids", "main_top", "asst_top",
                                              "front_offsets", "front_ids", "front_a", "front_z", "score_a",
                                              "score_z", "text_ids", "text_values", "vocab")

    n_items: int
    prefixes: list[tuple[int, ...]]  # continuation contexts after the prompt
    values: np.ndarray  # int64 [n_values]: lo..hi
    value_ids: list[tuple[int, ...]]  # token ids of str(value)
    main_top: np.ndarray  # int64 [n_ctx]
    asst_top: np.ndarray  # int64 [n_ctx]
    front_offsets: np.ndarray  # int64 [n_ctx + 1]
    front_ids: np.ndarray  # int64 [n_front]
    front_a: np.ndarray  # float64: log p_main
    front_z: np.ndarray  # float64: assistant logit
    score_a: np.ndarray  # float64 [n_ctx, n_values] (NaN where the value is not one token)
    score_z: np.ndarray  # float64 [n_ctx, n_values]
    text_ids: np.ndarray  # int64: ids with a decoded text
    text_values: np.ndarray  # str: their texts
    vocab: int
    # the expected score's chain (ranges with multi-token values only; empty otherwise)
    chain_ids: np.ndarray = _empty(np.int64, 0)  # int64 [T]: digit tokens and every value's tokens
    chain_digit: np.ndarray = _empty(np.bool_, 0)  # bool [T]: a digit token (continues a number)
    chain_a: np.ndarray = _empty(np.float64, 0, 0)  # float64 [n_ctx, T]: log p_main
    chain_z: np.ndarray = _empty(np.float64, 0, 0)  # float64 [n_ctx, T]: assistant logit
    lse_z: np.ndarray = _empty(np.float64, 0)  # float64 [n_ctx]: log Σ exp(z)
    chain_c: np.ndarray = _empty(np.float64, 0)  # float64 [C]
    lse_c: np.ndarray = _empty(np.float64, 0, 0)  # float64 [n_ctx, C]: log Σ exp(a − c·z)

    OPTIONAL_ARRAYS = CHAIN_ARRAYS  # stored only where a range needs them

    def __post_init__(self):
        n_ctx = self.n_items * (1 + len(self.prefixes))
        for name in ("main_top", "asst_top"):
            if getattr(self, name).shape != (n_ctx,):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected ({n_ctx},)")
        if self.front_offsets.shape != (n_ctx + 1,) or int(self.front_offsets[-1]) != len(self.front_ids):
            raise ValueError("front_offsets does not match the front arrays")
        if self.score_a.shape != (n_ctx, len(self.values)) or self.score_z.shape != self.score_a.shape:
            raise ValueError("score arrays do not match contexts x values")
        if len(self.chain_ids) and (self.chain_a.shape != (n_ctx, len(self.chain_ids))
                                    or self.chain_z.shape != self.chain_a.shape or self.lse_z.shape != (n_ctx,)
                                    or self.lse_c.shape != (n_ctx, len(self.chain_c))
                                    or self.chain_digit.shape != self.chain_ids.shape):
            raise ValueError("chain arrays do not match contexts x chain tokens")
        self._text = dict(zip(self.text_ids.tolist(), self.text_values.tolist()))
        self._prefix_index = {p: k for k, p in enumerate(self.prefixes)}

    @property
    def n_ctx(self) -> int:
        return len(self.main_top)

    @property
    def front_sizes(self) -> np.ndarray:
        return np.diff(self.front_offsets)

    def text(self, token_id: int) -> str:
        return self._text[int(token_id)]

    def pick(self, ctx: np.ndarray, who: str, c: float = 0.0, alpha: float = 0.0) -> np.ndarray:
        """The token chosen at each context in ``ctx``: by the contrast at c = λ/t (over V_head), or one model."""
        if who == "main" or (who == "contrast" and c == 0):
            return self.main_top[ctx]
        if who == "asst":
            return self.asst_top[ctx]
        if who != "contrast":
            raise ValueError(f"who must be one of {WHO}")
        starts, ends = self.front_offsets[ctx], self.front_offsets[ctx + 1]
        sizes = ends - starts
        flat = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(ctx) else np.zeros(0, int)
        f = self.front_a[flat] - c * self.front_z[flat]
        seg = np.repeat(np.arange(len(ctx)), sizes)
        if alpha > 0:
            top = np.full(len(ctx), -np.inf)
            np.maximum.at(top, seg, self.front_a[flat])
            f = np.where(self.front_a[flat] >= top[seg] + np.log(alpha), f, -np.inf)
        best = np.full(len(ctx), -np.inf)
        np.maximum.at(best, seg, f)
        ids = np.where(f == best[seg], self.front_ids[flat], np.iinfo(np.int64).max)
        out = np.full(len(ctx), np.iinfo(np.int64).max)
        np.minimum.at(out, seg, ids)
        return out

    def decode(self, who: str, c: float = 0.0, alpha: float = 0.0) -> tuple[list[str], list[tuple[int, ...]]]:
        """Per item: the text written and the token ids chosen (a proper prefix of a score value goes on)."""
        width = 1 + len(self.prefixes)
        chosen: list[tuple[int, ...]] = [()] * self.n_items
        live = np.arange(self.n_items)
        ctx = live * width
        while len(live):
            got = self.pick(ctx, who, c, alpha)
            for i, tok in zip(live.tolist(), got.tolist()):
                chosen[i] = chosen[i] + (int(tok),)
            live = np.asarray([i for i in live.tolist() if chosen[i] in self._prefix_index], dtype=np.int64)
            ctx = np.asarray([i * width + 1 + self._prefix_index[chosen[i]] for i in live.tolist()], dtype=np.int64)
        texts = ["".join(self.text(t) for t in seq) for seq in chosen]
        return texts, chosen

    def single_token_values(self) -> bool:
        return all(len(ids) == 1 for ids in self.value_ids)

    def expected(self, who: str, c: float = 0.0) -> np.ndarray:
        """Σ value · q(value), q = softmax over the score tokens of a − c·z (main: a; asst: z); NaN
        where it cannot be computed (``expected_note``)."""
        if self.single_token_values():
            a, z = self.score_a[::1 + len(self.prefixes)], self.score_z[::1 + len(self.prefixes)]  # the prompts
            return softmax_mean({"contrast": a - c * z, "main": a, "asst": z}[who], self.values)
        logits = self.chain_logits(who, c)
        return np.full(self.n_items, np.nan) if logits is None else softmax_mean(logits, self.values)

    def expected_note(self, who: str, c: float = 0.0) -> str | None:
        """Why the expected score of ``who`` at c cannot be computed from these statistics, or None."""
        if self.single_token_values():
            return None
        if not len(self.chain_ids):
            return "the statistics hold no chain for multi-token values (cached before it existed)"
        if who == "contrast" and c != 0 and self._chain_c_index(c) is None:
            return (f"c = {c:g} is not one of the kept normalisers (the paper's grid of lambda/t); the expected score "
                    "of a multi-token range needs log-sum-exp(a - c*z) over the whole vocabulary")
        return None

    def _chain_c_index(self, c: float) -> int | None:
        hit = np.flatnonzero(np.isclose(self.chain_c, c, rtol=1e-12, atol=0.0))
        return int(hit[0]) if len(hit) else None

    def _chain_rows(self, who: str, c: float):
        """(scores [n_ctx, T], normalisers [n_ctx]) of ``who`` at c over the chain tokens, or None."""
        if who == "asst":
            return self.chain_z, self.lse_z
        if who == "main" or (who == "contrast" and c == 0):
            return self.chain_a, np.zeros(self.n_ctx)
        if who != "contrast":
            raise ValueError(f"who must be one of {WHO}")
        j = self._chain_c_index(c)
        return None if j is None else (self.chain_a - c * self.chain_z, self.lse_c[:, j])

    def chain_logits(self, who: str, c: float = 0.0) -> np.ndarray | None:
        """log w(v) per item and value [n_items, n_values], or None where it cannot be computed."""
        if self.expected_note(who, c) is not None:
            return None
        s, lse = self._chain_rows(who, c)
        col = {int(t): j for j, t in enumerate(self.chain_ids.tolist())}
        digits = np.flatnonzero(self.chain_digit)
        width = 1 + len(self.prefixes)
        base = np.arange(self.n_items) * width
        out = np.zeros((self.n_items, len(self.values)))
        for v, ids in enumerate(self.value_ids):
            for i, tok in enumerate(ids):
                if i == 0:
                    out[:, v] += s[base, col[tok]]  # the prompt's normaliser cancels
                    continue
                ctx = base + 1 + self._prefix_index[tuple(ids[:i])]
                out[:, v] += s[ctx, col[tok]] - lse[ctx]
            k = self._prefix_index.get(tuple(ids))
            if k is not None:  # another value goes on from here: this one needs a non-digit next
                ctx = base + 1 + k
                more = np.exp(s[ctx][:, digits] - lse[ctx][:, None]).sum(axis=1)
                with np.errstate(divide="ignore"):
                    out[:, v] += np.log(np.clip(1.0 - more, 0.0, None))
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        own = {k: getattr(self, k) for k in self.ARRAY_NAMES[4:-2]}  # main_top .. text_ids, as they are
        return {"n_items": np.asarray([self.n_items], dtype=np.int64), "prefixes": _pad(self.prefixes),
                "values": self.values, "value_ids": _pad(self.value_ids), **own,
                "text_values": np.asarray(self.text_values, dtype=str),
                "vocab": np.asarray([self.vocab], dtype=np.int64),
                **({k: getattr(self, k) for k in CHAIN_ARRAYS} if len(self.chain_ids) else {})}

    def entry_figures(self) -> dict:
        """What a cache entry's meta.json says of it (beyond n_items): nothing."""
        return {}

    @classmethod
    def from_arrays(cls, arrays) -> "JudgeStats":
        given: dict[str, Any] = {k: np.asarray(arrays[k]) for k in cls.ARRAY_NAMES[4:-1]}
        given.update({k: np.asarray(arrays[k]) for k in CHAIN_ARRAYS if k in arrays})
        return cls(n_items=int(np.asarray(arrays["n_items"]).reshape(-1)[0]), prefixes=_unpad(arrays["prefixes"]),
                   values=np.asarray(arrays["values"]), value_ids=_unpad(arrays["value_ids"]),
                   vocab=int(np.asarray(arrays["vocab"]).reshape(-1)[0]), **given)


DECODE_FORMAT = 1  # bump when a decoded path or its arrays change meaning


@dataclass
class DecodedPaths:
    """The judge's decoded output ids per prompt under one rule (``judge_decode``), ragged."""

    # a cache payload (scorers.store.cache.Payload)
    ENTRY_KIND: ClassVar[str | None] = "judge_decode"
    ENTRY_FORMAT: ClassVar[tuple[str, int] | None] = ("decode_format", DECODE_FORMAT)
    ARRAY_NAMES: ClassVar[tuple[str, ...]] = ("n_items", "offsets", "token_ids")

    n_items: int
    offsets: np.ndarray  # int64 [n_items + 1]
    token_ids: np.ndarray  # int64: the paths, concatenated

    @classmethod
    def from_lists(cls, paths: Sequence[Sequence[int]]) -> "DecodedPaths":
        sizes = [len(p) for p in paths]
        ids = np.asarray([t for p in paths for t in p], dtype=np.int64)
        return cls(len(paths), np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), ids)

    def paths(self) -> list[list[int]]:
        return [self.token_ids[lo:hi].tolist() for lo, hi in zip(self.offsets[:-1], self.offsets[1:])]

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"n_items": np.asarray([self.n_items], dtype=np.int64), "offsets": self.offsets,
                "token_ids": self.token_ids}

    def entry_figures(self) -> dict:
        return {}

    @classmethod
    def from_arrays(cls, arrays) -> "DecodedPaths":
        out = cls(int(np.asarray(arrays["n_items"]).reshape(-1)[0]), np.asarray(arrays["offsets"], dtype=np.int64),
                  np.asarray(arrays["token_ids"], dtype=np.int64))
        if out.offsets.shape != (out.n_items + 1,) or int(out.offsets[-1]) != len(out.token_ids):
            raise ValueError("offsets do not match the decoded paths")
        return out


def _pad(seqs: list[tuple[int, ...]]) -> np.ndarray:
    width = max((len(s) for s in seqs), default=0)
    out = np.full((len(seqs), width), -1, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out


def _unpad(arr: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(x) for x in row if x >= 0) for row in np.asarray(arr)]
