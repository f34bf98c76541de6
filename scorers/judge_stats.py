"""What a judge pass keeps per prompt, and the choices computed from it (no torch here).

CD-judge, Eq. 1 of the paper: the judge writes  argmax_v [log p_main(v) − λ · log p_asst,t(v)]
with log p_asst,t(v) = z_v / t − logsumexp(z / t) (z: the assistant's logits). The logsumexp is
the same for every v, so the choice depends on λ and t only through c = λ / t:

    choice(c) = argmax_v [a_v − c · z_v]          a = log p_main (T = 1),  c = λ / t ≥ 0

(the paper's 4 × 6 grid has 24 points but 18 distinct values of c; points with equal c give
identical scores). Kept per context, exact for every c ≥ 0 (no re-run for any λ, t):

* ``front``: the tokens on the Pareto front of the points (z_v, a_v) — no other token has both
  a ≥ and z ≤ (one of them strictly). A token off the front is beaten by one on it for every
  c > 0, so the argmax over the front is the argmax over the vocabulary. Ties go to the smallest
  token id, as ``torch.argmax``; the front keeps the smallest id of identical points.
* ``main_top`` / ``asst_top``: each model's own argmax (c = 0 is the main model alone).
* a and z of the range's score tokens: the expected score Σ v·q(v), q = softmax over the score
  tokens of a − c·z (the logsumexp cancels here too), and each model's own expected score.
* the decoded text of every token it may choose, so parsing needs no tokenizer.

A context is a prompt (k = 0) or the prompt followed by one of ``prefixes`` (the proper prefixes
of multi-token score values, e.g. "1" of "10" for range 1-10 on a one-digit-per-token tokenizer):
context index = item · (1 + len(prefixes)) + k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

FORMAT = 1  # bump when the arrays or their meaning change
WHO = ("contrast", "main", "asst")


@dataclass
class JudgeStats:
    # a cache payload (scorers.cache.Payload)
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

    def __post_init__(self):
        n_ctx = self.n_items * (1 + len(self.prefixes))
        for name in ("main_top", "asst_top"):
            if getattr(self, name).shape != (n_ctx,):
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected ({n_ctx},)")
        if self.front_offsets.shape != (n_ctx + 1,) or int(self.front_offsets[-1]) != len(self.front_ids):
            raise ValueError("front_offsets does not match the front arrays")
        if self.score_a.shape != (n_ctx, len(self.values)) or self.score_z.shape != self.score_a.shape:
            raise ValueError("score arrays do not match contexts x values")
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

    # -- choices ------------------------------------------------------------------------------

    def pick(self, ctx: np.ndarray, who: str, c: float = 0.0, alpha: float = 0.0) -> np.ndarray:
        """The token chosen at each context in ``ctx``: by the contrast at c = λ/t, or by one model.
        ``alpha`` > 0: the contrast chooses only among V_head = {v : p_main(v) ≥ α · max p_main}
        (Li et al.'s plausibility set). V_head is an upper set of a, so a token dominated on the
        front by another keeps its dominator in V_head: the front ∩ V_head is V_head's front, and
        the front holds the largest a (its last point)."""
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
        """Per item: the text written and the token ids chosen. After a token that makes a proper
        prefix of a multi-token score value, the next token is chosen by the same rule."""
        width = 1 + len(self.prefixes)
        chosen: list[tuple[int, ...]] = [()] * self.n_items
        live = np.arange(self.n_items)
        ctx = live * width
        while len(live):
            got = self.pick(ctx, who, c, alpha)
            nxt_live, nxt_ctx = [], []
            for i, tok in zip(live.tolist(), got.tolist()):
                chosen[i] = chosen[i] + (int(tok),)
                k = self._prefix_index.get(chosen[i])
                if k is not None:
                    nxt_live.append(i)
                    nxt_ctx.append(i * width + 1 + k)
            live, ctx = np.asarray(nxt_live, dtype=np.int64), np.asarray(nxt_ctx, dtype=np.int64)
        texts = ["".join(self.text(t) for t in seq) for seq in chosen]
        return texts, chosen

    def single_token_values(self) -> bool:
        return all(len(ids) == 1 for ids in self.value_ids)

    def expected(self, who: str, c: float = 0.0) -> np.ndarray:
        """Σ value · q(value) over the range, q = softmax over the score tokens of a − c·z
        (main: a; asst: z). NaN when a value of the range is not a single token."""
        if not self.single_token_values():
            return np.full(self.n_items, np.nan)
        ctx = np.arange(self.n_items) * (1 + len(self.prefixes))
        a, z = self.score_a[ctx], self.score_z[ctx]
        logits = {"contrast": a - c * z, "main": a, "asst": z}[who]
        logits = logits - logits.max(axis=1, keepdims=True)
        q = np.exp(logits)
        q /= q.sum(axis=1, keepdims=True)
        return q @ self.values.astype(np.float64)

    # -- storage ------------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"n_items": np.asarray([self.n_items], dtype=np.int64), "prefixes": _pad(self.prefixes),
                "values": self.values, "value_ids": _pad(self.value_ids), "main_top": self.main_top,
                "asst_top": self.asst_top, "front_offsets": self.front_offsets, "front_ids": self.front_ids,
                "front_a": self.front_a, "front_z": self.front_z, "score_a": self.score_a, "score_z": self.score_z,
                "text_ids": self.text_ids, "text_values": np.asarray(self.text_values, dtype=str),
                "vocab": np.asarray([self.vocab], dtype=np.int64)}

    def entry_figures(self) -> dict:
        """What a cache entry's meta.json says of it (beyond n_items): nothing."""
        return {}

    @classmethod
    def from_arrays(cls, arrays) -> "JudgeStats":
        return cls(
            int(np.asarray(arrays["n_items"]).reshape(-1)[0]),
            _unpad(arrays["prefixes"]),
            np.asarray(arrays["values"]),
            _unpad(arrays["value_ids"]),
            *(
                np.asarray(arrays[k])
                for k in (
                    "main_top",
                    "asst_top",
                    "front_offsets",
                    "front_ids",
                    "front_a",
                    "front_z",
                    "score_a",
                    "score_z",
                    "text_ids",
                    "text_values",
                )
            ),
            int(np.asarray(arrays["vocab"]).reshape(-1)[0]),
        )


ARRAYS = JudgeStats.ARRAY_NAMES


DECODE_FORMAT = 1  # bump when a decoded path or its arrays change meaning
DECODE_ARRAYS = ("n_items", "offsets", "token_ids")


@dataclass
class DecodedPaths:
    """The judge's decoded output ids per prompt under one rule (``judge_decode``), ragged."""

    # a cache payload (scorers.cache.Payload)
    ENTRY_KIND: ClassVar[str | None] = "judge_decode"
    ENTRY_FORMAT: ClassVar[tuple[str, int] | None] = ("decode_format", DECODE_FORMAT)
    ARRAY_NAMES: ClassVar[tuple[str, ...]] = DECODE_ARRAYS

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
