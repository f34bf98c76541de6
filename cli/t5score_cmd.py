"""``cscore t5score train``: T5Score's discriminative training (``scorers/baselines/t5score_train.py``)
on the human scores of a dataset (``data=``), composed from ``conf/t5score.yaml`` on top of
config.yaml. Groups (documents / source segments) are split into train and held-out (``holdout``,
by sha256(seed, group)); pairwise ranking accuracy on both is measured before and after training.
Writes the model and tokenizer (``save_pretrained``) and ``cscore_t5score.json`` last; the same
command into a finished directory is skipped, another config into it refused. Then score with
``cscore run method=baseline baseline=t5score baseline.t5score.model=<out>``."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.errors import ConfigError
from cscore.scorers.methods.params import Param

log = logging.getLogger("cscore")
USAGE = """usage: cscore t5score train t5score.train.model=<seq2seq model> data=<dataset> [overrides]

  T5Score's discriminative training (ranking margin loss on human-ranked pairs); options in
  conf/t5score.yaml (t5score.train.*). Then:
  cscore run method=baseline baseline=t5score baseline.t5score.model=<t5score.train.out>"""
META = "cscore_t5score.json"
PARAMS = {"model": Param(str, nullable=True), "out": Param(str, nullable=True), "aspect": Param(str, nullable=True),
          "condition": Param(str, choices=("reference", "source")), "both_directions": Param(bool),
          "zscore": Param(bool), "alpha": Param(float, lo=0.0), "min_gap": Param(float, lo=0.0),
          "lr": Param(float, lo=0.0, lo_open=True), "batch_size": Param(int, lo=1), "epochs": Param(int, lo=1),
          "max_length": Param(int, lo=2), "holdout": Param(float, lo=0.0, hi=1.0, lo_open=True), "seed": Param(int)}


def main(argv: list[str]) -> None:
    from cscore.cli.cdm_cmd import checked
    from cscore.cli.exits import fail, one_line_errors

    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    if argv[0] != "train":
        fail(f"unknown t5score command {argv[0]!r}; use cscore t5score train (cscore t5score --help)", 2)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    with one_line_errors("interrupted; nothing was written (the model is saved when training ends)"):
        cfg = compose(argv[1:])
        if "--cfg" in argv:
            print(OmegaConf.to_yaml(cfg.t5score))
            return
        t = checked(cfg.t5score.train, PARAMS, "t5score.train")
        out, skipped = train(cfg, t)
        print(f"t5score train: {out}" + (" (finished earlier with this config: skipped; remove it to train again)"
                                         if skipped else ""))


def compose(overrides: list[str]) -> DictConfig:
    """conf/t5score.yaml with the overrides (``--cfg`` left out); one-line ConfigErrors."""
    from cscore.cli.compose import compose as compose_stage

    return compose_stage("t5score", [o for o in overrides if o != "--cfg"], {"t5score.train": PARAMS})


def training_table(cfg: DictConfig, t: dict):
    """The examples, the human column that ranks them and each row's context (reference / source)."""
    from cscore.scorers.kinds.pooler import target_aspect
    from cscore.cli.stages import load_stage
    from cscore.cli.validate import validate

    validate(cfg)
    examples = load_stage(cfg).examples
    aspect = target_aspect(examples, t["aspect"])
    column = "reference" if t["condition"] == "reference" else "source"
    contexts = [c if isinstance(c, str) else "" for c in examples[column]] if column in examples else [""] * len(examples)
    if not any(c.strip() for c in contexts):
        raise ConfigError(f"t5score.train.condition={t['condition']} but data {cfg.data.name} has no {column} texts; "
                          "use t5score.train.condition=source or data with references")
    return examples, aspect, contexts


