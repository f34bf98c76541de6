"""``cscore t5score train``: T5Score's discriminative training on a table's human scores, with pairwise
accuracy on train and held-out groups before and after; writes the model, then ``cscore_t5score.json`` last."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from cscore.config.run import RunConfig
from cscore.errors import ConfigError
from cscore.training import t5score as tt
from cscore.training.artifacts import ArtifactDir, digest, now, out_dir, split_groups, versions

log = logging.getLogger(__name__)
META = "cscore_t5score.json"


@dataclass
class T5Job:
    t: dict
    folder: ArtifactDir
    identity: dict
    aspect: str
    finished: bool
    given: dict  # t5score.train as composed: what cscore_t5score.json records
    groups: list = field(default_factory=list)
    held: np.ndarray | None = None
    sets: dict = field(default_factory=dict)  # train / held_out -> ranking pairs


def open_job(run: RunConfig, t: dict, examples, aspect: str, column: str, contexts: list[str], config: dict) -> T5Job:
    """Check the output directory, split the groups and build the ranking pairs (before any model loads);
    ``column``: the column of the human ``aspect``, ``config``: the whole config as composed."""
    folder = ArtifactDir(out_dir(t["out"], "t5score", "train"), META)
    scores = examples[column].to_numpy(dtype=np.float64)
    groups = examples["group"].astype(str).tolist()
    identity = {"data": digest(config["data"]), "split": digest(config["split"]),
                "rows": digest(examples["id"].astype(str).tolist()),
                **{k: v for k, v in t.items() if k != "out"}, "aspect": aspect}
    done = folder.check(identity, lambda old: f"{folder.path} holds a model trained with another config; "
                                              "give another t5score.train.out")
    job = T5Job(t, folder, identity, aspect, done is not None, config["t5score"]["train"], groups)
    if job.finished:
        return job
    job.held = held = split_groups(groups, t["holdout"], t["seed"], "t5score")
    train_rows = ~held & np.isfinite(scores)
    if t["zscore"]:
        mu, sd = scores[train_rows].mean(), scores[train_rows].std()
        if not sd > 0:
            raise ConfigError(f"human.{aspect} is constant on the training rows; nothing to rank")
        scores = (scores - mu) / sd
    hyps = examples["hypothesis"].tolist()
    for name, mask in (("train", ~held), ("held_out", held)):
        idx = np.flatnonzero(mask)
        job.sets[name] = tt.ranking_pairs([groups[i] for i in idx], [contexts[i] for i in idx], [hyps[i] for i in idx],
                                          scores[idx], both_directions=t["both_directions"], min_gap=t["min_gap"])
    if not job.sets["train"]:
        raise ConfigError("no training pairs: no two hypotheses of a train group have different human scores")
    return job


def load_model(spec: str, device_name: str, dtype_name: str, dropout: float | None):
    """(tokenizer, seq2seq model) with the recipe's dropout; a load failure is one line."""
    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    from cscore.scorers.models.models import ModelSpecError, auto_device, auto_dtype, check_local_path, load_failure

    device = auto_device(device_name)
    dtype = torch.float32 if dtype_name == "auto" else auto_dtype(dtype_name, device)
    check_local_path(spec, spec)  # a missing local directory: one line naming it, not a hub-id complaint
    try:
        tok = AutoTokenizer.from_pretrained(spec)
        extra = tt.dropout_override(AutoConfig.from_pretrained(spec), dropout)
        model = AutoModelForSeq2SeqLM.from_pretrained(spec, dtype=dtype, **extra).to(device)
    except ConfigError:  # the dropout setting (a ValueError too)
        raise
    except (OSError, ValueError) as err:
        raise ModelSpecError(f"t5score.train.model: {load_failure(spec, spec, None, err)}") from None
    return tok, model


def train(run: RunConfig, job: T5Job) -> dict:
    """Train with the recipe, measure, save the model, then write cscore_t5score.json; returns it."""
    t, sets = job.t, job.sets
    tok, model = load_model(str(t["model"]), run.passes.device, run.passes.dtype, t["dropout"])
    kw = {"batch_size": t["batch_size"], "max_length": t["max_length"]}
    before = {k: tt.pairwise_accuracy(model, tok, v, **kw) for k, v in sets.items()}
    log.info("t5score train: %d train pairs, %d held-out pairs (%s-based, human.%s); pairwise accuracy before: "
             "train %s, held-out %s", len(sets["train"]), len(sets["held_out"]), t["condition"], job.aspect,
             fmt(before["train"]), fmt(before["held_out"]))
    start = time.perf_counter()
    opt = tt.make_optimizer(model, t["optimizer"], t["lr"], t["weight_decay"])
    described = tt.describe_optimizer(opt)  # before training: a linear schedule ends at lr 0
    steps = tt.total_steps(len(sets["train"]), t["batch_size"], t["epochs"])
    schedule = tt.make_schedule(opt, t["schedule"], steps)
    try:
        how = tt.Fit(t["alpha"], t["epochs"], t["batch_size"], t["max_length"], t["seed"])
        losses = tt.train(model, tok, sets["train"], how, optimizer=opt, log=log.info, schedule=schedule)
    except FloatingPointError as err:
        raise ConfigError(f"t5score train: {err}") from None
    after = {k: tt.pairwise_accuracy(model, tok, v, **kw) for k, v in sets.items()}
    out = job.folder.path
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    meta = {"base": t["model"], "loss": "max(0, f(worse) - f(better) + alpha (m_better - m_worse)) (T5Score Eq. 3)",
            "optimizer": described, "dropout": t["dropout"],
            "schedule": {"name": t["schedule"], "steps": steps, "warmup_steps": 0,
                         "lr_after_last_step": float(schedule.get_last_lr()[0])},
            "pairs": {k: len(v) for k, v in sets.items()}, "epoch_loss": losses,
            "pairwise_accuracy": {"before": before, "after": after},
            "held_out_groups": sorted(set(np.array(job.groups)[job.held])), "identity": job.identity,
            "config": job.given, "versions": versions(),
            "seconds": round(time.perf_counter() - start, 3), "created": now()}
    job.folder.finish(meta)  # last: marks the directory finished
    log.info("t5score train: pairwise accuracy after: train %s, held-out %s; saved to %s", fmt(after["train"]),
             fmt(after["held_out"]), out)
    return meta


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
