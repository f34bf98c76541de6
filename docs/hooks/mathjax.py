"""MkDocs hook: ship MathJax with the site, so that equations render offline (no CDN). The files
come from the PyPI package django-static-mathjax (MathJax 3, import name ``mathjax``; plain files,
no Django needed, in the docs extra): its ES5 bundle ``tex-chtml.js``, the CHTML fonts and the TeX
extensions it loads on demand are copied to ``assets/mathjax/`` of the built site. mkdocs.yml
loads ``assets/mathjax-config.js`` (which math to typeset: pymdownx.arithmatex's) before it.
Without the package the pages keep the TeX source of each equation, and the build says so."""

from __future__ import annotations

import logging
import shutil
from importlib import resources
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.mathjax")
TARGET = "assets/mathjax"
PARTS = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y", "sre")


def mathjax_dir() -> Path | None:
    """The ES5 build of the installed MathJax package, or None."""
    try:
        folder = Path(str(resources.files("mathjax"))) / "static" / "mathjax" / "es5"
    except ModuleNotFoundError:
        return None
    return folder if (folder / "tex-chtml.js").is_file() else None


def on_post_build(config, **kwargs) -> None:
    source = mathjax_dir()
    if source is None:
        log.info("MathJax not installed (pip install django-static-mathjax, in the docs extra): equations stay TeX")
        return
    target = Path(config["site_dir"]) / TARGET
    for part in PARTS:
        src = source / part
        if src.is_dir():
            shutil.copytree(src, target / part, dirs_exist_ok=True)
        elif src.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / part)
