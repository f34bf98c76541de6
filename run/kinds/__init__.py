"""Method kinds as plugins (``base.MethodKind``, ``base.REGISTRY``): one module per kind, each registering
itself; a method class names its kind with ``kind`` (default "token")."""

from __future__ import annotations

from cscore.run.kinds.base import REGISTRY, MethodKind, Registry


def registry() -> Registry:
    """The registry with every kind module imported (on first use)."""
    REGISTRY.discover(__name__)
    return REGISTRY


def kind_name(method: str) -> str:
    from cscore.scorers import methods

    return methods.get(method).kind


def of_method(method: str) -> MethodKind:
    """The kind of method ``method`` (a ConfigError for an unknown method)."""
    return registry().kind(kind_name(method))


def methods_of(section: str) -> list[str]:
    """The methods whose kind writes ``section`` of metrics.json (e.g. "judge")."""
    from cscore.scorers import methods

    reg = registry()
    return [m for m in methods.METHODS if section in reg.get(kind_name(m)).sections]
