"""Scoring methods: pure functions of per-token statistics.

Each method is one small module with ``NAME``, ``needs(**params)`` (which models it reads)
and ``token_scores(stats, **params)`` (one value per hypothesis token). ``score`` adds the
shared length handling (``norm``, ``skip_first``; a method may give one its own name in
``AGGREGATION_ALIASES``, as cdm calls ``norm`` ``pooling``). A new method is one new file, one line in
``METHODS``, its ``Params`` dataclass (the
one place its defaults are written: Hydra's ConfigStore node ``schema/method/<name>`` that
``conf/method/<name>.yaml`` builds on, and the Python API's defaults) and its preset YAML.
"""

from __future__ import annotations

import inspect

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.methods import (
    baseline,
    cd_judge,
    cd_judge_released,
    cd_score,
    cdm,
    cdm_classifier,
    cdm_gen,
    contrast,
    division,
    ensemble,
    single,
)
from cscore.scorers.methods.common import aggregate
from cscore.scorers.methods.params import defaults_of, specs_of, suggest

METHODS = {
    m.NAME: m
    for m in (
        single,
        ensemble,
        contrast,
        division,
        cd_score,
        cd_judge,
        cd_judge_released,
        cdm,
        cdm_classifier,
        cdm_gen,
        baseline,
    )
}
AGGREGATION_KEYS = ("norm", "skip_first")
# methods a cross-family pair computes on aligned units (scorers/engine/align.py); single reads one model
ALIGNED = ("single", "ensemble", "contrast", "division", "cd_score", "cdm")


def get(name: str):
    try:
        return METHODS[name]
    except KeyError:
        raise ConfigError(
            f"unknown method {name!r}{suggest(name, METHODS)}; known: {', '.join(sorted(METHODS))}"
        ) from None


NOT_PARAMS = ("name", "variant")  # the Params fields that name the method and its column


def cross_family_refusal(name: str, method: dict | None = None) -> str | None:
    """Why a cross-family pair (different tokenizers) cannot run method ``name`` with the settings
    ``method`` (a run's method config; None: a score from token statistics), or None when it can:
    the methods on aligned units, and a run of cd_judge over the range's values (``decode=values``)."""
    module = get(name)
    if module.NAME in ALIGNED:
        return None
    if module.NAME == cd_judge.NAME and method is not None:
        decode = method.get("decode") or defaults(name)["decode"]
        if decode == "values":
            return None
        return (f"method.decode={decode} reads the judge's text in one vocabulary, and this pair's tokenizers differ "
                "(a cross-family pair): set method.decode=values (Eq. 1 over the range's values, each value scored "
                "whole by each model on its own prompt)")
    return (f"method {name!r} needs expert and amateur to share a tokenizer; with a cross-family pair "
            f"(units=aligned) use one of {', '.join(ALIGNED)}, or cd_judge with method.decode=values")


def check_aligned(name: str, method: dict | None = None) -> None:
    """A ConfigError unless a cross-family pair can run method ``name`` (``cross_family_refusal``)."""
    why = cross_family_refusal(name, method)
    if why is not None:
        raise ConfigError(why)


def defaults(name: str) -> dict:
    """The method's default parameters, from its ``Params`` dataclass."""
    return {k: v for k, v in defaults_of(get(name).Params).items() if k not in NOT_PARAMS}


def with_defaults(name: str, params: dict) -> dict:
    return {**defaults(name), **params}


def accepted_params(module) -> set[str]:
    """A token method's keyword parameters; a method of another kind lists them in ``ACCEPTS``."""
    if hasattr(module, "ACCEPTS"):
        return set(module.ACCEPTS)
    return set(inspect.signature(module.token_scores).parameters) - {"stats"}


def aggregation_keys(module) -> dict[str, str]:
    """{parameter: aggregation key}: ``norm`` and ``skip_first``, or the method's own name for one
    (``AGGREGATION_ALIASES``: cdm calls ``norm`` ``pooling``; the original name is then not taken)."""
    aliases = dict(getattr(module, "AGGREGATION_ALIASES", {}))
    return {**{k: k for k in AGGREGATION_KEYS if k not in aliases.values()}, **aliases}


def split_params(name: str, params: dict) -> tuple[dict, dict]:
    """Split params into (token-level params, aggregation params); reject unknown keys."""
    module = get(name)
    accepted = accepted_params(module)
    agg_keys = aggregation_keys(module)
    token, agg = {}, {}
    for key, value in params.items():
        if key in agg_keys:
            agg[agg_keys[key]] = value
        elif key in accepted:
            token[key] = value
        else:
            raise ConfigError(f"method {name!r} has no parameter {key!r}; it takes {sorted(accepted | set(agg_keys))}")
    return token, agg


def check_params(name: str, params: dict, prefix: str = "method") -> dict:
    """The params converted to their types; a ConfigError names the first bad key and what it may be."""
    accepted = set(defaults(name))
    for key in params:
        if key not in accepted:
            raise ConfigError(f"method {name!r} has no parameter {prefix}.{key}{suggest(key, accepted)}; "
                              f"it takes {', '.join(sorted(accepted))}")
    specs = specs_of(get(name).Params)
    return {key: specs[key].check(f"{prefix}.{key}", value) if key in specs else value
            for key, value in params.items()}


def checked(name: str, params: dict) -> dict:
    """``params`` with the defaults, checked against the method's ``Params`` (the one range check)."""
    merged = with_defaults(name, params)
    split_params(name, merged)  # an unknown key first, as ``has no parameter 'x'``
    # norm is aggregate's to check: cdm's comparison rows pool with min / max, which a user's
    # method.norm does not offer (the config check keeps sum | mean | sqrt)
    check_params(name, {k: v for k, v in merged.items() if k != "norm"}, prefix=name)
    return merged


def token_scores(name: str, stats: dict, **params) -> np.ndarray:
    token, _ = split_params(name, checked(name, params))
    return get(name).token_scores(stats, **token)


def score(name: str, stats: dict, **params) -> np.ndarray:
    """Per-item scores of method ``name`` on ``stats`` ({"expert": TokenStats, ...}); parameters
    not given take the defaults of the method's ``Params`` dataclass (``with_defaults``), checked
    here on each call (``checked``)."""
    kind = getattr(get(name), "KIND", "token")
    if kind != "token":  # a trained pooler needs labels; a judge reads other statistics
        raise ConfigError(f"method {name!r} ({kind}) is not a function of the token statistics alone: "
                          f"score it with `cscore run method={name}`" + (
                              "; or train one with cscore.scorers.cdm.pooler (cross_validate / train_pooler)"
                              if kind == "pooler" else ""))
    token, agg = split_params(name, checked(name, params))
    values = get(name).token_scores(stats, **token)
    offsets = next(iter(stats.values())).offsets
    return aggregate(values, offsets, **agg)
