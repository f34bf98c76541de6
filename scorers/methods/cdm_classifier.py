"""cdm_classifier: Classifier-Pooled discriminative CDM (the CDM paper, Sec. 4.1.1, Tables 2-3, 6):
a small linear model over fixed-size features of the contrastive-momentum sequence m_t (``cdm``),
trained on labels (``cscore.scorers.cdm_pooler``).

Not a function of the statistics alone: it needs labels, so ``methods.score`` refuses it and
``cscore run`` scores it as a ``pooler`` kind: every item by a model trained on the other groups
only (k-fold cross-validation over ``group``), the folds in ``cdm_folds.json``. Its token values
are the momentum (the pooler's input); the comparison rows are computed as for any method."""

from cscore.scorers.methods import cdm
from cscore.scorers.methods.params import Param

NAME = "cdm_classifier"
KIND = "pooler"
MOMENTUM = ("t", "clamp")  # what the per-token momentum reads; the other keys configure the pooler
ACCEPTS = (*MOMENTUM, "skip_first", "folds", "seed", "objective", "l2", "threshold", "aspect")
PARAMS = {"folds": Param(int, lo=2), "seed": Param(int), "objective": Param(str, choices=("logistic", "ridge")),
          "l2": Param(float, lo=0.0, lo_open=True), "threshold": Param(float, nullable=True),
          "aspect": Param(str, nullable=True)}
needs = cdm.needs


def token_scores(stats, *, t: float, clamp: float | None, **pooler):
    """m_t per scored token; the pooler's keys (folds, seed, ...) are not used here."""
    return cdm.momentum(stats, t, clamp)
