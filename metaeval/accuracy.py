"""Quantized (0/1) accuracy of a metric against binarised human labels (CDM Table 5; docs/methods/cdm.md):
the SummaC benchmark's protocol (``summac``: alternate dev / test cut, threshold among the dev scores'
percentiles 0, 0.2, ..., 99.8, balanced accuracy on test) or cscore's top-k rule (``topk``)."""

from __future__ import annotations

import numpy as np

from cscore.metaeval.bias import finite_pairs, quantized_accuracy

PROTOCOLS = ("summac", "topk")
PERCENTILES = np.arange(0, 100, 0.2)  # SummaC's candidate thresholds, as percentiles of the scores


def balanced_accuracy(pred, labels) -> float:
    """Mean recall over the classes present in ``labels`` (as sklearn's balanced_accuracy_score)."""
    pred, labels = np.asarray(pred, dtype=bool), np.asarray(labels, dtype=bool)
    recalls = [np.mean(pred[labels == c] == c) for c in (False, True) if (labels == c).any()]
    return float(np.mean(recalls)) if recalls else float("nan")


def choose_threshold(scores, labels) -> tuple[float, float]:
    """(threshold, balanced accuracy): the percentile of ``scores`` best as ``score > threshold``, the last on ties."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    if len(scores) == 0:
        return float("nan"), float("nan")
    candidates = np.percentile(scores, PERCENTILES)
    pred = scores[None, :] > candidates[:, None]  # one row per candidate threshold
    recalls = [(pred[:, labels == c] == c).sum(axis=1) / (labels == c).sum() for c in (True, False)
               if (labels == c).any()]
    bacc = np.mean(recalls, axis=0)
    best = len(bacc) - 1 - int(np.argmax(bacc[::-1]))  # the last maximum
    return float(candidates[best]), float(bacc[best])


def alternate_cut(n: int) -> np.ndarray:
    """SummaC's cut of n rows in their order: True = dev (even positions), False = test."""
    return np.arange(n) % 2 == 0


def majority_top(ratings, top: float) -> np.ndarray:
    """SummaC's SummEval label per row of ``ratings`` (NaN: no rater): more than half the raters gave ``top``."""
    r = np.asarray(ratings, dtype=np.float64)
    given = np.isfinite(r).sum(axis=1)
    return (r == top).sum(axis=1) > given / 2


def majority_from_mean(mean, raters: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, undecided) from the mean of ``raters`` ratings in [lo, hi]: positive when even the fewest
    possible ``hi`` ratings make a strict majority, undecided when only the most do."""
    total = np.rint(np.asarray(mean, dtype=np.float64) * raters)
    fewest = total - raters * (hi - 1)
    most = np.floor((total - raters * lo) / (hi - lo))
    return fewest > raters / 2, (fewest <= raters / 2) & (most > raters / 2)


def summac_accuracy(metric, human, *, dev=None, human_threshold: float | None = None, labels=None) -> dict:
    """SummaC protocol: ``value`` (test balanced accuracy), ``threshold``, ``dev_value``, ``n_dev``, ``n_test``;
    ``dev`` defaults to ``alternate_cut``, ``labels`` to 1 where the human score reaches ``human_threshold``
    (default: the highest finite score); non-finite rows dropped after the cut."""
    m, h = np.asarray(metric, dtype=np.float64).ravel(), np.asarray(human, dtype=np.float64).ravel()
    if len(m) != len(h) or (labels is not None and len(labels) != len(h)):
        raise ValueError("metric, human and labels must have the same length")
    dev = alternate_cut(len(m)) if dev is None else np.asarray(dev, dtype=bool)
    ok = np.isfinite(m) & np.isfinite(h)
    if labels is None:
        labels = h >= (h[ok].max(initial=-np.inf) if human_threshold is None else human_threshold)
    y = np.asarray(labels, dtype=bool)[ok]
    m, dev = m[ok], dev[ok]
    thr, dev_value = choose_threshold(m[dev], y[dev])
    test = ~dev
    value = balanced_accuracy(m[test] > thr, y[test]) if test.any() and np.isfinite(thr) else float("nan")
    return {"value": value, "threshold": thr, "dev_value": dev_value, "n_dev": int(dev.sum()),
            "n_test": int(test.sum())}


def label_rule(frame, human_column: str, data_name: str | None) -> tuple[np.ndarray | None, dict]:
    """(labels, or None for ``summac_accuracy``'s default, the top human score; a record of the rule) of one
    human column."""
    from cscore.data import summeval

    aspect = human_column.removeprefix("human.")
    experts = f"{summeval.EXPERTS}{aspect}"
    if experts in frame.columns:
        rows = [np.full(summeval.RATERS, np.nan) if r is None else np.asarray(r, dtype=np.float64)
                for r in frame[experts]]
        width = max((len(r) for r in rows), default=0)
        table = np.array([np.pad(r, (0, width - len(r)), constant_values=np.nan) for r in rows])
        return majority_top(table, summeval.SCALE[1]), {"labels": f"majority of the raters gave {summeval.SCALE[1]}"}
    if data_name == summeval.NAME:
        lo, hi = summeval.SCALE
        labels, undecided = majority_from_mean(frame[human_column].to_numpy(dtype=np.float64), summeval.RATERS, lo, hi)
        return labels, {"labels": f"majority of {summeval.RATERS} gave {hi}, certain from the mean",
                        "n_undecided": int(undecided.sum())}
    return None, {"labels": "top score"}


def accuracy(metric, human, protocol: str = "summac", **kw) -> dict:
    """``{"value": ...}`` (and the protocol's details) of ``protocol`` in ``PROTOCOLS``."""
    if protocol == "summac":
        return summac_accuracy(metric, human, **kw)
    if protocol == "topk":
        m, _ = finite_pairs(metric, human)
        return {"value": quantized_accuracy(metric, human, **kw), "n_test": len(m)}
    raise ValueError(f"unknown accuracy protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
