"""MkDocs hook: generate reference/config.md from cscore's config schema at every build, so the
site never shows a stale copy. In mkdocs.yml: ``hooks: [docs/hooks/config_reference.py]`` and
``reference/config.md`` in the nav."""

from __future__ import annotations

from pathlib import Path


def on_pre_build(config, **kwargs) -> None:
    from cscore.cli.config_reference import config_reference_markdown

    page = Path(config["docs_dir"]) / "reference" / "config.md"
    text = config_reference_markdown()
    if not page.is_file() or page.read_text() != text:  # unchanged: no write, no rebuild loop under serve
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text)
