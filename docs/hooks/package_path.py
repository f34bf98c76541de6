"""MkDocs hook: lets mkdocstrings find the ``cscore`` package of this checkout.

The repository root is the package itself, so the folder that holds it is named after the clone,
not ``cscore``, and an editable install maps the name through a setuptools finder that griffe
does not read. A temporary folder with one link, ``cscore`` -> the repository root, gives griffe a
search path for this checkout's sources (never another installed copy)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
_made: list[Path] = []


@event_priority(100)  # before mkdocstrings' on_config, which creates the handler
def on_config(config):
    folder = Path(tempfile.mkdtemp(prefix="cscore-docs-"))
    (folder / "cscore").symlink_to(ROOT, target_is_directory=True)
    _made.append(folder)
    python = config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})
    python["paths"] = [str(folder)]
    return config


def on_shutdown():
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)
