"""``cscore cdm generate`` and ``cscore cdm train`` (Generative CDM): both compose ``conf/cdm.yaml`` with
Hydra's override syntax and call ``cscore.training``; ``method=cdm_gen`` scores with ``run/kinds/discriminator.py``."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

from omegaconf import DictConfig, OmegaConf

from cscore.cli.compose import checked, stage_of
from cscore.cli.compose import compose as compose_stage
from cscore.cli.exits import one_line_errors
from cscore.cli.names import resolve_pair
from cscore.errors import ConfigError, ShardsPending
from cscore.run import launch, workers
from cscore.run.typed import resolved
from cscore.run.validate import validate
from cscore.scorers.methods.params import specs_of
from cscore.scorers.store.checkpoint import pending_text
from cscore.scorers.store.runner import Pending
from cscore.training.params import CdmGenerate, CdmTrain

log = logging.getLogger(__name__)

USAGE = """usage: cscore cdm <generate|train> [hydra overrides]

  generate   make negatives from positives with the degraded amateur p_a^- of the pair
             e.g. cscore cdm generate data=demo cdm.generate.strategy=multi cdm.generate.out=outputs/cdm/neg
  train      train a discriminator on a generate directory
             e.g. cscore cdm train cdm.train.input=outputs/cdm/neg cdm.train.out=outputs/cdm/disc
                  cscore cdm train cdm.train.input=... cdm.train.discriminator=/models/my-classifier
  then       cscore run method=cdm_gen model=outputs/cdm/disc

Sharding (docs/scaling.md) as for cscore run: runtime.shards=N [runtime.shard=K] or runtime.devices=[...]
  generate   the positives dealt to the shards in whole groups; merged into one negatives.jsonl
  train      the pooler's momentum pass sharded and merged (a classifier's training does not shard)

