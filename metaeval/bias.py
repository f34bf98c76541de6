"""Likelihood bias (BiasScore), quantized accuracy and invalid-output rate.

BiasScore -- ContrastScore (Wang et al.) Eq. 7, after Ohi et al. 2024, "Likelihood-based
Mitigation of Evaluation Bias in Large Language Models" (Findings of ACL 2024, pp. 3237-3245,
arXiv 2402.15987; code: github.com/stjohn2007/likelihood_bias). See ``bias_score``.

Quantized accuracy -- CDM paper (Contrastive Distribution Methods), Sec. 4.2.2 / Table 5.
See ``quantized_accuracy``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from cscore.metaeval.correlation import correlate

NORMALIZATIONS = ("minmax", "zscore", "rank", None)


def _normalize(x: np.ndarray, how: str | None) -> np.ndarray:
    if how is None:
        return x
    if how == "minmax":  # Ohi et al.'s released code: rescale_score()
        lo, hi = x.min(), x.max()
        return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    if how == "zscore":
        sd = x.std()
        return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)
    if how == "rank":  # average ranks mapped to [0, 1]
        if len(x) < 2:
            return np.zeros_like(x)
        return (stats.rankdata(x) - 1) / (len(x) - 1)
    raise ValueError(f"unknown normalization {how!r}; use one of {NORMALIZATIONS}")


def finite_pairs(*arrays) -> tuple[np.ndarray, ...]:
    cols = [np.asarray(a, dtype=np.float64).ravel() for a in arrays]
    if len({len(a) for a in cols}) != 1:
        raise ValueError("inputs must have the same length")
    ok = np.logical_and.reduce([np.isfinite(a) for a in cols])
    return tuple(a[ok] for a in cols)


def unfairness_score(metric, human, *, normalize: str | None = "minmax") -> np.ndarray:
    """US(t) = norm(evaluator score)(t) - norm(human score)(t), signed (positive = overrated).

    Non-finite pairs are dropped. ``normalize``: see ``bias_score``.
    """
    m, h = finite_pairs(metric, human)
    return _normalize(m, normalize) - _normalize(h, normalize)


def bias_score(likelihood, metric, human, *, normalize: str | None = "minmax", lengths=None) -> float:
    """Likelihood bias: BiasScore = Spearman rho(LS, US) over a data set.

    Definition (ContrastScore, Eq. 7): "BiasScore = rho(LS, US) where rho is the Spearman
    correlation coefficient, LS (Likelihood Score) represents the probability P assigned by
    the LLM, and US (Unfairness Score) captures the discrepancy between evaluator scores and
    human scores. [...] A lower BiasScore indicates that the metric is less dependent on the
    model's likelihood biases." ContrastScore takes it from Ohi et al. (2024), who define,
    for each instance t of a data set D:

    * LS(t) = log P(t_o | d, t_i; theta): log-likelihood of the task output t_o given the task
      description d and task input t_i (not the unconditional log P(t_o)). Their released
      code (``src/likelihood.py``) returns ``-loss`` of a causal LM whose labels cover the
      output tokens only, i.e. the MEAN per-token log-probability (length-normalised).
      Pass that as ``likelihood``; or pass summed log-probabilities with ``lengths``
      (token counts) and they are divided here.
    * US(t) = Score_m(t) - Score_h(t): evaluator score minus human score, signed (no
      absolute value); positive = the evaluator overrates t. "To account for different
      scoring ranges between models and humans, Score_m and Score_h are normalized so that
      they have the same mean and range" (paper text, as quoted in a summary of the paper;
      we could not read the full paper text here). Their released code
      (``calc_cor_before_mitigation.py``, ``rescale_score``) min-max rescales each score
      vector to [0, 1] over the data set, then subtracts: that is ``normalize="minmax"``,
      the default. ``"zscore"`` (same mean 0 and sd 1), ``"rank"`` (average ranks mapped to
      [0, 1]) and ``None`` (scores already on a common scale) are alternatives.
    * BiasScore = Spearman rho(LS, US) across D; in [-1, 1]; positive = high-likelihood texts
      are overrated and low-likelihood ones underrated.

    Their "total"/average row averages evaluator and human scores over aspects first, then
    normalises; ContrastScore Table 8 reports it per language pair with an AVG column (mean
    of the per-pair values): group the table before calling this. Which model's likelihood
    is LS for an ensemble/contrastive scorer is not stated in ContrastScore; the caller
    chooses it.

    Rows where any of the three inputs is not finite are dropped. NaN when fewer than two
    rows remain or LS or US is constant.
    """
    ls = np.asarray(likelihood, dtype=np.float64).ravel()
    if lengths is not None:
        lengths = np.asarray(lengths, dtype=np.float64).ravel()
        if lengths.shape != ls.shape:
            raise ValueError("lengths must have the same length as likelihood")
        with np.errstate(divide="ignore", invalid="ignore"):
            ls = np.where(lengths > 0, ls / lengths, np.nan)
    ls, m, h = finite_pairs(ls, metric, human)
    if len(ls) < 2:
        return float("nan")
    us = _normalize(m, normalize) - _normalize(h, normalize)
    return correlate(ls, us, "spearman")


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """Threshold t maximising accuracy of (scores >= t) against labels (lowest t on ties)."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order].astype(np.int64)
    uniq, first = np.unique(s, return_index=True)
    # predicting positive from uniq[j] upward: correct = negatives below + positives at/above
    neg_below = np.cumsum(1 - y)[first - 1] * (first > 0)
    pos_at_or_above = y.sum() - (np.cumsum(y)[first - 1] * (first > 0))
    correct = neg_below + pos_at_or_above
    all_negative = (1 - y).sum()  # threshold above every score
    j = int(np.argmax(correct))
    return float(uniq[j]) if correct[j] >= all_negative else float(np.inf)


