"""``cscore t5score train``: T5Score's discriminative training (``training/t5score_job.py``) on a dataset's
human scores, composed from ``conf/t5score.yaml``; a finished directory with the same config is skipped."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from cscore import rundir
from cscore.cli.compose import checked, stage_of
from cscore.cli.compose import compose as compose_stage
from cscore.cli.exits import one_line_errors
from cscore.errors import ConfigError
from cscore.scorers.methods.params import specs_of
from cscore.training.params import T5ScoreTrain

USAGE = """usage: cscore t5score train t5score.train.model=<seq2seq model> data=<dataset> [overrides]

  T5Score's discriminative training (ranking margin loss on human-ranked pairs); options in
  conf/t5score.yaml (t5score.train.*); the default recipe is the paper's and its released script's
  (Adafactor, lr 1e-5 decaying linearly to 0, batch 32, dropout 0.05, 64 tokens);
  t5score.train.optimizer=adamw and t5score.train.schedule=constant are options. Then:
  cscore run method=baseline baseline=t5score baseline.t5score.model=<t5score.train.out>"""
PARAMS = specs_of(T5ScoreTrain)


def main(argv: list[str]) -> None:
    if stage_of(argv, "t5score", ("train",), USAGE) is None:
        return
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
    return compose_stage("t5score", [o for o in overrides if o != "--cfg"], {"t5score.train": PARAMS})


def training_table(run, t: dict):
    """The examples, the human aspect that ranks them and each row's context (reference / source)."""
    from cscore.run.kinds.aspects import target_aspect
    from cscore.run.stages import load_stage

    examples = load_stage(run).examples
    aspect = target_aspect(examples, t["aspect"])
    column = "reference" if t["condition"] == "reference" else "source"
    texts = examples[column] if column in examples else [""] * len(examples)
    contexts = [c if isinstance(c, str) else "" for c in texts]
    if not any(c.strip() for c in contexts):
        raise ConfigError(f"t5score.train.condition={t['condition']} but data {run.data.name} has no {column} texts; "
                          "use t5score.train.condition=source or data with references")
    return examples, aspect, contexts


def check_model(spec: str) -> None:
    """The model folder (or hub id) checked from its files alone, before the data loads (a ConfigError)."""
    from cscore.run.pair_check import spec_kind
    from cscore.scorers.models import hub

    key = f"t5score.train.model={spec}"
    kind = spec_kind("t5score.train.model", spec)
    if kind == "gguf":
        raise ConfigError(f"{key}: a GGUF file is a decoder; T5Score trains a seq2seq model (a local folder or hub id)")
    if kind == "hub" and (why := hub.usable_offline(spec)):
        raise ConfigError(f"{key}: a hub model not in the local hub cache, and the Hugging Face hub is unreachable "
                          f"({why}){hub.PREDOWNLOADED}")


def train(cfg: DictConfig, t: dict) -> tuple[Path, bool]:
    """(output directory, whether it was finished earlier with this config: skipped)."""
    from cscore.run.typed import resolved
    from cscore.run.validate import validate
    from cscore.training import t5score_job

    if not t["model"]:
        raise ConfigError("t5score.train.model=<seq2seq model (hub id or local directory)> is required")
    check_model(str(t["model"]))
    run = validate(cfg)
    if run.runtime.shards > 1 or run.runtime.shard is not None:  # runtime.devices=[a,b] is 2 shards
        raise ConfigError("cscore t5score train fine-tunes in one process (its gradient steps are not a statistics "
                          "pass): runtime.shards / runtime.shard / runtime.devices do not apply; give one "
                          "runtime.device=<device>")
    examples, aspect, contexts = training_table(run, t)
    job = t5score_job.open_job(run, t, examples, aspect, f"{rundir.HUMAN}{aspect}", contexts, resolved(cfg))
    if not job.finished:
        t5score_job.train(run, job)
    return job.folder.path, job.finished
