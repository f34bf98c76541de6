"""Method kinds as plugins (``base.MethodKind``, ``base.REGISTRY``): one module per kind, each registering
itself; a method class names its kind with ``kind`` (default "token")."""

from __future__ import annotations

from cscore.run.kinds.base import REGISTRY, MethodKind, Registry


def registry() -> Registry:
    """The registry with every kind module imported (on first use)."""
    REGISTRY.discover(__name__)
    return REGISTRY


def of_method(method: str) -> MethodKind:
    """The kind of method ``method`` (a ConfigError for an unknown method)."""
    from cscore.scorers import methods

    return registry().kind(methods.get(method).kind)


def methods_of(section: str) -> list[str]:
    """The methods whose kind writes ``section`` of metrics.json (e.g. "judge")."""
    from cscore.scorers import methods

    return [name for name, m in methods.METHODS.items() if section in registry().get(m.kind).sections]
