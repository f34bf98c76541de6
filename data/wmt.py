"""MQM22 / MQM23: several language pairs of WMT MQM files, found by their published names and
scored by ``cscore.data.mqm``; docs/datasets.md (MQM files)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from cscore.data import mqm
from cscore.data.loader import LOADERS, Loader, option
from cscore.data.paths import ENV_VAR, shared_data_dir
from cscore.data.schema import DataError


@dataclass
class Where:
    pairs: list | None = option(doc="MQM: the language pairs read")
    files: dict | None = option(doc="MQM: {pair: file name} under root")
    root: str | None = option(doc="MQM: the folder of the per-pair files (default: the shared mqm/ folder)")
    paths: dict | None = option(doc="MQM: per-pair file override")


@dataclass
class WmtOptions(mqm.MqmScoring, Where):
    """Where the files are, then mqm's scoring options (each file's language pair is its key)."""


def find(candidates: list[str], root: Path | None) -> tuple[Path | None, list[str]]:
    """The first candidate file (a .tsv also as .gz or .tar.gz) under ``root``, and the paths looked at."""
    looked = []
    for cand in candidates:
        for name in [cand, cand + ".gz", cand + ".tar.gz"] if cand.endswith(".tsv") else [cand]:
            p = Path(name) if Path(name).is_absolute() or root is None else root / name
            looked.append(str(p))
            if p.is_file():
                return p, looked
    return None, looked


def _strings(value, what: str, name: str) -> list[str]:
    """A string or a list of strings, as a list; a DataError naming the setting otherwise."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise DataError(f"{name}: {what} must be a list of non-empty strings, got {value!r}")
    return list(value)


def _mapping(value, what: str, name: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DataError(f"{name}: {what} must be a mapping of language pair (xx-yy) to file name(s), got {value!r}")
    return value


def checked(opts: Where, name: str) -> tuple[list[str], dict, dict, str | None]:
    """pairs, files, paths and root, type-checked (settings come from the command line)."""
    files = {k: _strings(v, f"data.files.{k}", name) for k, v in _mapping(opts.files, "data.files", name).items()}
    pairs = _strings(opts.pairs, "data.pairs", name) if opts.pairs is not None else list(files)
    if not pairs:
        raise DataError(f"{name}: no language pair selected (data.pairs=[xx-yy] with data.files or data.paths)")
    paths = {k: v for k, v in _mapping(opts.paths, "data.paths", name).items() if v is not None}
    for k, v in paths.items():
        if not (isinstance(v, str) and v):
            raise DataError(f"{name}: data.paths.{k} must be one file path, got {v!r}")
    root = opts.root
    if root is not None and not (isinstance(root, str) and root):
        raise DataError(f"{name}: data.root must be a folder path, got {root!r}")
    return pairs, files, paths, root


SHOWN = 3  # paths named in a missing-file message; the rest are counted


def missing_message(name: str, missing: list[str], found: list[str], looked: list[str], base: Path | None) -> str:
    """What to set first, then a few of the places looked at."""
    if found:
        fix = (f"score the pairs found with 'data.pairs=[{','.join(found)}]', or point each missing pair at its "
               "file with data.paths.<xx-yy>=<file>")
    else:
        fix = ("point each pair at its file with data.paths.<xx-yy>=<file>, or data.root=<folder> at a folder "
               "holding them")
    if base is None:
        fix += f" (no shared data folder was found: {ENV_VAR} or data.root sets one)"
    more = f" (+{len(looked) - SHOWN} more)" if len(looked) > SHOWN else ""
    return (f"{name}: missing MQM file(s) for {', '.join(missing)}: {fix}. Looked for "
            f"{', '.join(looked[:SHOWN])}{more}")


def load(path: str | None = None, options: WmtOptions | None = None, *, name: str = "mqm"):
    opts = options or WmtOptions()
    pairs, files, paths, root = checked(opts, name)
    if path is not None and not (isinstance(path, str) and path):
        raise DataError(f"{name}: data.path must be a file path, got {path!r}")
    unknown = [p for p in pairs if p not in files and p not in paths]
    if unknown:
        raise DataError(f"{name}: no file names configured for language pair(s) {unknown} in data.pairs; "
                        f"known: {sorted(files)}; add one with data.paths.<xx-yy>=<file>")
    if path is not None:
        if len(pairs) != 1:
            raise DataError(f"{name}: data.path names one file but {len(pairs)} language pairs are selected "
                            f"({pairs}); use data.pairs=[xx-yy] or data.paths.<xx-yy>=<file>")
        paths[pairs[0]] = path
    shared = shared_data_dir()
    base = Path(root) if root else (shared / "mqm" if shared else None)
    found: dict[str, tuple[Path | None, list[str]]] = {}  # lp -> (its file or None, the paths looked at)
    for lp in pairs:
        if lp in paths:
            given = Path(paths[lp])
            found[lp] = (given if given.is_file() else None), [f"{given} (data.paths.{lp})"]
        else:
            found[lp] = find(files[lp], base)
    missing = [lp for lp in pairs if found[lp][0] is None]
    if missing:
        looked = [p for lp in missing for p in found[lp][1]]
        raise DataError(missing_message(name, missing, [lp for lp in pairs if lp not in missing], looked, base))
    return mqm.load_many({lp: str(found[lp][0]) for lp in pairs}, name, opts)  # opts: an MqmScoring too


@LOADERS
class Mqm22(Loader):
    """WMT22's MQM (the same loader as mqm23; the name is for messages and reports)."""
    name = "mqm22"
    task = "translation"
    builds_on = ("mqm",)  # the MQM reader
    Options = WmtOptions
    load = staticmethod(partial(load, name="mqm22"))


@LOADERS
class Mqm23(Mqm22):
    name = "mqm23"
    load = staticmethod(partial(load, name="mqm23"))