def quantized_accuracy(metric, human, *, human_threshold: float | None = None,
                       metric_threshold: float | str = "prevalence", balanced: bool = False) -> float:
    """Quantized accuracy (CDM paper, Sec. 4.2.2 and Table 5), as a fraction in [0, 1].

    The CDM paper: "Previous works report their performance inconsistently in either
    Spearman/Pearson correlation or an accuracy score with 0/1 quantization of the
    annotations. We adopt 0/1-quantization and report the accuracy of each baseline/model."
    (Table 5 prints it in percent, on SummEval and QAGS CNN/DM / XSum factuality.) The paper
    does not say where either side is cut, so both cuts are explicit here:

    * human label y = human >= ``human_threshold``; default ``None`` = the highest human
      score in the data, i.e. a summary is positive (factual) only with a perfect score --
      the usual binarisation for these sets (QAGS: all sentences judged factual; SummEval
      consistency: every expert gave 5, as in SummaC). Already 0/1 labels work unchanged.
    * prediction = metric >= threshold, threshold = a float; ``"prevalence"`` (default): the
      metric quantile that predicts as many positives as there are human positives (no
      tuning on the labels beyond their base rate); ``"median"``; ``"oracle"``: the
      threshold that maximises accuracy on this very data (an optimistic upper bound).
    * accuracy = mean(prediction == y); ``balanced=True``: mean of the recalls of both
      classes (the balanced accuracy SummaC-style benchmarks report).

    Non-finite pairs are dropped; NaN if nothing remains.
    """
    m, h = finite_pairs(metric, human)
    if len(m) == 0:
        return float("nan")
    cut = h.max() if human_threshold is None else human_threshold
    y = h >= cut
    if isinstance(metric_threshold, str):
        if metric_threshold == "prevalence":
            k = int(y.sum())  # the k-th largest metric score
            thr = float(np.sort(m)[::-1][k - 1]) if k else np.inf
        elif metric_threshold == "median":
            thr = float(np.median(m))
        elif metric_threshold == "oracle":
            thr = _best_threshold(m, y)
        else:
            raise ValueError("metric_threshold must be a number, 'prevalence', 'median' or 'oracle'")
    else:
        thr = float(metric_threshold)
    pred = m >= thr
    if not balanced:
        return float(np.mean(pred == y))
    recalls = [np.mean(pred[y == c] == c) for c in (True, False) if (y == c).any()]
    return float(np.mean(recalls))


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
    """Share of judge outputs that could not be parsed: ``#(not parsed_ok) / n``.

    ``parsed_ok``: one bool per judge call (True = a valid score was parsed). Returns a
    float subclass with ``.count`` (invalid outputs) and ``.n`` (calls); NaN when empty.
    """
    ok = np.asarray(parsed_ok)
    if ok.dtype != bool:
        if not np.isin(ok, [0, 1]).all():
            raise ValueError("parsed_ok must hold booleans")
        ok = ok.astype(bool)
    ok = ok.ravel()
    return Rate(int((~ok).sum()), ok.size)
