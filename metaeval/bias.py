"""Likelihood bias (BiasScore; ContrastScore Eq. 7, after Ohi et al. 2024, arXiv 2402.15987),
quantized accuracy (CDM paper, Table 5) and invalid-output rate."""

from __future__ import annotations

import numpy as np

from cscore.metaeval.correlation import correlate


def finite_pairs(*arrays) -> tuple[np.ndarray, ...]:
    cols = [np.asarray(a, dtype=np.float64).ravel() for a in arrays]
    if len({len(a) for a in cols}) != 1:
        raise ValueError("inputs must have the same length")
    ok = np.logical_and.reduce([np.isfinite(a) for a in cols])
    return tuple(a[ok] for a in cols)


def _minmax(x: np.ndarray) -> np.ndarray:
    """Ohi et al.'s released code (``rescale_score``): the scores rescaled to [0, 1]."""
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def bias_score(likelihood, metric, human) -> float:
    """BiasScore = Spearman(LS, US) (ContrastScore Eq. 7, after Ohi et al. 2024): LS the mean per-token
    log-likelihood, US = minmax(metric) - minmax(human) over the data set, as their released code
    (positive: high-likelihood texts are overrated); non-finite rows dropped, NaN below two rows or constant."""
    ls, m, h = finite_pairs(likelihood, metric, human)
    if len(ls) < 2:
        return float("nan")
    return correlate(ls, _minmax(m) - _minmax(h), "spearman")


def quantized_accuracy(metric, human) -> float:
    """Quantized accuracy (CDM Table 5), cscore's top-k rule: label = the top human score, prediction = metric
    >= its quantile giving as many positives as there are labels, accuracy = mean(prediction == label); NaN
    with no finite pair."""
    m, h = finite_pairs(metric, human)
    if len(m) == 0:
        return float("nan")
    y = h >= h.max()
    k = int(y.sum())  # the k-th largest metric score
    thr = float(np.sort(m)[::-1][k - 1]) if k else np.inf
    return float(np.mean((m >= thr) == y))


class Rate(float):
    """A share in [0, 1] that also carries ``.count`` (numerator) and ``.n`` (denominator)."""

    count: int
    n: int

    def __new__(cls, count: int, n: int):
        self = super().__new__(cls, count / n if n else float("nan"))
        self.count, self.n = int(count), int(n)
        return self

    def __repr__(self) -> str:
        return f"Rate({float(self)!r}, count={self.count}, n={self.n})"


def invalid_rate(parsed_ok) -> Rate:
    """Share of judge calls whose output could not be parsed (``parsed_ok`` False); NaN when empty."""
    ok = np.asarray(parsed_ok).ravel()
    if ok.dtype != bool and not np.isin(ok, [0, 1]).all():
        raise ValueError("parsed_ok must hold booleans")
    ok = ok.astype(bool)
    return Rate(int((~ok).sum()), ok.size)