def train(cfg: DictConfig, t: dict) -> tuple[Path, bool]:
    import torch

    from cscore.cli.cdm_cmd import digest, split_groups, versions, write_json
    from cscore.scorers.baselines import t5score_train as tt
    from cscore.scorers.models import auto_device, auto_dtype

    if not t["model"]:
        raise ConfigError("t5score.train.model=<seq2seq model (hub id or local directory)> is required")
    examples, aspect, contexts = training_table(cfg, t)
    out = Path(t["out"]).expanduser() if t["out"] else Path("outputs") / "t5score" / "train" / time.strftime(
        "%Y-%m-%d_%H-%M-%S")
    scores = examples[f"{rundir.HUMAN}{aspect}"].to_numpy(dtype=np.float64)
    groups = examples["group"].astype(str).tolist()
    identity = {"data": digest(OmegaConf.to_container(cfg.data, resolve=True)), "split": digest(
        OmegaConf.to_container(cfg.split, resolve=True)), "rows": digest(examples["id"].astype(str).tolist()),
        **{k: v for k, v in t.items() if k != "out"}, "aspect": aspect}
    meta_file = out / META
    if meta_file.exists():
        if json.loads(meta_file.read_text()).get("identity") == identity:
            return out, True
        raise ConfigError(f"{out} holds a model trained with another config; give another t5score.train.out")
    held = split_groups(groups, t["holdout"], t["seed"])
    train_rows = ~held & np.isfinite(scores)
    if t["zscore"]:
        mu, sd = scores[train_rows].mean(), scores[train_rows].std()
        if not sd > 0:
            raise ConfigError(f"human.{aspect} is constant on the training rows; nothing to rank")
        scores = (scores - mu) / sd
    hyps = examples["hypothesis"].tolist()
    sets = {}
    for name, mask in (("train", ~held), ("held_out", held)):
        idx = np.flatnonzero(mask)
        sets[name] = tt.ranking_pairs([groups[i] for i in idx], [contexts[i] for i in idx], [hyps[i] for i in idx],
                                      scores[idx], both_directions=t["both_directions"], min_gap=t["min_gap"])
    if not sets["train"]:
        raise ConfigError("no training pairs: no two hypotheses of a train group have different human scores")
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    device = auto_device(cfg.runtime.device)
    dtype = torch.float32 if cfg.runtime.dtype == "auto" else auto_dtype(cfg.runtime.dtype, device)
    from cscore.scorers.models import ModelSpecError, check_local_path, load_failure

    spec = str(t["model"])
    check_local_path(spec, spec)  # a missing local directory: one line naming it, not a hub-id complaint
    try:
        tok = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForSeq2SeqLM.from_pretrained(spec, dtype=dtype).to(device)
    except (OSError, ValueError) as err:
        raise ModelSpecError(f"t5score.train.model: {load_failure(spec, spec, None, err)}") from None
    kw = {"batch_size": t["batch_size"], "max_length": t["max_length"]}
    before = {k: tt.pairwise_accuracy(model, tok, v, **kw) for k, v in sets.items()}
    log.info("t5score train: %d train pairs, %d held-out pairs (%s-based, human.%s); pairwise accuracy before: "
             "train %s, held-out %s", len(sets["train"]), len(sets["held_out"]), t["condition"], aspect,
             fmt(before["train"]), fmt(before["held_out"]))
    start = time.perf_counter()
    try:
        losses = tt.train(model, tok, sets["train"], alpha=t["alpha"], epochs=t["epochs"], lr=t["lr"],
                          seed=t["seed"], log=log.info, **kw)
    except FloatingPointError as err:
        raise ConfigError(f"t5score train: {err}") from None
    after = {k: tt.pairwise_accuracy(model, tok, v, **kw) for k, v in sets.items()}
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    meta = {"base": t["model"], "loss": "max(0, f(worse) - f(better) + alpha (m_better - m_worse)) (T5Score Eq. 3)",
            "pairs": {k: len(v) for k, v in sets.items()}, "epoch_loss": losses,
            "pairwise_accuracy": {"before": before, "after": after},
            "held_out_groups": sorted(set(np.array(groups)[held])), "identity": identity,
            "config": OmegaConf.to_container(cfg.t5score.train, resolve=True), "versions": versions(),
            "seconds": round(time.perf_counter() - start, 3), "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(meta_file, meta)  # last: marks the directory finished
    log.info("t5score train: pairwise accuracy after: train %s, held-out %s; saved to %s", fmt(after["train"]),
             fmt(after["held_out"]), out)
    return out, False


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"
