"""What identifies a model's weights for the statistics cache key: a hub commit, a fingerprint of its
weight files, or a digest of its tensors."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from cscore.files import cache_root, canonical_json, sha256_file, write_atomic

if TYPE_CHECKING:
    from cscore.scorers.models.loaded import LoadedModel

log = logging.getLogger(__name__)

FINGERPRINT_SCHEMA = 1
# files whose content changes the logits (not the tokenizer's: the token ids are in the key)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".msgpack", ".h5")
CONFIG_FILES = ("config.json",)
KINDS = ("hub", "files", "state_dict")


def file_digest(path: str | os.PathLike, index_dir: Path | None = None) -> str:
    """SHA-256 of a file's content, memoised in ``index_dir`` (default: the cache's fingerprints/)."""
    real = Path(os.path.realpath(path))
    st = real.stat()
    stamp = {"path": str(real), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino,
             "ctime_ns": st.st_ctime_ns, "schema": FINGERPRINT_SCHEMA}
    index_dir = Path(index_dir) if index_dir is not None else cache_root() / "fingerprints"
    sidecar = index_dir / (hashlib.sha256(str(real).encode()).hexdigest()[:32] + ".json")
    try:
        memo = json.loads(sidecar.read_text())
        if {k: memo.get(k) for k in stamp} == stamp and isinstance(memo.get("sha256"), str):
            return memo["sha256"]
    except (OSError, ValueError):
        pass
    digest = sha256_file(real)
    try:
        write_atomic(sidecar, json.dumps(dict(stamp, sha256=digest)))
    except OSError as err:  # a read-only cache only costs the memo
        log.warning("could not write the fingerprint index %s: %s", sidecar, err)
    return digest


def weight_files(directory: str | os.PathLike) -> list[Path]:
    d = Path(directory).expanduser()
    return sorted(p for p in d.iterdir()
                  if p.is_file() and (p.name.endswith(WEIGHT_SUFFIXES) or p.name in CONFIG_FILES))


def files_fingerprint(root: Path, files: list[Path], tag: bytes, index_dir: Path | None = None) -> str | None:
    """SHA-256 from ``tag`` over ``files`` (path under ``root``, size, content); None without a weight file."""
    if not any(p.name.endswith(WEIGHT_SUFFIXES) for p in files):
        return None
    h = hashlib.sha256(tag)
    for p in files:
        h.update(canonical_json([str(p.relative_to(root)), p.stat().st_size, file_digest(p, index_dir)]).encode())
    return h.hexdigest()


def state_dict_fingerprint(model) -> str:
    """SHA-256 over every tensor of ``model.state_dict()``, for in-memory models without files."""
    import torch

    h = hashlib.sha256(b"cscore-state-dict-v1")
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        raw = t.view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)
        h.update(canonical_json([name, str(t.dtype), list(tensor.shape), int(raw.size)]).encode())
        h.update(raw.data)
    return h.hexdigest()


def model_identity(lm: LoadedModel, index_dir: Path | None = None) -> dict:
    """What identifies ``lm``'s weights as JSON data: its kind (hub: ``config._commit_hash``, files, state_dict),
    the kind's fields, ``class`` and ``early_exit``."""
    if lm.parent is not None:
        return {**model_identity(lm.parent, index_dir), "early_exit": lm.exit_layer}
    info = lm.info or {}
    config = lm.config if lm.config is not None else getattr(lm.model, "config", None)
    cls = info.get("class") or type(lm.model).__name__  # known before the weights load (models.model_class)
    ident: dict[str, Any] = {"class": cls, "early_exit": info.get("early_exit")}
    path = info.get("path") or info.get("spec")
    if path and os.path.isdir(os.path.expanduser(str(path))):
        root = Path(os.path.expanduser(str(path)))  # its weight files and config.json
        fingerprint = files_fingerprint(root, weight_files(root), b"cscore-weights-v1", index_dir)
        if fingerprint is not None:
            return {"kind": "files", "fingerprint": fingerprint, **ident}
        log.warning("no weight files in %s: identifying the model by its tensors", path)
    elif path:
        commit = getattr(config, "_commit_hash", None) or info.get("commit")
        if commit:
            return {"kind": "hub", "id": str(path), "revision": info.get("revision"), "commit": commit, **ident}
        log.warning("model %s has no commit hash: identifying it by its tensors", path)
    return {"kind": "state_dict", "sha256": state_dict_fingerprint(lm.model), **ident}


def identity_label(ident: Mapping) -> str:
    """A short name for an identity: ``org/name@revision`` or ``Class#digest``, ``[:k]`` for an early exit."""
    kind = ident.get("kind")
    if kind == "hub":
        label = str(ident.get("id"))
        if ident.get("revision"):
            label += f"@{ident['revision']}"
    else:
        label = f"{ident.get('class')}#{str(ident.get('fingerprint' if kind == 'files' else 'sha256'))[:8]}"
    if ident.get("early_exit") is not None:
        label += f"[:{ident['early_exit']}]"
    return label


def find_identities(obj: Any) -> list[dict]:
    """Every model identity inside ``obj`` (e.g. a cache entry's key parts)."""
    if isinstance(obj, dict):
        if obj.get("kind") in KINDS and "class" in obj:
            return [obj]
        return [i for v in obj.values() for i in find_identities(v)]
    if isinstance(obj, list):
        return [i for v in obj for i in find_identities(v)]
    return []
