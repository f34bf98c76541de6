"""``cscore cdm generate`` and ``cscore cdm train`` (Generative CDM, the CDM paper's Algorithm 1), and
the score step of ``method=cdm_gen`` (kind ``discriminator``).

Both commands compose ``conf/cdm.yaml`` (= config.yaml + a ``cdm:`` section) with Hydra's override
syntax, so ``data=``, ``pair=``, ``prompt=`` and ``runtime.*`` mean what they mean for ``cscore run``;
they check it, load what is needed and call ``cscore.scorers.training`` (``negatives``: the negatives
and their provenance, resumable; ``discriminator``: the group-held-out training and its
cscore_discriminator.json, written last).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.cli.compose import checked
from cscore.errors import ConfigError
from cscore.scorers.methods.params import specs_of
from cscore.scorers.training.classifier import classifier_log_odds, load_classifier
from cscore.scorers.training.discriminator import pooler_from_dict
from cscore.scorers.training.negatives import pair_record
from cscore.scorers.training_params import CdmGenerate, CdmTrain

log = logging.getLogger("cscore")

USAGE = """usage: cscore cdm <generate|train> [hydra overrides]

  generate   make negatives from positives with the degraded amateur p_a^- of the pair
             e.g. cscore cdm generate data=demo cdm.generate.strategy=multi cdm.generate.out=outputs/cdm/neg
  train      train a discriminator on a generate directory
             e.g. cscore cdm train cdm.train.input=outputs/cdm/neg cdm.train.out=outputs/cdm/disc
                  cscore cdm train cdm.train.input=... cdm.train.discriminator=/models/my-classifier
  then       cscore run method=cdm_gen model=outputs/cdm/disc

Options: conf/cdm.yaml (cdm.generate.*, cdm.train.*); --cfg prints the composed cdm section."""


GENERATE_PARAMS = specs_of(CdmGenerate)  # the schema: scorers/training_params.py
TRAIN_PARAMS = specs_of(CdmTrain)


# ---------------------------------------------------------------------------------------------
# the command


def main(argv: list[str]) -> None:
    from cscore.cli.main import fail, one_line_errors

    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    stage, rest = argv[0], argv[1:]
    if stage not in ("generate", "train"):
        fail(f"unknown cdm command {stage!r}; use cscore cdm generate | train (cscore cdm --help)", 2)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    with one_line_errors("interrupted; what was written is kept and the same command resumes"):
        cfg, overrides = parse(rest)
        if "--cfg" in rest:
            print(OmegaConf.to_yaml(cfg.cdm))
            return
        out = generate(cfg, overrides) if stage == "generate" else train(cfg, overrides)
        print(f"cdm {stage}: {out}")


def compose(overrides: list[str]) -> DictConfig:
    """conf/cdm.yaml with the overrides; a misspelt key or option is a one-line ConfigError."""
    from cscore.cli.compose import compose as compose_stage

    return compose_stage("cdm", overrides, {"cdm.generate": GENERATE_PARAMS, "cdm.train": TRAIN_PARAMS})


def parse(argv: list[str]) -> tuple[DictConfig, list[str]]:
    """(composed config, overrides) of a command line (``--cfg`` left out)."""
    overrides = [a for a in argv if a != "--cfg"]
    return compose(overrides), overrides


def generate(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """Make the negatives (scorers/training/negatives.py); returns the output directory.
    ``overrides``: the command line, for the pair's early-exit rule (as in ``cscore run``)."""
    from cscore.cli.pooler_run import target_aspect
    from cscore.cli.run import load_pair, load_stage, make_prompts, resolve_pair
    from cscore.cli.validate import validate
    from cscore.scorers.training import artifacts, negatives

    g = checked(cfg.cdm.generate, GENERATE_PARAMS, "cdm.generate")
    validate(cfg)
    resolve_pair(cfg, list(overrides))
    job = negatives.open_job(cfg, g, artifacts.out_dir(g["out"], "cdm", "generate"))
    examples = load_stage(cfg).examples
    column = f"{rundir.HUMAN}{target_aspect(examples, g['aspect'])}" if g["positives"] == "top_rated" else None
    positives = negatives.select_positives(examples, g["positives"], column)
    if g["limit"] is not None:
        positives = positives.head(g["limit"])
    todo = negatives.todo(job, positives)
    models = None
    if len(todo):
        pair = load_pair(cfg, ["expert", "amateur"])
        prompts, spans = make_prompts(cfg, todo, pair.tokenizer)
        inputs = pair.encode(prompts, list(todo["text"]), max_length=cfg.runtime.max_length, source_spans=spans)
        models = negatives.write_negatives(job, cfg, pair, todo, inputs)
    negatives.finish(job, cfg, len(positives), models)
    return job.folder.path


