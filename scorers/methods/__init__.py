"""Scoring methods: pure functions of per-token statistics. Each method is one module here (found by
``METHODS.discover``) with a ``Method`` subclass and its ``Params`` dataclass, the one place its defaults
are written; ``params(name, given)`` checks a method's settings once into that typed form.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cscore.errors import ConfigError
from cscore.registry import suggest
from cscore.scorers.engine.stats import DISTRIBUTIONAL_METHODS
from cscore.scorers.methods.base import AGGREGATION_KEYS, METHODS, Method, MethodParams
from cscore.scorers.methods.params import defaults_of, specs_of

__all__ = ["AGGREGATION_KEYS", "METHODS", "Method", "MethodParams", "get", "params", "score", "token_scores"]

METHODS.discover(__name__)  # every module here: each method module registers its method

NOT_PARAMS = ("name", "variant")  # the Params fields that name the method and its column


def get(name: str) -> type[Method]:
    """The method registered as ``name`` (a one-line ConfigError with a did-you-mean when none is)."""
    return METHODS.get(name)


def aligned_methods() -> list[str]:
    """The methods a cross-family pair computes (their class says ``aligned``), in name order."""
    return [name for name, method in METHODS.items() if method.aligned]


def cross_family_refusal(name: str, method: dict | None = None) -> str | None:
    """Why a cross-family pair cannot run method ``name`` with the settings ``method``, or None."""
    cls = get(name)
    if cls.distributional(method or {}):
        return (f"method {cls.name!r} with these settings reads the distributional statistics "
                f"({DISTRIBUTIONAL_METHODS}), which compare the two models' distributions over one vocabulary, "
                f"and this pair's tokenizers differ (a cross-family pair): use one of {', '.join(aligned_methods())}"
                " (contrast without weight=jsd), or cd_judge with method.decode=values")
    if cls.aligned:
        return None
    if cls.name == "cd_judge" and method is not None:
        decode = method.get("decode") or defaults(name)["decode"]
        if decode == "values":
            return None
        return (f"method.decode={decode} reads the judge's text in one vocabulary, and this pair's tokenizers differ "
                "(a cross-family pair): set method.decode=values (Eq. 1 over the range's values, each value scored "
                "whole by each model on its own prompt)")
    return (f"method {cls.name!r} needs expert and amateur to share a tokenizer; with a cross-family pair "
            f"(units=aligned) use one of {', '.join(aligned_methods())}, or cd_judge with method.decode=values")


def check_aligned(name: str, method: dict | None = None) -> None:
    """A ConfigError unless a cross-family pair can run method ``name`` (``cross_family_refusal``)."""
    why = cross_family_refusal(name, method)
    if why is not None:
        raise ConfigError(why)


def defaults(name: str) -> dict:
    """The method's default parameters, from its ``Params`` dataclass."""
    return {k: v for k, v in defaults_of(get(name).Params).items() if k not in NOT_PARAMS}


def with_defaults(name: str, params: Mapping) -> dict:
    return {**defaults(name), **params}


def check_params(name: str, params: Mapping, prefix: str = "method") -> dict:
    """The params converted to their types; a ConfigError names the first bad key and what it may be."""
    accepted = set(defaults(name))
    for key in params:
        if key not in accepted:
            raise ConfigError(f"method {name!r} has no parameter {prefix}.{key}{suggest(key, accepted)}; "
                              f"it takes {', '.join(sorted(accepted))}")
    specs = specs_of(get(name).Params)
    return {key: specs[key].check(f"{prefix}.{key}", value) if key in specs else value
            for key, value in params.items()}


def params(name: str, given: Mapping, prefix: str | None = None) -> MethodParams:
    """Method ``name``'s settings as its typed ``Params``, checked once (``prefix`` None: API keywords)."""
    method = get(name)
    given = dict(given)
    label = {k: given.pop(k) for k in NOT_PARAMS if k in given}
    if prefix is not None:
        return method.Params(**label, **check_params(name, given, prefix))
    accepted = defaults(name)
    for key in given:  # an unknown key first, as ``has no parameter 'x'``
        if key not in accepted:
            raise ConfigError(f"method {name!r} has no parameter {key!r}; it takes {sorted(accepted)}")
    merged = {**accepted, **given}
    checked = check_params(name, {k: v for k, v in merged.items() if k != "norm"}, prefix=name)
    return method.Params(**label, **{**merged, **checked})


def token_scores(name: str, stats: dict, **given) -> np.ndarray:
    return get(name).token_scores(stats, params(name, given))


def token_method(name: str) -> type[Method]:
    """Method ``name`` when it is a function of the token statistics alone, else a ConfigError."""
    method = get(name)
    if method.kind != "token":  # a trained pooler needs labels; a judge reads other statistics
        raise ConfigError(f"method {name!r} ({method.kind}) is not a function of the token statistics alone: "
                          f"score it with `cscore run method={name}`" + (
                              "; or train one with cscore.scorers.cdm.pooler (cross_validate / train_pooler)"
                              if method.kind == "pooler" else ""))
    return method


def score(name: str, stats: dict, **given) -> np.ndarray:
    """Per-item scores of method ``name`` on ``stats`` ({"expert": TokenStats, ...})."""
    return token_method(name).score(stats, params(name, given))
