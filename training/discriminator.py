"""``cscore cdm train``: a discriminator (a momentum pooler or a transformers classifier) trained on the
train groups of a ``cdm generate`` directory, its accuracy reported on train and held-out groups."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cscore.config.run import RunConfig
from cscore.errors import ConfigError
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.store.runner import InProcess, Pending
from cscore.training import held_out
from cscore.training.artifacts import ArtifactDir, digest, now, out_dir, split_groups, versions
from cscore.training.negatives import NEGATIVES, PROVENANCE, pair_record, read_records

log = logging.getLogger(__name__)
META = "cscore_discriminator.json"


def training_items(folder: Path) -> tuple[list[dict], dict]:
    """(items, provenance): one item per distinct positive (label 1) and per kept negative (label 0)."""
    prov_file = folder / PROVENANCE
    if not folder.is_dir():
        raise ConfigError(f"cdm.train.input={folder}: no such directory (give a `cscore cdm generate` output)")
    if not prov_file.is_file():
        raise ConfigError(f"cdm.train.input={folder} is not a `cscore cdm generate` directory (no {PROVENANCE})")
    prov = json.loads(prov_file.read_text())
    if not prov.get("complete"):
        raise ConfigError(f"cdm.train.input={folder}: the generate run has not finished; run the same "
                          "cscore cdm generate command again to complete it")
    items, seen = [], set()
    for r in read_records(folder / NEGATIVES):
        if r["source_id"] not in seen:
            seen.add(r["source_id"])
            items.append({"id": r["source_id"], "group": r["group"], "prompt": r["prompt"], "text": r["positive"],
                          "label": 1})
        if not r["dropped"]:
            items.append({"id": r["id"], "group": r["group"], "prompt": r["prompt"], "text": r["negative"], "label": 0})
    if not any(i["label"] == 0 for i in items):
        raise ConfigError(f"{folder}: no negatives to train on (all dropped or none written)")
    return items, prov


def accuracy(log_odds: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> dict:
    pred = log_odds[mask] > 0
    y = labels[mask] == 1
    return {"n": int(mask.sum()), "accuracy": float(np.mean(pred == y)) if mask.any() else None,
            "positives": int(y.sum()), "negatives": int((~y).sum())}


@dataclass
class TrainJob:
    """One ``cdm train``: its settings, items, split and output directory."""
    t: dict
    input: Path
    items: list
    prov: dict
    folder: ArtifactDir
    kind: str  # pooler | classifier
    identity: dict
    finished: bool  # the directory holds this discriminator already
    given: dict  # cdm.train as composed: what cscore_discriminator.json records
    held: np.ndarray | None = None
    labels: np.ndarray | None = None

    def split(self) -> tuple[np.ndarray, np.ndarray]:
        """(held-out mask, labels): set by ``open_job`` for a job still to train."""
        if self.held is None or self.labels is None:
            raise RuntimeError(f"{self.folder.path} holds this discriminator already: nothing to train")
        return self.held, self.labels


def open_job(run: RunConfig, t: dict, config: dict) -> TrainJob:
    """Read the negatives, check the output directory and the split (before any model loads)."""
    if not t["input"]:
        raise ConfigError("cdm.train.input=<a `cscore cdm generate` directory> is required")
    folder = Path(t["input"]).expanduser()
    items, prov = training_items(folder)
    out = ArtifactDir(out_dir(t["out"], "cdm", "train"), META)
    kind = "pooler" if t["discriminator"] == "pooler" else "classifier"
    keys = ("l2", "t", "clamp") if kind == "pooler" else ("text", "epochs", "lr", "batch_size", "max_length")
    identity = {"input": str(folder.resolve()), "negatives": digest(prov.get("counts")),
                "generate": digest(prov.get("identity")), "discriminator": t["discriminator"],
                "holdout": t["holdout"], "seed": t["seed"], **{k: t[k] for k in keys}}
    if kind == "pooler":
        identity["pair"] = pair_record(run.pair)
    done = out.check(identity, lambda old: f"{out.path} holds a discriminator trained with another config; "
                                           "give another cdm.train.out")
    job = TrainJob(t, folder, items, prov, out, kind, identity, done is not None, config["cdm"]["train"])
    if job.finished:
        return job
    job.held = split_groups([i["group"] for i in items], t["holdout"], t["seed"])
    job.labels = np.array([i["label"] for i in items], dtype=np.float64)
    for name, mask in (("train", ~job.held), ("held-out", job.held)):
        if len(set(job.labels[mask])) < 2:
            raise ConfigError(f"the {name} groups hold only {'positives' if job.labels[mask].all() else 'negatives'}; "
                              "generate more negatives or change cdm.train.seed / holdout")
    return job


def momentum_sequences(pair, prompts: list[str], texts: list[str], t: float, clamp, options: PassOptions, cache,
                       coordinator: InProcess | None = None):
    """(per item the contrastive momentum log p_e − log p_a of its text given its prompt, the statistics),
    or ``Pending`` while a part of the split pass is missing."""
    from cscore.scorers.api import PassRequest
    from cscore.scorers.methods import cdm
    from cscore.scorers.methods.common import per_item

    inputs = pair.encode(prompts, texts, max_length=options.max_length)
    stats = pair.run(inputs, PassRequest([t], ["expert", "amateur"], options, cache, coordinator))
    if isinstance(stats, Pending):
        return stats
    m = cdm.momentum(stats.stats, t, clamp)
    return per_item(m, next(iter(stats.stats.values())).offsets), stats


def train_pooler(run: RunConfig, job: TrainJob, pair, cache, coordinator: InProcess | None = None):
    """(the discriminator's record, its log-odds per item), or ``Pending`` (``momentum_sequences``)."""
    from cscore.scorers.cdm import pooler as cdm_pooler

    t, items = job.t, job.items
    # the prompts were cut to fit runtime.max_length when the negatives were made: no second cut
    got = momentum_sequences(pair, [i["prompt"] for i in items], [i["text"] for i in items], t["t"], t["clamp"],
                             replace(run.passes, max_length=1 << 30), cache, coordinator)
    if isinstance(got, Pending):
        return got
    seqs, _ = got
    x = cdm_pooler.features(seqs)
    held, labels = job.split()
    train = ~held
    pooler = cdm_pooler.fit(x[train], labels[train], l2=t["l2"], where="cdm train")
    record = {"pooler": pooler.to_dict(), "momentum": {"t": t["t"], "clamp": t["clamp"], "skip_first": False},
              "pair": pair_record(run.pair), "models": {r: m.name for r, m in pair.models.items()}}
    return record, pooler.decision(x)


def pooler_from_dict(d: dict):
    from cscore.scorers.cdm import pooler as cdm_pooler

    if list(d.get("features", [])) != list(cdm_pooler.FEATURES):
        raise ConfigError("the discriminator's pooler was trained on other momentum features than this cscore "
                          "version computes; train it again (cscore cdm train)")
    return cdm_pooler.Pooler(d["objective"], np.array([d["weights"][f] for f in cdm_pooler.FEATURES]),
                             float(d["bias"]), np.array(d["center"]), np.array(d["scale"]), d.get("labels", ""),
                             d.get("n_train", 0), d.get("n_positive"))


def train(run: RunConfig, job: TrainJob, pair=None, cache=None, coordinator: InProcess | None = None) -> dict | Pending:
    """Train, then write cscore_discriminator.json last and return it (or ``Pending``)."""
    from cscore.training.classifier import train_classifier

    (held, labels), t, out = job.split(), job.t, job.folder.path
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if job.kind == "pooler":
        got = train_pooler(run, job, pair, cache, coordinator)
        if isinstance(got, Pending):
            return got
        record, log_odds = got
    else:
        record, log_odds = train_classifier(t, job.items, labels, ~held, out, run.passes.device)
    acc = {"train": accuracy(log_odds, labels, ~held), "held_out": accuracy(log_odds, labels, held)}
    groups = np.array([i["group"] for i in job.items])
    meta = {"kind": job.kind, **record, "labels": {"1": "positive", "0": "negative (degraded)"},
            "score": "log_odds = log P(positive) - log P(negative); probability = sigmoid(log_odds)",
            "accuracy": acc, "split": {"holdout": t["holdout"], "seed": t["seed"],
                                       "held_out_groups": sorted(set(groups[held]))},
            "n_items": len(job.items), "input": str(job.input.resolve()), "generate_counts": job.prov.get("counts"),
            held_out.KEY: held_out.trained_rows(job.items, held, (job.prov.get("identity") or {}).get("data")),
            "identity": job.identity, "config": job.given,
            "versions": versions(), "seconds": round(time.perf_counter() - start, 3), "created": now()}
    job.folder.finish(meta)  # last: marks the directory finished
    log.info("cdm train (%s): accuracy %.3f on %d train items, %.3f on %d held-out items (%d held-out groups)",
             t["discriminator"], acc["train"]["accuracy"], acc["train"]["n"], acc["held_out"]["accuracy"],
             acc["held_out"]["n"], len(meta["split"]["held_out_groups"]))
    return meta