def train(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """Train the discriminator (scorers/training/discriminator.py); returns the output directory."""
    from cscore.cli.run import load_pair, resolve_pair, stats_cache
    from cscore.cli.validate import validate
    from cscore.scorers.training import discriminator

    t = checked(cfg.cdm.train, TRAIN_PARAMS, "cdm.train")
    validate(cfg)
    resolve_pair(cfg, list(overrides))
    job = discriminator.open_job(cfg, t)
    if job.finished:
        log.info("cdm train: %s is finished with this config: skipped (remove it to train again)", job.folder.path)
        return job.folder.path
    pair = load_pair(cfg, ["expert", "amateur"]) if job.kind == "pooler" else None
    discriminator.train(cfg, job, pair, stats_cache(cfg) if pair is not None else None)
    return job.folder.path


# ---------------------------------------------------------------------------------------------
# method=cdm_gen in `cscore run`


def plan_discriminator(cfg: DictConfig):
    """plan_stage, plus the momentum temperature a pooler discriminator reads; refuses a pooler
    trained on another pair (before any model loads)."""
    from cscore.cli.run import plan_stage
    from cscore.scorers.methods import cdm_gen

    plan = plan_stage(cfg)
    meta = cdm_gen.read_meta(plan.variants[-1].params["discriminator"])
    if meta["kind"] == "pooler":
        want, have = meta["pair"], pair_record(cfg)
        keys = {"expert": "pair.expert.path", "amateur": "pair.amateur.path", "early_exit": "pair.amateur.early_exit"}
        diff = [name for k, name in keys.items() if str(want.get(k)) != str(have.get(k))]
        if diff:
            raise ConfigError(f"the discriminator's pooler reads the momentum of the pair it was trained with "
                              f"(expert {want['expert']}, amateur {want['amateur']}, early_exit {want['early_exit']}); "
                              f"this run's pair differs in {', '.join(diff)}")
        plan.temperatures = sorted(set(plan.temperatures) | {float(meta["momentum"]["t"])})
    return plan


def score_discriminator(cfg: DictConfig, loaded, plan, console, state: dict | None = None):
    """The comparison rows as for any method (score_stage), then score.cdm_gen from the discriminator."""
    from cscore.cli.run import score_stage
    from cscore.scorers import methods
    from cscore.scorers.methods import cdm, cdm_gen
    from cscore.scorers.methods.common import per_item
    from cscore.scorers.models import auto_device

    main = plan.variants[-1]
    params = methods.check_params(main.method, main.params)
    path = params["discriminator"]
    meta = cdm_gen.read_meta(path)
    scored = score_stage(cfg, loaded, plan, console, state)
    table = scored.table
    if meta["kind"] == "pooler":
        m = meta["momentum"]
        stats = scored.stats.stats
        seqs = per_item(cdm.momentum(stats, m["t"], m["clamp"]), next(iter(stats.values())).offsets,
                        bool(m.get("skip_first", False)))
        log_odds = pooler_from_dict(meta["pooler"]).score(seqs)
    else:
        c = meta["classifier"]
        tok, model = load_classifier(str(path), auto_device(cfg.runtime.device))
        log_odds = classifier_log_odds(tok, model, list(table["prompt"]), list(table["hypothesis"]), text=c["text"],
                                       batch_size=params["batch_size"], max_length=c["max_length"])
    values = log_odds if params["output"] == "log_odds" else 1.0 / (1.0 + np.exp(-log_odds))
    table[f"{rundir.SCORE}{main.name}"] = values
    scored.metrics["discriminator"] = {"path": str(Path(path).resolve()), "kind": meta["kind"],
                                       "output": params["output"], "accuracy": meta.get("accuracy"),
                                       "trained_on": meta.get("input"), "generate_counts": meta.get("generate_counts")}
    log.info("%s: %s discriminator from %s (held-out accuracy %s)", main.name, meta["kind"], path,
             (meta.get("accuracy") or {}).get("held_out", {}).get("accuracy"))
    return scored
