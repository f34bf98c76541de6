"""GGUF model files (``gguf:<packaged name>`` or ``gguf:/path/x.gguf``), converted once by transformers
and cached under ``$CSCORE_CACHE/models/``, one conversion per transformers major version."""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
from pathlib import Path

from cscore.files import atomic_file, cache_root, file_lock, writing
from cscore.scorers.models.gguf_tokenizer import build_gemma3_tokenizer
from cscore.scorers.models.identity import file_digest
from cscore.scorers.models.specs import (  # noqa: F401 (GGUF_MAGIC: re-exported)
    GGUF_MAGIC,
    PACKAGED_GGUF,
    ModelSpecError,
    check_gguf_file,
    names_a_path,
    packaged_files,
)

log = logging.getLogger(__name__)


CONVERSION_VERSION = 3  # bump when the conversion code changes what it writes: old caches are not reused
TRANSFORMERS_VERSION = importlib.metadata.version("transformers")  # from metadata: transformers is not imported
TRANSFORMERS_MAJOR = int(TRANSFORMERS_VERSION.split(".")[0])
CACHE_HINT = "set CSCORE_CACHE to a writable folder with room (converted models are cached there)"


def join_parts(parts: list[Path], target: Path, sha256: str, hint: str) -> Path:
    """Concatenate ``parts`` into ``target`` once, renamed into place only once its SHA-256 matched."""
    if target.is_file():
        return target
    with writing(f"the joined {target.name}", target.parent, CACHE_HINT), \
            file_lock(target.with_name(target.name + ".lock")):
        if target.is_file():
            return target
        log.info("joining %d parts into %s", len(parts), target)
        digest = hashlib.sha256()
        with atomic_file(target, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
            if digest.hexdigest() != sha256:  # before the rename: a bad join never appears
                raise ModelSpecError(f"the parts joined into {target.name} have SHA-256 {digest.hexdigest()}, "
                                     f"expected {sha256}; reinstall: {hint}")
    return target


# transformers 4.x builds the Gemma 3 GGUF tokenizer wrongly: ours is built from the metadata, under every version
OWN_TOKENIZER = ("gemma3", "gemma3_text")


def conversion_dir(gguf_path: Path) -> Path:
    """Where the conversion of ``gguf_path`` is cached (its SHA-256, ``CONVERSION_VERSION``, transformers major)."""
    digest = file_digest(gguf_path)[:16]
    return cache_root() / "models" / f"{gguf_path.stem}-{digest}-c{CONVERSION_VERSION}-tf{TRANSFORMERS_MAJOR}"


IDLE_MB_S, BUSY_MB_S = 6.0, 0.8  # MB of GGUF file converted a second on a 2-core CPU: idle, busy (docs/benchmarks.md)


def conversion_notice(name: str, size: int, target: Path) -> str:
    """The line said before a one-time conversion starts: what runs, and about how long it takes."""
    mb = size / 1e6
    return (f"converting {name} to a transformers checkpoint, once (first use of this file with transformers "
            f"{TRANSFORMERS_MAJOR}): {mb:.0f} MB, about {mb / IDLE_MB_S:.0f} s on an idle 2-core CPU, up to "
            f"{mb / BUSY_MB_S:.0f} s on a busy one; cached at {target}")


def converted_gguf_dir(gguf_path: Path) -> Path:
    """Convert a GGUF file to a regular checkpoint once (atomic and locked); later calls reuse it."""
    target = conversion_dir(gguf_path)
    if (target / "COMPLETE").exists():
        return target
    with writing(f"the converted model of {gguf_path.name}", target.parent, CACHE_HINT), \
            file_lock(target.with_name(target.name + ".lock")):
        if (target / "COMPLETE").exists():
            return target
        log.warning(conversion_notice(gguf_path.name, gguf_path.stat().st_size, target))
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            convert_gguf(gguf_path, tmp)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def convert_gguf(gguf_path: Path, out: Path) -> None:
    """Write model + tokenizer of ``gguf_path`` as a regular checkpoint into ``out``, a plain float32 model."""
    import torch
    import transformers

    options = {"dtype": torch.float32}
    gguf_config = getattr(transformers, "GgufConfig", None)  # 5.x only: it must be told to dequantize
    if gguf_config is not None:
        options["quantization_config"] = gguf_config(dequantize=True)
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                                  **options)
        tok = gguf_tokenizer(gguf_path, model.config)
    except Exception as err:  # a damaged file, an architecture transformers lacks, ...: name the file
        raise ModelSpecError(f"transformers {TRANSFORMERS_VERSION} cannot convert {gguf_path}: "
                             f"{one_line(err)}") from err
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "COMPLETE").write_text(f"{gguf_path}\ntransformers {TRANSFORMERS_VERSION}\n")


def gguf_tokenizer(gguf_path: Path, config):
    """The tokenizer in a GGUF file's metadata (Gemma 3: cscore's own reading of it), its eos / pad ids the
    model config's (transformers 4.x reads some GGUF ones wrongly)."""
    from transformers import AutoTokenizer

    if config.model_type in OWN_TOKENIZER:
        tok = build_gemma3_tokenizer(gguf_path)
    else:
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    for attr in ("eos", "pad"):
        token_id = getattr(config, f"{attr}_token_id", None)
        if isinstance(token_id, int) and 0 <= token_id < len(tok) and getattr(tok, f"{attr}_token_id") != token_id:
            setattr(tok, f"{attr}_token", tok.convert_ids_to_tokens(token_id))
    return tok


def one_line(err: BaseException) -> str:
    """An exception's message on one line (its type where it has none)."""
    return " ".join(str(err).split()) or type(err).__name__


def gguf_path(spec: str) -> Path:
    """The GGUF file a ``gguf:`` spec names, checked to be one."""
    rest = spec[len("gguf:"):]
    if names_a_path(rest):
        path = Path(rest).expanduser()
    else:  # shipped in PyPI wheels, found through package metadata; a split file's parts joined once
        files, entry = packaged_files(rest), PACKAGED_GGUF[rest]
        path = files[0]
        if entry.parts:
            assert entry.sha256 is not None, f"PACKAGED_GGUF[{rest!r}]: a split file names its digest"
            path = join_parts(files, cache_root() / "gguf" / entry.sha256[:16] / entry.file,
                              entry.sha256, entry.hint)
    check_gguf_file(path, spec)
    return path


def load_tokenizer(spec: str):
    """The tokenizer of a ``gguf:`` spec without converting the weights."""
    from transformers import AutoConfig, AutoTokenizer

    path = gguf_path(spec)
    target = conversion_dir(path)
    if (target / "COMPLETE").exists():
        return AutoTokenizer.from_pretrained(target)
    try:
        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
        return gguf_tokenizer(path, config)
    except Exception as err:  # as in convert_gguf: name the file
        raise ModelSpecError(f"transformers {TRANSFORMERS_VERSION} cannot read the tokenizer of {path}: "
                             f"{one_line(err)}") from err


def cached_tokenizer_file(spec: str) -> Path | None:
    """The ``tokenizer.json`` of a ``gguf:`` spec's cached conversion (None: not converted yet)."""
    target = conversion_dir(gguf_path(spec))
    file = target / "tokenizer.json"
    return file if (target / "COMPLETE").exists() and file.is_file() else None


def resolve_path(spec: str) -> tuple[str, str | None]:
    """Turn a model spec into (from_pretrained path, fingerprint or None)."""
    if not spec.startswith("gguf:"):
        return spec, None
    target = converted_gguf_dir(gguf_path(spec))
    return str(target), target.name
