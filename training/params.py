"""The settings of the training stages (``cscore cdm generate | train``, ``cscore t5score train``):
each default written once, here (the ConfigStore nodes conf/cdm.yaml and conf/t5score.yaml build
on), with what it may be and its meaning. ``specs_of(CdmTrain)`` etc. give the checks."""

from __future__ import annotations

from dataclasses import dataclass

from cscore.scorers.cdm import STRATEGIES
from cscore.scorers.methods.params import Param, setting

POSITIVES = ("hypothesis", "reference", "top_rated")
OPTIMIZERS = ("adafactor", "adamw")
SCHEDULES = ("linear", "constant")
TEXTS = ("hypothesis", "prompt_hypothesis")
TEXT = Param(str, nullable=True)
COUNT = Param(int, lo=1)
SHARE = Param(float, lo=0.0, hi=1.0, lo_open=True)
RATE = Param(float, lo=0.0, lo_open=True)


@dataclass
class CdmGenerate:
    """``cscore cdm generate``: negatives by degrading segments of positives with the amateur."""
    out: str | None = setting(None, TEXT, "output directory; null: outputs/cdm/generate/<date>_<time>. "
                                          "The same out= resumes")
    positives: str = setting("hypothesis", Param(str, choices=POSITIVES),
                             "hypothesis: every row's hypothesis | reference: each group's reference, once | "
                             "top_rated: each group's hypothesis with the highest human score (on `aspect`)")
    aspect: str | None = setting(None, TEXT, "top_rated: the human aspect; null: the only one, else overall")
    limit: int | None = setting(None, Param(int, lo=1, nullable=True),
                                "at most this many positives, drawn round-robin across the groups (the first "
                                "of each, then the second, ...); 2 or more (cdm train needs 2 groups); null: all")
    strategy: str = setting("span", Param(str, choices=STRATEGIES),
                            "span (Segment-Single) | sentence | utterance | multi (Segment-Multi)")
    max_span: int = setting(20, COUNT, "span / multi: segments of 1..max_span tokens (the paper: no longer than 20)")
    n_segments: int = setting(3, COUNT, "multi: segments per negative")
    n_negatives: int = setting(1, COUNT, "negatives per positive (each with its own segments and draws)")
    gamma: float = setting(0.5, Param(float, lo=0.0), "degradation strength: log p_a^- = "
                                                      "log_softmax((1+gamma) log p_a - gamma log p_e)")
    temperature: float = setting(1.0, RATE, "of p_a^-")
    top_k: int | None = setting(None, Param(int, lo=1, nullable=True),
                                "keep only the k most likely tokens of p_a^- (null: all)")
    top_p: float | None = setting(None, Param(float, lo=0.0, hi=1.0, lo_open=True, nullable=True),
                                  "keep the smallest set of tokens with probability >= top_p (null: all)")
    fill_tokens: int | None = setting(None, Param(int, lo=1, nullable=True),
                                      "tokens sampled per segment; null: as many as the segment had "
                                      "(seq2seq: a cap of 2n+5)")
    max_tries: int = setting(3, COUNT, "draws per segment while the fill equals the removed text")
    on_identical: str = setting("keep", Param(str, choices=("keep", "drop")),
                                "a negative still equal to its positive: keep (flagged) | drop (counted)")
    seed: int = setting(0, Param(int), "seed of the segments and draws")


