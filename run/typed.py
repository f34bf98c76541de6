"""One typed config: the schema's nodes in Hydra's ConfigStore (``register``) and a composed run
config checked into typed objects (``typed(cfg) -> RunConfig``: by the precheck and by each job's
``validate``; the dataclasses are ``cscore.config.run``'s, so that the kinds may read them)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from omegaconf import DictConfig, OmegaConf

from cscore.config.groups import Data, JudgePrompt, Prompt, Tracking
from cscore.config.run import ModelSpec, Pair, RunConfig, RunSettings, check_early_exit
from cscore.errors import ConfigError
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.methods.params import check_section, defaults_of

SETTINGS = ("runtime", "stats", "cache", "baselines", "split", "meta")  # the sections checked key by key


def register() -> None:
    """Store the schema's defaults: ``schema/run`` (conf/config.yaml builds on it),
    ``schema/method/<name>`` (conf/method/*.yaml), ``schema/cdm`` and ``schema/t5score``."""
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
    """The data section: the keys every dataset has (``Data``) and the rest as its loader's
    ``Options``; a key the loader does not declare is the loader's one-line message (naming the
    options it takes), as a ConfigError."""
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
    for role in ("expert", "amateur"):
        spec = (pair.get(role) or {}).get("path")
        if role == "expert" and not (isinstance(spec, str) and spec.strip()):
            raise ConfigError(f"pair.expert.path must name a model (hub id, local dir or gguf: spec), got {spec!r}")
        if role == "amateur" and spec is not None and not (isinstance(spec, str) and spec.strip()):
            raise ConfigError(f"pair.amateur.path must name a model or be null, got {spec!r}")
    check_early_exit((pair.get("amateur") or {}).get("early_exit"))
    return Pair(name=pair.get("name", ""), expert=check_section(ModelSpec, pair.get("expert") or {}, "pair.expert"),
                amateur=check_section(ModelSpec, pair.get("amateur") or {}, "pair.amateur"))


def typed_method(method: dict):
    """The method section as its checked ``Params`` (a run's: ``typed``, once; the run directory's
    name reads the composed section before the run is typed: ``names.models_run``)."""
    from cscore.scorers import methods

    name = methods.get(method.get("name")).name  # type: ignore[arg-type]  # None or other: one-line ConfigError
    return methods.params(name, method, prefix="method")


def typed(cfg: DictConfig | dict) -> RunConfig:
    """The composed run config checked against the schema, as typed objects; the first setting
    that is not allowed is a one-line ConfigError naming it, what was given and what may be.
    ``runtime.devices`` is resolved here, once (``launch.resolve_devices``): the run's
    ``PassOptions`` are built from the resolved runtime (and the job's coordinator, beside the
    config: ``run/workers.py``)."""
    from cscore.run import variants
    from cscore.run.tracking import check_config as check_tracking

    c = resolved(cfg)
    settings = {key: check_section(type(getattr(RunSettings(), key)), c.get(key) or {}, key) for key in SETTINGS}
    prompt = check_section(Prompt, c.get("prompt") or {}, "prompt")
    judge_prompt = check_section(JudgePrompt, c["judge_prompt"], "judge_prompt") if c.get("judge_prompt") else None
    pair = check_pair(c["pair"])
    method = typed_method(c["method"])
    baselines = settings["baselines"]
    method_plan = variants.method_plan(method, c["method"], baselines.t, list(baselines.rows))
    check_tracking(c.get("tracking"))
    top = {k: c[k] for k in ("resume", "out", "tokenizer", "model") if k in c}
    from cscore.run.launch import resolve_devices

    runtime = settings["runtime"] = resolve_devices(settings["runtime"])  # runtime.devices: parts and device
    return RunConfig(**settings, **top, passes=PassOptions.of(runtime),
                     data=typed_data(c.get("data")), pair=pair, method=method,
                     prompt=prompt, judge_prompt=judge_prompt, baseline=c.get("baseline"),
                     tracking=Tracking(**(c.get("tracking") or {"name": "none"})),
                     method_plan=method_plan)
