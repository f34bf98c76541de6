"""MkDocs hook: generate benchmarks.md from docs/measured/figures.yaml at every build (the record is
the one place measured figures are written; scripts/benchmarks_page.py renders it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "benchmarks_page.py"


def on_pre_build(config, **kwargs) -> None:
    spec = importlib.util.spec_from_file_location("benchmarks_page", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs = Path(config["docs_dir"])
    text = module.page_text(docs / "measured" / "figures.yaml")
    page = docs / "benchmarks.md"
    if not page.is_file() or page.read_text() != text:  # unchanged: no write, no rebuild loop under serve
        page.write_text(text)
