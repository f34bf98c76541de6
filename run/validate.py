"""Check the whole composed run config before anything expensive runs: ``typed`` against the schema, then
the checks that read several sections."""

from __future__ import annotations

import re

from omegaconf import DictConfig

from cscore.errors import ConfigError
from cscore.run.typed import RunConfig, resolved, typed


def check_amateur(run: RunConfig) -> None:
    """A method that reads the amateur needs one: a model path or an early exit of the expert."""
    from cscore.run.variants import models_needed

    ama = run.pair.amateur
    if "amateur" in models_needed(list(run.method_plan.rows)) and ama.path is None and ama.early_exit is None:
        raise ConfigError(f"method {run.method.name} needs an amateur: set pair.amateur.path or "
                          "pair.amateur.early_exit (an early exit of the expert)")


def validate(cfg: DictConfig) -> RunConfig:
    """The config as typed objects; a ConfigError for the first setting that is not allowed."""
    c = resolved(cfg)
    run = typed(c)
    variant = c["method"].get("variant")
    if variant is not None and not (isinstance(variant, str) and re.match(r"^[\w.\-]+$", variant)):
        raise ConfigError(f"method.variant must be a plain name (letters, digits, _ . -), got {variant!r}")
    check_amateur(run)
    from cscore.scorers.baselines import check_config as check_baseline

    check_baseline(c["method"].get("name"), c.get("baseline"))  # method=baseline and the baseline group together
    check_judge_prompt(c)
    return run


def check_judge_prompt(c: dict) -> None:
    """The judge_prompt group goes only with the kinds that read one."""
    from cscore.run import kinds
    from cscore.scorers import methods

    jp = c.get("judge_prompt")
    if not jp:
        return
    name = c["method"].get("name")
    if not kinds.of_method(name).judge_prompt:
        judges = " | ".join(m for m in methods.METHODS if kinds.of_method(m).judge_prompt)
        raise ConfigError(f"judge_prompt={jp.get('name')} is for the judge methods (method={judges}); "
                          f"this run has method={name}")
    from cscore.data.judge_prompts import check_config

    check_config(jp)
