"""``cscore list [datasets|pairs|methods|baselines]``: what this installation offers, one line each
(name, description, whether it works here offline), read from ``cscore/conf``; nothing is loaded."""

from __future__ import annotations

import os
import re
from itertools import takewhile
from pathlib import Path

import yaml

from cscore.cli.compose import conf_folder
from cscore.cli.exits import one_line_errors
from cscore.cli.names import short_name
from cscore.errors import ConfigError

GROUPS = {"datasets": "data", "pairs": "pair", "methods": "method", "baselines": "baseline"}
USAGE = "usage: cscore list [datasets|pairs|methods|baselines]   (all four when none is named)"


def presets(group: str) -> dict[str, str]:
    """{name: the file's text} of every config of ``group``, by name."""
    files = sorted((conf_folder() / group).glob("*.yaml"))  # read, not imported (no schema registered)
    return {p.stem: p.read_text(encoding="utf-8") for p in files}


WIDE = 90  # a description longer than this is cut (with "...")
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(?:\s+(?=[A-Z])|$)")


def first_comment(text: str) -> str:
    """The first sentence of the config file's leading comment (not ``# @package``), cut to ``WIDE`` characters."""
    lines = takewhile(lambda line: line.startswith("#"), (line.strip() for line in text.splitlines()))
    about = " ".join(line.lstrip("#").strip() for line in lines if not line.startswith("# @package"))
    end = SENTENCE_END.search(about)
    about = about[:end.start() + 1] if end else about
    return about if len(about) <= WIDE else about[:WIDE - 3].rstrip() + "..."


# ----- is it here? -----

def dataset_status(name: str, cfg: dict) -> str:
    from cscore.data import dstc9, fed, mqm, paths, qags_cnndm, qags_xsum, summeval
    from cscore.data.schema import DataError

    files = {"summeval": ("summeval", summeval.DEFAULT_FILE), "qags_xsum": ("qags_xsum", qags_xsum.DEFAULT_FILE),
             "qags_cnndm": ("qags_cnndm", qags_cnndm.DEFAULT_FILE), "fed": (fed.DATASET_DIR, fed.DEFAULT_FILE),
             "dstc9": (dstc9.DATASET_DIR, dstc9.DEFAULT_FILE),
             "mqm": (f"{mqm.DATASET_DIR}/{mqm.DEFAULT_DIR}", mqm.DEFAULT_FILE)}
    if name == "demo":
        return "shipped"
    if name in files:
        try:
            paths.default_file(*files[name])
        except DataError:
            return "no file here: data.path=<file>"
        return "file here"
    if isinstance(cfg.get("pairs"), list) and isinstance(cfg.get("files"), dict):
        return pairs_found(cfg)
    return "your file: data.path=<file>"


def pairs_found(cfg: dict) -> str:
    """Which language pairs of an MQM set have a file under data.root (default: the shared mqm/)."""
    from cscore.data import wmt
    from cscore.data.paths import shared_data_dir

    shared = shared_data_dir()
    base = Path(cfg["root"]) if cfg.get("root") else (shared / "mqm" if shared else None)
    here = [lp for lp in cfg["pairs"] if wmt.find(list(cfg["files"].get(lp) or []), base)[0] is not None]
    missing = [lp for lp in cfg["pairs"] if lp not in here]
    if not missing:
        return "files here"
    if not here:
        return "no file here: data.root=<folder>"
    return f"here: {', '.join(here)}; not here: {', '.join(missing)} (data.pairs=[{','.join(here)}])"


def model_need(spec: str, revision) -> str | None:
    """None when ``spec`` loads here without a network; else what it needs, in words."""
    from cscore.scorers.models import hub, specs

    try:
        kind = specs.check_spec(spec)
    except specs.ModelSpecError as err:
        packaged = specs.PACKAGED_GGUF.get(spec.removeprefix("gguf:"))
        return f"needs {packaged.hint}" if packaged else str(err).removeprefix(f"model {spec!r}: ")
    if kind == "hub":
        return None if hub.in_cache(spec, revision) else "needs the hub (not in the local hub cache)"
    return None if kind == "gguf" or os.path.exists(os.path.expanduser(spec)) else "not here"


def pair_line(cfg: dict) -> tuple[str, str]:
    """(the models, offline or not) of a pair config."""
    expert, amateur = cfg["expert"], cfg.get("amateur") or {}
    second = short_name(amateur["path"]) if amateur.get("path") else f"its early exit ({amateur.get('early_exit')})"
    wanted = [expert, amateur] if amateur.get("path") else [expert]
    needs = list(dict.fromkeys(n for m in wanted if (n := model_need(str(m["path"]), m.get("revision")))))
    return f"{short_name(expert['path'])} + {second}", "; ".join(needs) or "runs offline"


# ----- output -----

def section(what: str) -> list[str]:
    """The lines of one kind: its configs' name, description and status."""
    found = []
    for name, text in presets(GROUPS[what]).items():
        cfg = yaml.safe_load(text) or {}
        about, status = first_comment(text), ""
        if what == "datasets":
            status = dataset_status(name, cfg)
        elif what == "pairs":
            about, status = pair_line(cfg)
        found.append((name, about, status))
    width = max(len(n) for n, _, _ in found)
    head = f"{what} ({GROUPS[what]}=<name>):"
    return [head] + [f"  {n:<{width}}  {about}" + (f"  [{status}]" if status else "") for n, about, status in found]


def main(argv: list[str]) -> None:
    with one_line_errors(code=2):
        if any(a in ("-h", "--help") for a in argv):
            print(USAGE)
            return
        unknown = [a for a in argv if a not in GROUPS]
        if unknown or len(argv) > 1:
            raise ConfigError(f"cscore list: {'unknown kind ' + repr(unknown[0]) if unknown else 'one kind at a time'}"
                              f"; {USAGE.removeprefix('usage: ')}")
        print("\n\n".join("\n".join(section(what)) for what in argv or GROUPS))
