"""Classifier-Pooled discriminative CDM (the CDM paper, Sec. 4.1.1): a linear model on ``FEATURES`` of
the momenta m_t = log p_e - log p_a turns a hypothesis into one score; ``logistic`` (on labels cut by
``binarize``) or ``ridge``. ``cross_validate`` scores each item with a model trained on other groups."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from cscore.errors import ConfigError

FEATURES = ("mean", "std", "min", "max", "q10", "q25", "q50", "q75", "q90", "sum", "frac_pos", "log_len")
QUANTILES = (0.10, 0.25, 0.50, 0.75, 0.90)
OBJECTIVES = ("logistic", "ridge")


def features(sequences) -> np.ndarray:
    """[n_items, len(FEATURES)]: the summary of each momentum sequence (an empty one: all zeros)."""
    out = np.zeros((len(sequences), len(FEATURES)), dtype=np.float64)
    for i, seq in enumerate(sequences):
        m = np.asarray(seq, dtype=np.float64)
        if m.size == 0:
            continue
        if not np.all(np.isfinite(m)):
            raise ConfigError(f"item {i}: the contrastive momentum is not finite at some token "
                              "(a log-probability of -inf); set method.clamp (e.g. -20) to bound it")
        out[i] = (m.mean(), m.std(), m.min(), m.max(), *np.quantile(m, QUANTILES), m.sum(),
                  float((m > 0).mean()), np.log1p(m.size))
    return out


def binarize(labels, threshold: float | None = None) -> tuple[np.ndarray, str]:
    """(y, rule): y True for a positive label; 0/1 as given, else above the median or >= ``threshold``."""
    labels = np.asarray(labels, dtype=np.float64)
    if threshold is not None:
        return labels >= threshold, f">= {float(threshold):g}"
    if labels.size and set(np.unique(labels)) <= {0.0, 1.0}:
        return labels == 1.0, "0/1 labels as given"
    median = float(np.median(labels))
    y = labels > median
    if not y.any():  # more than half share the top value: the top value is the positive class
        return labels >= median, f">= {median:g} (the median)"
    return y, f"> {median:g} (the median)"


@dataclass
class Pooler:
    """A trained linear pooler: score = w . (features - center) / scale + b."""

    objective: str
    weights: np.ndarray  # on standardised features, one per FEATURES entry
    bias: float
    center: np.ndarray
    scale: np.ndarray
    rule: str = ""  # how the training labels were binarised (logistic)
    n_train: int = 0
    n_positive: int | None = None

    def decision(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.center) / self.scale) @ self.weights + self.bias

    def score(self, sequences) -> np.ndarray:
        """The pooled score of each sequence (higher = better)."""
        return self.decision(features(sequences))

    def to_dict(self) -> dict:
        return {"objective": self.objective, "features": list(FEATURES),
                "weights": {f: float(w) for f, w in zip(FEATURES, self.weights)}, "bias": float(self.bias),
                "center": [float(c) for c in self.center], "scale": [float(s) for s in self.scale],
                "labels": self.rule, "n_train": self.n_train, "n_positive": self.n_positive}


def _logistic(z: np.ndarray, y: np.ndarray, l2: float, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """L2-regularised logistic regression (the bias, last, unpenalised) by Newton steps with backtracking."""
    a = np.hstack([z, np.ones((len(z), 1))])
    reg = np.full(a.shape[1], float(l2))
    reg[-1] = 0.0
    w = np.zeros(a.shape[1])

    def objective(w):
        s = a @ w
        return float(np.sum(np.logaddexp(0.0, s) - y * s) + 0.5 * np.sum(reg * w * w))

    value = objective(w)
    for _ in range(max_iter):
        p = np.exp(-np.logaddexp(0.0, -(a @ w)))  # sigmoid, stable
        grad = a.T @ (p - y) + reg * w
        hess = a.T @ (a * (p * (1.0 - p))[:, None]) + np.diag(reg) + 1e-12 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        size = 1.0
        while size > 1e-10:
            new = objective(w - size * step)
            if new <= value:
                break
            size /= 2
        w = w - size * step
        moved = size * np.max(np.abs(step))
        value = objective(w)
        if moved < tol:
            break
    return w


def train_pooler(sequences, labels, *, objective: str = "logistic", l2: float = 1.0,
                 threshold: float | None = None) -> Pooler:
    """One pooler trained on momentum ``sequences`` and their ``labels``; non-finite labels are left out."""
    return fit(features(sequences), labels, objective=objective, l2=l2, threshold=threshold)


def training_labels(labels, *, objective: str = "logistic", l2: float = 1.0, threshold: float | None = None,
                    where: str = "") -> tuple[np.ndarray, np.ndarray, str]:
    """(which labels are finite, their targets, how they were cut); a ConfigError when they cannot train a model."""
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if not l2 > 0:
        raise ConfigError(f"l2 must be > 0, got {l2!r}")
    labels = np.asarray(labels, dtype=np.float64)
    keep = np.isfinite(labels)
    where = f" ({where})" if where else ""
    if keep.sum() < 2:
        raise ConfigError(f"the pooler needs at least 2 labelled training items{where}, got {int(keep.sum())}")
    if objective == "ridge":
        return keep, labels[keep], "human score as given"
    y, rule = binarize(labels[keep], threshold)
    n_pos = int(y.sum())
    if n_pos in (0, len(y)):
        raise ConfigError(f"the pooler's training labels{where} are all {'positive' if n_pos else 'negative'} "
                          f"(cut {rule}); set method.threshold, use fewer folds or method.objective=ridge")
    return keep, y.astype(np.float64), rule


def fit(x: np.ndarray, labels, *, objective: str = "logistic", l2: float = 1.0,
        threshold: float | None = None, where: str = "") -> Pooler:
    """train_pooler on precomputed features ``x``; ``where`` names the training set in errors."""
    keep, y, rule = training_labels(labels, objective=objective, l2=l2, threshold=threshold, where=where)
    x = np.asarray(x, dtype=np.float64)[keep]
    center, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - center) / scale
    if objective == "ridge":
        mean = float(y.mean())
        w = np.linalg.solve(z.T @ z + l2 * np.eye(z.shape[1]), z.T @ (y - mean))
        return Pooler("ridge", w, mean, center, scale, rule, len(y))
    w = _logistic(z, y, l2)
    return Pooler("logistic", w[:-1], float(w[-1]), center, scale, rule, len(y), int(y.sum()))


def group_folds(groups, k: int, seed: int) -> np.ndarray:
    """Fold index (0..k-1) of every item: the groups ranked by sha256(seed, group), cut into k runs."""
    groups = np.asarray(groups).astype(str)
    distinct = sorted(set(groups.tolist()))
    if k < 2:
        raise ConfigError(f"folds must be >= 2, got {k}")
    if len(distinct) < k:
        raise ConfigError(f"{k} folds need at least {k} groups; the data has {len(distinct)} "
                          "(set method.folds lower)")
    order = sorted(distinct, key=lambda g: hashlib.sha256(f"{seed}\0{g}".encode()).hexdigest())
    fold_of_group = {g: f for f, part in enumerate(np.array_split(np.array(order, dtype=object), k)) for g in part}
    return np.array([fold_of_group[g] for g in groups], dtype=np.int64)


@dataclass
class Fold:
    index: int
    train: np.ndarray  # item indices
    test: np.ndarray
    train_groups: list[str]
    test_groups: list[str]
    pooler: Pooler

    def summary(self) -> dict:
        return {"fold": self.index, "n_train": int(len(self.train)), "n_train_labelled": self.pooler.n_train,
                "n_test": int(len(self.test)), "train_groups": self.train_groups, "test_groups": self.test_groups,
                "model": self.pooler.to_dict()}


@dataclass
class CrossValidation:
    scores: np.ndarray  # every item, scored by the model of its fold
    fold_of: np.ndarray  # the fold whose model scored each item
    folds: list[Fold]


def check_folds(labels, groups, *, folds: int = 5, seed: int = 0, objective: str = "logistic", l2: float = 1.0,
                threshold: float | None = None) -> np.ndarray:
    """The fold of every item, once every fold's labels can train a model."""
    labels = np.asarray(labels, dtype=np.float64)
    fold_of = group_folds(groups, folds, seed)
    for f in range(folds):
        training_labels(labels[fold_of != f], objective=objective, l2=l2, threshold=threshold,
                        where=f"fold {f}, seed {seed}")
    return fold_of


def cross_validate(sequences, labels, groups, *, folds: int = 5, seed: int = 0, objective: str = "logistic",
                   l2: float = 1.0, threshold: float | None = None) -> CrossValidation:
    """Score every item with a pooler trained only on other groups (items without a finite label too)."""
    x = features(sequences)
    labels = np.asarray(labels, dtype=np.float64)
    groups = np.asarray(groups).astype(str)
    if not len(x) == len(labels) == len(groups):
        raise ValueError(f"{len(x)} sequences, {len(labels)} labels and {len(groups)} groups")
    fold_of = check_folds(labels, groups, folds=folds, seed=seed, objective=objective, l2=l2, threshold=threshold)
    scores = np.full(len(x), np.nan)
    out = CrossValidation(scores, fold_of, [])
    for f in range(folds):
        test = np.flatnonzero(fold_of == f)
        train = np.flatnonzero(fold_of != f)
        pooler = fit(x[train], labels[train], objective=objective, l2=l2, threshold=threshold,
                     where=f"fold {f}, seed {seed}")
        scores[test] = pooler.decision(x[test])
        out.folds.append(Fold(f, train, test, sorted(set(groups[train])), sorted(set(groups[test])), pooler))
    return out
