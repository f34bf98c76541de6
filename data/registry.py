"""Dataset name -> loader. Each loader returns (validated example table, LoadReport)."""

from __future__ import annotations

from cscore.data import demo

LOADERS = {"demo": demo.load}


def load_examples(name: str, path: str | None = None):
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(LOADERS)}")
    return LOADERS[name](path)
