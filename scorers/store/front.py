"""The statistics cache's front index: per token statistics pass, its entry keys and encoded items, found
without torch, so a run whose entries all exist loads no model (``cscore.run.kinds.kept_pass``).
A record's key covers more than the entry keys depend on: a change misses it, never reads another's.
Layout: ``<cache root>/front/<key>.npz`` (token ids) and ``<key>.json`` (written last, with the .npz's SHA-256:
a record is complete or absent)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import logging
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cscore.files import canonical_json, write_atomic
from cscore.scorers.engine.tokenize import EncodedItem
from cscore.scorers.models.identity import files_fingerprint
from cscore.scorers.models.specs import DTYPES
from cscore.scorers.store.cache import FRONT_DIR

log = logging.getLogger(__name__)

FRONT_SCHEMA = 1  # bump when a record's layout or what its key covers changes
LIBRARIES = ("transformers", "tokenizers", "gguf", "jinja2", "torch", "numpy", "pandas")
PACKAGE = Path(__file__).resolve().parents[2]  # cscore's own folder (the repository root)
NOT_CODE = ("tests", "scripts", "docs")  # folders of the package that no run imports
_DEVICE = re.compile(r"^(cpu|cuda|mps)(:\d+)?$")


@lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 over cscore's Python files (paths and contents): any code change misses every record."""
    h = hashlib.sha256(b"cscore-code-v1")
    packages = [d for d in PACKAGE.iterdir() if (d / "__init__.py").is_file() and d.name not in NOT_CODE]
    files = sorted([*PACKAGE.glob("*.py"), *(p for d in packages for p in d.rglob("*.py"))])
    for p in files:
        h.update(canonical_json([str(p.relative_to(PACKAGE)), p.stat().st_size]).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """The installed versions of ``LIBRARIES``, none imported."""
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def folder_fingerprint(folder: str | os.PathLike) -> str | None:
    """SHA-256 over every file (path, size, content) under a model folder; None where it holds no weights."""
    root = Path(folder).expanduser()
    return files_fingerprint(root, sorted(p for p in root.rglob("*") if p.is_file()), b"cscore-folder-v1")


def no_accelerator() -> bool:
    """Linux with no NVIDIA or AMD device node (torch sees no GPU); False where unknown."""
    nodes = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd")
    return os.uname().sysname == "Linux" and not any(os.path.exists(n) for n in nodes)


def device_and_dtype(device: str, dtype: str) -> tuple[str, str] | None:
    """(device type, torch dtype name) as the model loader resolves them, where known without torch; else None."""
    if device == "auto" and no_accelerator():
        device = "cpu"
    if not _DEVICE.match(device):  # auto with an accelerator: which one torch picks is unknown here
        return None
    kind = device.split(":")[0]
    if dtype == "auto":
        return kind, "torch.bfloat16" if kind == "cuda" else "torch.float32"
    return (kind, f"torch.{DTYPES[dtype]}") if dtype in DTYPES else None


def front_key(what: dict) -> str:
    """The record's key: ``what`` (the run's settings, data, models) with the schema, code and library versions."""
    payload = {"schema": FRONT_SCHEMA, "code": code_digest(), "libraries": library_versions(), "what": what}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _pack(items: list[EncodedItem]) -> bytes:
    arrays = {}
    for name in ("prompt_ids", "hyp_ids"):
        seqs = [getattr(it, name) for it in items]
        arrays[name] = np.asarray([t for s in seqs for t in s], dtype="<i8")
        arrays[name + "_lengths"] = np.asarray([len(s) for s in seqs], dtype="<i8")
    out = io.BytesIO()
    np.savez(out, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds as allow_pickle
    return out.getvalue()


def _unpack(data: bytes, prompts: list[str], truncated: list[bool]) -> list[EncodedItem]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        split = {name: np.split(z[name], np.cumsum(z[name + "_lengths"])[:-1]) if len(z[name + "_lengths"]) else []
                 for name in ("prompt_ids", "hyp_ids")}
    if not len(split["prompt_ids"]) == len(split["hyp_ids"]) == len(prompts) == len(truncated):
        raise ValueError("the record's items do not match its prompts")
    return [EncodedItem(p, ids.tolist(), hyp.tolist(), bool(t))
            for p, ids, hyp, t in zip(prompts, split["prompt_ids"], split["hyp_ids"], truncated)]


class FrontIndex:
    """The records under ``<root>/front`` (``root``: the statistics cache's folder)."""

    def __init__(self, root: str | os.PathLike):
        self.folder = Path(root).expanduser() / FRONT_DIR

    def write(self, key: str, items: list[EncodedItem], record: dict[str, Any]) -> None:
        """Store the encoded ``items`` and ``record`` of ``key``; a folder that takes no writes only warns."""
        data = _pack(items)
        body = dict(record, schema=FRONT_SCHEMA, prompts=[it.prompt for it in items],
                    truncated=[it.truncated for it in items], npz_sha256=hashlib.sha256(data).hexdigest())
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self.folder / f"{key}.npz", data)
            write_atomic(self.folder / f"{key}.json", json.dumps(body, default=str))
        except OSError as err:
            log.warning("could not write the cache's front index %s: %s", self.folder, err)

    def read(self, key: str) -> tuple[list[EncodedItem], dict[str, Any]] | None:
        """(the encoded items, the record) of ``key``; None when absent, of another schema or damaged."""
        try:
            body = json.loads((self.folder / f"{key}.json").read_text())
            data = (self.folder / f"{key}.npz").read_bytes()
            if body.get("schema") != FRONT_SCHEMA or hashlib.sha256(data).hexdigest() != body.get("npz_sha256"):
                return None
            return _unpack(data, body["prompts"], body["truncated"]), body
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("the cache's front index record %s is unreadable (%s): the statistics are found "
                        "the full way", key[:12], err)
            return None
