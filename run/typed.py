"""The schema's nodes in Hydra's ConfigStore (``register``) and a composed run config checked into typed
objects (``typed(cfg) -> RunConfig``; the dataclasses are ``cscore.config.run``'s)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from omegaconf import DictConfig, OmegaConf

from cscore.config.groups import Data, JudgePrompt, Prompt
from cscore.config.run import ModelSpec, Pair, RunConfig, RunSettings
from cscore.errors import ConfigError
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.methods.params import check_section, defaults_of

SETTINGS = ("runtime", "stats", "cache", "baselines", "split", "meta")  # the sections checked key by key


def register() -> None:
    """Store the schema's defaults: ``schema/run``, ``schema/method/<name>``, ``schema/cdm``, ``schema/t5score``."""
    from hydra.core.config_store import ConfigStore

    from cscore.scorers import methods
    from cscore.training.params import Cdm, T5Score

    store = ConfigStore.instance()
    store.store(group="schema", name="run", node=defaults_of(RunSettings), package="_global_")
    for name, module in methods.METHODS.items():
        store.store(group="schema/method", name=name, node=defaults_of(module.Params), package="method")
    store.store(group="schema", name="cdm", node={"cdm": defaults_of(Cdm)}, package="_global_")
    store.store(group="schema", name="t5score", node={"t5score": defaults_of(T5Score)}, package="_global_")


def resolved(cfg) -> dict:
    """The config as a plain dict, interpolations resolved (a one-line ConfigError when one does not)."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return cast(dict, OmegaConf.to_container(cfg, resolve=True))
    except Exception as err:  # an interpolation that does not resolve
        raise ConfigError(f"the config does not resolve: {err}") from None


def typed_data(data: dict | None) -> Data:
    """The data section: the keys every dataset has (``Data``), the rest as its loader's ``Options``."""
    from cscore.data.options import RUNNER_KEYS
    from cscore.data.registry import options_of
    from cscore.data.schema import DataError

    if not data:
        return Data()
    try:
        options = options_of(data)
    except DataError as err:
        raise ConfigError(str(err)) from None
    common = check_section(Data, {k: v for k, v in data.items() if k in RUNNER_KEYS}, "data")
    return replace(common, options=options)


def check_pair(pair: dict) -> Pair:
    expert, amateur = pair.get("expert") or {}, pair.get("amateur") or {}
    if not (isinstance(spec := expert.get("path"), str) and spec.strip()):
        raise ConfigError(f"pair.expert.path must name a model (hub id, local dir or gguf: spec), got {spec!r}")
    if (spec := amateur.get("path")) is not None and not (isinstance(spec, str) and spec.strip()):
        raise ConfigError(f"pair.amateur.path must name a model or be null, got {spec!r}")
    return Pair(name=pair.get("name", ""), expert=check_section(ModelSpec, expert, "pair.expert"),
                amateur=check_section(ModelSpec, amateur, "pair.amateur"))


def typed_method(method: dict):
    """The method section as its checked ``Params``."""
    from cscore.scorers import methods

    name = methods.get(method.get("name")).name  # type: ignore[arg-type]  # None or other: one-line ConfigError
    return methods.params(name, method, prefix="method")


def typed(cfg: DictConfig | dict) -> RunConfig:
    """The composed run config as typed objects (a one-line ConfigError for the first setting not allowed);
    ``runtime.devices`` is resolved here, once, and the ``PassOptions`` built from the resolved runtime."""
    from cscore.run import variants
    from cscore.run.launch import resolve_devices
    from cscore.run.tracking import check_config as check_tracking

    c = resolved(cfg)
    settings = {key: check_section(type(getattr(RunSettings(), key)), c.get(key) or {}, key) for key in SETTINGS}
    prompt = check_section(Prompt, c.get("prompt") or {}, "prompt")
    judge_prompt = check_section(JudgePrompt, c["judge_prompt"], "judge_prompt") if c.get("judge_prompt") else None
    pair = check_pair(c["pair"])
    method = typed_method(c["method"])
    baselines = settings["baselines"]
    method_plan = variants.method_plan(method, c["method"], baselines.t, list(baselines.rows))
    tracking = check_tracking(c.get("tracking"))
    top = {k: c[k] for k in ("resume", "out", "tokenizer", "model") if k in c}
    runtime = settings["runtime"] = resolve_devices(settings["runtime"])  # runtime.devices: parts and device
    return RunConfig(**settings, **top, passes=PassOptions.of(runtime),
                     data=typed_data(c.get("data")), pair=pair, method=method,
                     prompt=prompt, judge_prompt=judge_prompt, baseline=c.get("baseline"),
                     tracking=tracking, method_plan=method_plan)
