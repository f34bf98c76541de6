"""Dataset name -> loader. Each loader returns (validated example table, LoadReport) and
rejects options it does not know."""

from __future__ import annotations

from cscore.data import demo, qags_xsum, summeval

LOADERS = {"demo": demo.load, "summeval": summeval.load, "qags_xsum": qags_xsum.load}


def load_examples(name: str, path: str | None = None, **options):
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(LOADERS)}")
    options = {k: v for k, v in options.items() if v is not None}
    return LOADERS[name](path, **options)