Options: conf/cdm.yaml (cdm.generate.*, cdm.train.*); --cfg prints the composed cdm section."""


GENERATE_PARAMS = specs_of(CdmGenerate)
TRAIN_PARAMS = specs_of(CdmTrain)


def main(argv: list[str]) -> None:
    stage, rest = stage_of(argv, "cdm", ("generate", "train"), USAGE), argv[1:]
    if stage is None:
        return
    with one_line_errors("interrupted; what was written is kept and the same command resumes"):
        cfg, overrides = parse(rest)
        if "--cfg" in rest:
            print(OmegaConf.to_yaml(cfg.cdm))
            return
        try:
            out = generate(cfg, overrides) if stage == "generate" else train(cfg, overrides)
        except ShardsPending as err:  # this process did its shards; the stage is complete once every shard is
            log.info(pending_line(stage, overrides, err))
            return
        print(f"cdm {stage}: {out}")


def compose(overrides: list[str]) -> DictConfig:
    """conf/cdm.yaml with the overrides; a misspelt key or option is a one-line ConfigError."""
    return compose_stage("cdm", overrides, {"cdm.generate": GENERATE_PARAMS, "cdm.train": TRAIN_PARAMS})


def parse(argv: list[str]) -> tuple[DictConfig, list[str]]:
    """(composed config, overrides) of a command line (``--cfg`` left out)."""
    overrides = [a for a in argv if a != "--cfg"]
    return compose(overrides), overrides


def generate(cfg: DictConfig, overrides: Sequence[str] = ()) -> Path:
    """Make the negatives (training/negatives.py); returns the output directory."""
    g = checked(cfg.cdm.generate, GENERATE_PARAMS, "cdm.generate")
    if g["limit"] is not None and g["limit"] < 2:  # it can never give cdm train its two groups
        raise ConfigError(f"cdm.generate.limit={g['limit']} takes positives of one group (document / dialogue) "
                          "and cdm train needs at least 2 (one to train on, one held out): give "
                          "cdm.generate.limit=2 or more (null: all)")
    run = sharding("generate", cfg, overrides)  # before torch loads
    shards = workers.coordinator(run.runtime)  # the job's, beside the typed config
    from cscore.run import negatives as steps
    from cscore.run.stages import load_stage
    from cscore.scorers.engine import threads
    from cscore.training import artifacts, negatives

    job = negatives.open_job(run, g, artifacts.out_dir(g["out"], "cdm", "generate"), resolved(cfg))
    threads.apply(run.runtime.threads)  # as cscore run (each worker of runtime.devices with its own)
    positives = steps.positives_of(load_stage(run).examples, g)
    if not shards.on:
        steps.make(job, run, positives)
        return job.folder.path
    if run.runtime.devices is not None:  # one worker per device writes its shard; this process merges
        workers.run_workers(run, list(overrides), job.folder.path, command=("cdm", "generate"))
    got = steps.make_parts(job, run, positives, shards)
    if isinstance(got, Pending) or not shards.merge:
        missing, count = got.missing if isinstance(got, Pending) and shards.merge else [], shards.count
        Pending(missing).stop(shards, f"cdm generate ({job.folder.path}): {pending_text(missing, count)}")
    return job.folder.path


def train(cfg: DictConfig, overrides: Sequence[str] = ()) -> Path:
    """Train the discriminator (training/discriminator.py); returns the output directory."""
    t = checked(cfg.cdm.train, TRAIN_PARAMS, "cdm.train")
    classifier = None if t["discriminator"] == "pooler" else (
        f"with cdm.train.discriminator={t['discriminator']} trains a transformers classifier: its gradient "
        "steps are one sequence in one process, not a statistics pass")
    run = sharding("train", cfg, overrides, classifier)  # before torch loads
    shards = workers.coordinator(run.runtime)  # the job's, beside the typed config
    from cscore.run.kinds.pair import load_pair, stats_cache
    from cscore.scorers.engine import threads
    from cscore.training import discriminator

    job = discriminator.open_job(run, t, resolved(cfg))
    if job.finished:
        log.info("cdm train: %s is finished with this config: skipped (remove it to train again)", job.folder.path)
        return job.folder.path
    threads.apply(run.runtime.threads)  # as cscore run (each worker of runtime.devices with its own)
    if run.runtime.devices is not None:  # one worker per device computes its shard of the momentum pass
        workers.run_workers(run, list(overrides), job.folder.path, command=("cdm", "train"))
    pair = load_pair(run, ["expert", "amateur"]) if job.kind == "pooler" else None
    got = discriminator.train(run, job, pair, stats_cache(run) if pair is not None else None, shards)
    if isinstance(got, Pending):  # this process did its shards of the momentum pass
        got.stop(shards)
    return job.folder.path


def sharding(stage: str, cfg: DictConfig, overrides: Sequence[str], refuse: str | None = None):
    """The stage's typed run (the pair rule applied as cscore run does, then the one check) with its sharding
    settings checked before anything loads; ``refuse``: why this stage cannot shard (one device listed too)."""
    resolve_pair(cfg, list(overrides))
    run = validate(cfg)
    rt = run.runtime
    if refuse and (rt.shards > 1 or rt.shard is not None or cfg.runtime.devices is not None):
        raise ConfigError(f"cscore cdm {stage} {refuse}; it cannot shard: run it with runtime.shards=1 (the default)")
    # the stage as launch.check sees a kind: its shards meet in the cache (train) or its output directory (generate)
    launch.check(run, SimpleNamespace(name=f"cdm {stage}", splits=True, meets_in_cache=stage == "train"))
    return run


def pending_line(stage: str, overrides: list[str], err: ShardsPending) -> str:
    """The line a shard that did its part ends with: what is missing and the commands that finish it."""
    if not err.missing:
        return str(err)
    commands = " and ".join(workers.stage_line(("cdm", stage), overrides, f"runtime.shard={k}") for k in err.missing)
    return f"{err}; cdm {stage} is incomplete: {commands} (the last shard to finish merges)"
