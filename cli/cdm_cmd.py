"""``cscore cdm generate`` and ``cscore cdm train`` (Generative CDM, the CDM paper's Algorithm 1);
the score step of ``method=cdm_gen`` is the discriminator kind (``cli/pipeline/kinds/discriminator.py``).

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

from omegaconf import DictConfig, OmegaConf

from cscore.cli.compose import checked
from cscore.scorers.methods.params import specs_of
from cscore.scorers.training.params import CdmGenerate, CdmTrain

log = logging.getLogger(__name__)

USAGE = """usage: cscore cdm <generate|train> [hydra overrides]

  generate   make negatives from positives with the degraded amateur p_a^- of the pair
             e.g. cscore cdm generate data=demo cdm.generate.strategy=multi cdm.generate.out=outputs/cdm/neg
  train      train a discriminator on a generate directory
             e.g. cscore cdm train cdm.train.input=outputs/cdm/neg cdm.train.out=outputs/cdm/disc
                  cscore cdm train cdm.train.input=... cdm.train.discriminator=/models/my-classifier
  then       cscore run method=cdm_gen model=outputs/cdm/disc

Options: conf/cdm.yaml (cdm.generate.*, cdm.train.*); --cfg prints the composed cdm section."""


GENERATE_PARAMS = specs_of(CdmGenerate)  # the schema: scorers/training/params.py
TRAIN_PARAMS = specs_of(CdmTrain)


# ---------------------------------------------------------------------------------------------
# the command


def main(argv: list[str]) -> None:
    from cscore.cli.exits import fail, one_line_errors

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
    from cscore.cli.pipeline import negatives as steps
    from cscore.cli.pipeline.stages import load_stage
    from cscore.cli.run import resolve_pair
    from cscore.cli.validate import validate
    from cscore.scorers.training import artifacts, negatives

    g = checked(cfg.cdm.generate, GENERATE_PARAMS, "cdm.generate")
    resolve_pair(cfg, list(overrides))  # as cscore run: the pair rule, then the one check
    run = validate(cfg)
    job = negatives.open_job(run, g, artifacts.out_dir(g["out"], "cdm", "generate"))
    steps.make(job, run, steps.positives_of(load_stage(run).examples, g))
    return job.folder.path


def train(cfg: DictConfig, overrides: list[str] = ()) -> Path:
    """Train the discriminator (scorers/training/discriminator.py); returns the output directory."""
    from cscore.cli.pipeline.kinds.pair import load_pair, stats_cache
    from cscore.cli.run import resolve_pair
    from cscore.cli.validate import validate
    from cscore.scorers.training import discriminator

    t = checked(cfg.cdm.train, TRAIN_PARAMS, "cdm.train")
    resolve_pair(cfg, list(overrides))  # as cscore run: the pair rule, then the one check
    run = validate(cfg)
    job = discriminator.open_job(run, t)
    if job.finished:
        log.info("cdm train: %s is finished with this config: skipped (remove it to train again)", job.folder.path)
        return job.folder.path
    pair = load_pair(run, ["expert", "amateur"]) if job.kind == "pooler" else None
    discriminator.train(run, job, pair, stats_cache(run) if pair is not None else None)
    return job.folder.path
