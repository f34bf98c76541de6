"""cdm_classifier: Classifier-Pooled discriminative CDM (the CDM paper, Sec. 4.1.1, Tables 2-3, 6):
a small linear model over fixed-size features of the contrastive-momentum sequence m_t (``cdm``),
trained on labels (``cscore.scorers.cdm.pooler``)."""

from dataclasses import dataclass

from cscore.scorers.methods import cdm
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import Param, common, setting


@dataclass
class CdmClassifierParams(MethodParams):
    name: str = setting("cdm_classifier", doc="the method")
    variant: str = setting("cdm_classifier", doc="the score column and label: score.<variant>")
    t: float = common("t", 1.0, "temperature of both models")
    clamp: float | None = common("clamp", None, "clip log-probs to [clamp, 0] before the difference")
    skip_first: bool = common("skip_first", False)
    objective: str = setting("logistic", Param(str, choices=("logistic", "ridge")),
                             "logistic: the paper's classifier on binarised labels | ridge: regression onto the score")
    l2: float = setting(1.0, Param(float, lo=0.0, lo_open=True),
                        "L2 penalty on the weights (features are standardised)")
    threshold: float | None = setting(None, Param(float, nullable=True),
                                      "logistic: positive = human >= threshold; null: above the training folds' median")
    aspect: str | None = setting(None, Param(str, nullable=True),
                                 "the human aspect to train on; null: the only one, else `overall`")
    folds: int = setting(5, Param(int, lo=2), "k of the k-fold cross-validation over `group` (document / dialogue)")
    seed: int = setting(0, Param(int), "shuffles the groups into folds")


@METHODS
class CdmClassifier(Method):
    name = "cdm_classifier"
    kind = "pooler"
    builds_on = ("cdm",)  # its paper method
    aligned = False  # needs one tokenizer: a cross-family pair is refused
    Params = CdmClassifierParams

    @classmethod
    def token_scores(cls, stats, p: CdmClassifierParams):
        """m_t per scored token (t, clamp); the pooler's settings (folds, seed, ...) are not used here."""
        return cdm.momentum(stats, p.t, p.clamp)
