"""Established metrics beside the contrastive rows (``method=baseline baseline=<name>``).

One family per module: ``lexical`` (bleu, chrf, rouge), ``bertscore``, ``generative`` (bartscore,
t5score), ``external`` (scores computed elsewhere, joined by id: COMET). A family has ``NAMES``,
``PARAMS`` ({name: {key: Param}}), ``columns(name, params)`` (its score.<column> names) and
``score(name, params, texts, runtime) -> Result``. Settings live in ``conf/baseline/<name>.yaml``;
this package only says what they may be."""

from __future__ import annotations

from cscore.errors import ConfigError
from cscore.registry import suggest
from cscore.scorers.baselines import bertscore, external, generative, lexical
from cscore.scorers.baselines.common import Result, Texts

FAMILIES = {name: module for module in (lexical, bertscore, generative, external) for name in module.NAMES}

__all__ = ["FAMILIES", "Result", "Texts", "check_config", "columns", "score"]


def family(name: str):
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"unknown baseline {name!r}{suggest(name, FAMILIES)}; known: {', '.join(FAMILIES)}") from None


def check_params(name: str, params: dict) -> dict:
    """The params converted to their types; a ConfigError names the first bad key."""
    specs = family(name).PARAMS[name]
    params = params or {}
    for key in params:
        if key not in specs:
            raise ConfigError(f"no setting baseline.{name}.{key}{suggest(key, specs, f'baseline.{name}.')}; "
                              f"baseline.{name} has {', '.join(specs)}")
    missing = [k for k in specs if k not in params]
    if missing:
        raise ConfigError(f"baseline.{name} lacks {', '.join(missing)} (conf/baseline/{name}.yaml sets them)")
    out = {key: specs[key].check(f"baseline.{name}.{key}", value) for key, value in params.items()}
    if hasattr(family(name), "check"):
        family(name).check(name, out)
    return out


def check_config(method: str | None, chosen: dict | None) -> dict:
    """{baseline name: checked params} of a run, in the order given; ConfigError when method and the
    ``baseline`` group do not go together."""
    if method != "baseline":
        if chosen:
            raise ConfigError(f"baseline={','.join(chosen)} is for method=baseline (this run has method={method})")
        return {}
    if not chosen:
        raise ConfigError(f"method=baseline needs baseline=<name> or a list, e.g. 'baseline=[bleu,chrf,rouge]'; "
                          f"known: {', '.join(FAMILIES)}")
    out = {name: check_params(name, params) for name, params in chosen.items()}
    seen = {}
    for name, params in out.items():
        for col in columns(name, params):
            if col in seen:
                raise ConfigError(f"baselines {seen[col]} and {name} both write score.{col}")
            seen[col] = name
    return out


def columns(name: str, params: dict) -> list[str]:
    return family(name).columns(name, params)


def score(name: str, params: dict, texts: Texts, runtime: dict) -> Result:
    return family(name).score(name, params, texts, runtime)
