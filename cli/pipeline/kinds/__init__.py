"""Method kinds as plugins (``base.MethodKind``, ``base.REGISTRY``): one module per kind, each
registering itself; a method class names its kind with ``kind`` (default "token").

A new kind is one module here (a ``MethodKind`` subclass under ``@REGISTRY.register``), its name
in ``registry``'s import, its method files, configs and tests."""

from __future__ import annotations

from cscore.cli.pipeline.kinds.base import REGISTRY, MethodKind


def registry():
    """The registry with every kind module imported (each registers itself once, on import)."""
    from cscore.cli.pipeline.kinds import baseline, discriminator, judge, judge_released, pooler, token  # noqa: F401

    return REGISTRY


def kind_name(method: str) -> str:
    from cscore.scorers import methods

    return methods.get(method).kind


def of_method(method: str) -> MethodKind:
    """The kind of method ``method`` (a ConfigError for an unknown method)."""
    return registry().get(kind_name(method))


def methods_of(section: str) -> list[str]:
    """The methods whose kind writes ``section`` of metrics.json (e.g. "judge")."""
    from cscore.scorers import methods

    reg = registry()
    return [m for m in methods.METHODS if section in reg.get(kind_name(m)).sections]
