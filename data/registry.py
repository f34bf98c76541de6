"""Dataset name -> loader. Each loader returns (validated example table, LoadReport) and
rejects options it does not know."""

from __future__ import annotations

from functools import partial

from cscore.data import demo, dialogue, mqm, qags_xsum, summeval, wmt

LOADERS = {
    "demo": demo.load,
    "summeval": summeval.load,
    "qags_xsum": qags_xsum.load,
    "mqm": mqm.load,
    "mqm22": partial(wmt.load, name="mqm22"),
    "mqm23": partial(wmt.load, name="mqm23"),
    "fed": dialogue.load_fed,
    "dstc9": dialogue.load_dstc9,
}


def load_examples(name: str, path: str | None = None, **options):
    if name not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(LOADERS)}")
    options = {k: v for k, v in options.items() if v is not None}
    return LOADERS[name](path, **options)