@dataclass
class CdmTrain:
    """``cscore cdm train``: a discriminator on positives and negatives."""
    input: str | None = setting(None, TEXT, "a finished `cscore cdm generate` directory (required)")
    out: str | None = setting(None, TEXT, "output directory; null: outputs/cdm/train/<date>_<time>. "
                                          "The same out= skips a finished one")
    discriminator: str = setting("pooler", Param(str), "pooler: a linear pooler over the pair's contrastive "
                                                       "momentum (cdm_classifier's) | a model directory or hub id, "
                                                       "fine-tuned as a 2-class sequence classifier")
    holdout: float = setting(0.2, SHARE, "share of groups held out (never trained on) for the accuracy check")
    seed: int = setting(0, Param(int), "held-out groups; classifier initialisation and batch order")
    l2: float = setting(1.0, RATE, "pooler: L2 penalty (standardised features)")
    t: float = setting(1.0, RATE, "pooler: temperature of both models in the momentum")
    clamp: float | None = setting(None, Param(float, hi=0.0, nullable=True),
                                  "pooler: clip log-probs to [clamp, 0] before the difference")
    text: str = setting("hypothesis", Param(str, choices=TEXTS),
                        "classifier input: hypothesis | prompt_hypothesis (prompt and hypothesis as a text pair)")
    epochs: int = setting(3, COUNT, "classifier")
    lr: float = setting(5.0e-05, RATE, "classifier (AdamW)")
    batch_size: int = setting(8, COUNT, "classifier")
    max_length: int = setting(512, Param(int, lo=2), "classifier: tokens per input (longer inputs are cut)")


@dataclass
class Cdm:
    generate: CdmGenerate = setting(CdmGenerate(), doc="cscore cdm generate")
    train: CdmTrain = setting(CdmTrain(), doc="cscore cdm train")


@dataclass
class T5ScoreTrain:
    """``cscore t5score train``: T5Score's discriminative training on human rankings."""
    model: str | None = setting(None, TEXT, "the seq2seq model to start from (hub id or local directory); "
                                            "the paper: a generatively trained mT5")
    out: str | None = setting(None, TEXT, "output directory; null: outputs/t5score/train/<date>_<time>. "
                                          "A finished one with the same config is skipped")
    aspect: str | None = setting(None, TEXT, "the human aspect that ranks the hypotheses; null: the only one, "
                                             "else overall")
    condition: str = setting("reference", Param(str, choices=("reference", "source")),
                             "reference | source: what the hypothesis is scored against")
    both_directions: bool = setting(True, Param(bool), "also train context-given-hypothesis (T5Score scores with "
                                                       "the F of both directions)")
    zscore: bool = setting(True, Param(bool), "margins from human scores standardised over the training rows "
                                              "(the paper trains on DA z-scores)")
    alpha: float = setting(1.0, Param(float, lo=0.0), "weight of the margin term (the paper's supervised models: 1)")
    min_gap: float = setting(0.0, Param(float, lo=0.0), "pairs need human scores further apart than this")
    optimizer: str = setting("adafactor", Param(str, choices=OPTIMIZERS),
                             "adafactor (the paper's Sec. 5.1 and released script: no relative step; the lr follows "
                             "schedule) | adamw")
    lr: float = setting(1.0e-05, RATE, "learning rate (the paper: 1e-5, no warm-up)")
    schedule: str = setting("linear", Param(str, choices=SCHEDULES),
                            "linear (the released script: the Trainer's default, lr decays linearly to 0 over "
                            "the run's steps, no warm-up) | constant (lr fixed)")
    weight_decay: float = setting(0.01, Param(float, lo=0.0), "on the weight matrices (the released script: 0.01)")
    dropout: float | None = setting(0.05, Param(float, lo=0.0, hi=1.0, nullable=True),
                                    "the model's dropout while training (the paper: 0.05); null: the model's own")
    batch_size: int = setting(32, COUNT, "pairs per step (the paper: 32)")
    epochs: int = setting(1, COUNT, "passes over the training pairs")
    max_length: int = setting(64, Param(int, lo=2), "tokens per text, source and target (the paper: 64; longer "
                                                    "inputs are cut in training)")
    holdout: float = setting(0.1, SHARE, "share of groups held out for the pairwise-accuracy check")
    seed: int = setting(0, Param(int), "held-out groups and batch order")


@dataclass
class T5Score:
    train: T5ScoreTrain = setting(T5ScoreTrain(), doc="cscore t5score train")
