"""Established metrics beside the contrastive rows (``method=baseline baseline=<name>``), one family
per module (``lexical``, ``bertscore``, ``generative``, ``external``), each a ``common.Baseline``
registered by name; settings in ``conf/baseline/<name>.yaml``, documented in docs/methods/baselines.md."""

from __future__ import annotations

from dataclasses import asdict as as_dict  # a baseline's settings in their order (metrics.json, variants)
from typing import Any

from cscore.errors import ConfigError
from cscore.registry import suggest
from cscore.scorers.baselines.common import BASELINES, Baseline, BaselineRun, Result, Texts
from cscore.scorers.methods.params import specs_of

BASELINES.discover(__name__)  # every module here: each family module registers its baselines

__all__ = ["BASELINES", "Baseline", "BaselineRun", "Result", "Texts", "as_dict", "check_config", "check_params",
           "columns", "score"]


def check_params(name: str, params: dict) -> Any:
    """The settings as the baseline's typed ``Params``; a ConfigError names the first bad key."""
    baseline = BASELINES.get(name)
    specs = specs_of(baseline.Params)
    params = params or {}
    for key in params:
        if key not in specs:
            raise ConfigError(f"no setting baseline.{name}.{key}{suggest(key, specs, f'baseline.{name}.')}; "
                              f"baseline.{name} has {', '.join(specs)}")
    missing = [k for k in specs if k not in params]
    if missing:
        raise ConfigError(f"baseline.{name} lacks {', '.join(missing)} (conf/baseline/{name}.yaml sets them)")
    checked = baseline.Params(**{key: specs[key].check(f"baseline.{name}.{key}", value)
                                 for key, value in params.items()})
    baseline.check(checked)
    return checked


def check_config(method: str | None, chosen: dict | None) -> dict:
    """{baseline name: checked settings} of a run, in the order given; ConfigError when method and the
    ``baseline`` group do not go together."""
    if method != "baseline":
        if chosen:
            raise ConfigError(f"baseline={','.join(chosen)} is for method=baseline (this run has method={method})")
        return {}
    if not chosen:
        raise ConfigError(f"method=baseline needs baseline=<name> or a list, e.g. 'baseline=[bleu,chrf,rouge]'; "
                          f"known: {', '.join(BASELINES)}")
    out = {name: check_params(name, params) for name, params in chosen.items()}
    seen: dict[str, str] = {}
    for name, params in out.items():
        for col in columns(name, params):
            if col in seen:
                raise ConfigError(f"baselines {seen[col]} and {name} both write score.{col}")
            seen[col] = name
    return out


def columns(name: str, params: Any) -> list[str]:
    return BASELINES.get(name).columns(params)


def score(name: str, params: Any, texts: Texts, run: BaselineRun) -> Result:
    return BASELINES.get(name).score(params, texts, run)
