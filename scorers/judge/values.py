"""CD-judge over the range's score values (``method.decode=values``): Eq. 1 with the choice restricted
to lo..hi, each value scored whole by each model on its own prompt (works for a cross-family pair):
score(v) = a(v) − λ · b_t(v), a = log p_main(v), b_t = log p_asst,t(v); ``expected`` = Σ v · softmax(score)(v)
(V_head does not apply). Rows ``main`` (λ = 0), ``asst`` (t = 1). No torch here.
"""

from __future__ import annotations

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.engine.stats import TokenStats

PAPER_T = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)  # the paper's grid of t: every point from one pass


def temperatures(t: float) -> list[float]:
    """The temperatures the values pass keeps: the paper's t grid, and t."""
    return sorted(set(PAPER_T) | {float(t)})


def value_logp(stats: TokenStats, n_values: int, t: float = 1.0) -> np.ndarray:
    """[n_items, n_values]: log p_t of each value's string (``stats`` item i, value k at i · n_values + k)."""
    if stats.n_items % n_values:
        raise ValueError(f"{stats.n_items} statistics items are not n_items x {n_values} values")
    if (stats.lengths < 1).any():
        raise ValueError("a value with no token")
    sums = np.add.reduceat(stats.lp(t), stats.offsets[:-1].astype(np.int64))
    return sums.reshape(-1, n_values)


def expected(score: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Σ v · q(v), q = softmax of ``score`` over the values (NaN for a row with no finite score)."""
    with np.errstate(invalid="ignore"):
        q = np.exp(score - score.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    return q @ values.astype(np.float64)


def judge(a: np.ndarray, b: dict[float, np.ndarray], values, *, who: str = "contrast", lam: float = 0.0,
          t: float = 1.0, alpha: float = 0.0) -> dict[str, np.ndarray]:
    """Per item: ``score`` (the value chosen: argmax, ties to the lowest, of the row's per-value score: contrast
    a − λ·b_t over V_head = a ≥ log α + max a, main a, asst b_1), ``expected``, ``status`` (always ok) and ``text``."""
    values = np.asarray(values, dtype=np.int64)
    if who not in ("contrast", "main", "asst"):
        raise ValueError(f"who must be contrast, main or asst, got {who!r}")
    if who == "contrast" and (lam < 0 or t <= 0):
        raise ConfigError(f"cd_judge: need lam >= 0 and t > 0, got lam={lam}, t={t}")
    if who == "asst":
        score = b[1.0]
    else:
        score = a - lam * b[float(t)] if who == "contrast" and lam else a
    head = score
    if who == "contrast" and alpha > 0:
        head = np.where(a >= a.max(axis=1, keepdims=True) + np.log(alpha), score, -np.inf)
    chosen = values[np.argmax(head, axis=1)]
    return {"score": chosen.astype(np.float64), "expected": expected(score, values),
            "status": np.array(["ok"] * len(chosen), dtype=object),
            "text": np.array([str(v) for v in chosen.tolist()], dtype=object)}
