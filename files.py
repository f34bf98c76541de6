"""File helpers for the whole package (torch-free): the cache root, the one atomic writer, the one
file lock, canonical JSON, digests and sizes."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np


def cache_root() -> Path:
    """cscore's cache folder: $CSCORE_CACHE, else ~/.cache/cscore (models, stats, fingerprints)."""
    return Path(os.environ.get("CSCORE_CACHE", Path.home() / ".cache" / "cscore")).expanduser()


# the errnos that say a place cannot be written (the user's to fix, not a bug)
CANNOT_WRITE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                errno.EEXIST, errno.EISDIR)
_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how Rust extensions (safetensors, tokenizers) report one


def nearest(folder: Path) -> Path:
    """``folder`` if it exists, else the nearest folder above it that does (else the root)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def folder_problem(folder: str | os.PathLike) -> str | None:
    """Why nothing can be written at ``folder`` (a file in its place, read-only, not permitted), or None."""
    folder = Path(folder).expanduser()
    ancestor = nearest(folder)
    if not ancestor.is_dir():
        return f"{ancestor} is a file, not a folder"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        what = "write in" if ancestor == folder else "make a folder in"
        return f"cannot {what} {ancestor} (read-only or not permitted)"
    return None


@contextmanager
def writing(what: str, where: str | os.PathLike, hint: str = ""):
    """A failure to write ``what`` to ``where`` as a one-line StorageError
    (``cannot write <what> to <where>: <reason>[; <hint>]``)."""
    from cscore.errors import CscoreError, StorageError

    try:
        yield
    except Exception as err:
        if isinstance(err, OSError):
            code = err.errno
        else:  # an extension's error naming one
            found = _OS_ERROR.search(str(err))
            code = int(found.group(1)) if found else None
        if code is None or code not in CANNOT_WRITE or isinstance(err, CscoreError):  # a user error says so already
            raise
        blocked = nearest(Path(where))
        reason = os.strerror(code)
        if code in (errno.ENOTDIR, errno.EEXIST) and blocked.exists() and not blocked.is_dir():
            reason = f"{blocked} is a file, not a folder"
        raise StorageError(f"cannot write {what} to {where}: {reason}{'; ' + hint if hint else ''}") from err


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w"):
    """Write ``path`` through a temp file beside it: fsynced and renamed onto it on success, removed on an error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, unlike mkstemp
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    with suppress(OSError):
        os.fsync(fd)
    os.close(fd)


@contextmanager
def file_lock(path: Path):
    """Exclusive fcntl lock on the file ``path``, removed again on release (no stray lock files)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(path, "a")
        fcntl.flock(fh, fcntl.LOCK_EX)
        if is_same_file(fh, path):
            break
        fh.close()
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # still locked: no one else holds this file
        fh.close()  # releases the lock


def held(path: Path) -> bool:
    """Whether someone holds the lock file ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def drop_stale_lock(path: Path) -> None:
    """Remove the lock file ``path`` left by a holder that crashed, unless someone holds it now."""
    if not path.exists():
        return
    with suppress(OSError), open(path, "a") as fh:  # held (or gone): leave it
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if is_same_file(fh, path):
            path.unlink()


def is_same_file(fh, path: Path) -> bool:
    """Whether the open file ``fh`` is still the file at ``path``."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fh.fileno())
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def json_default(obj: Any):
    """JSON for the values cache keys and metadata hold beyond plain JSON data."""
    if isinstance(obj, (np.generic, np.ndarray)):  # a scalar's tolist() is its item()
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path) or (type(obj).__module__ == "torch" and type(obj).__name__ in ("dtype", "device")):
        return str(obj)
    raise TypeError(f"cache key parts must be JSON data, got {type(obj).__name__}: {obj!r}")


def canonical_json(obj: Any) -> str:
    """One text per value: sorted keys, no spaces, ASCII, no NaN (for hashing)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False,
                      default=json_default)


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    """SHA-256 of a file's content, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def disk_size(path: Path) -> int:
    """Bytes in a file, or in every file under a folder (links not followed; 0 if gone)."""
    try:
        if not path.is_dir():
            return path.lstat().st_size
    except OSError:
        return 0
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
