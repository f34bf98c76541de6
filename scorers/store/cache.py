"""Content-addressed on-disk store of per-token statistics and other payloads: ``<root>/<key>/stats.npz``
and ``meta.json``, published by renaming a temp directory and verified on every load. No torch."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import struct
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, NamedTuple, Protocol

import numpy as np

from cscore.errors import CacheEntryError, CacheError
from cscore.files import (
    atomic_file,
    cache_root,
    canonical_json,
    disk_size,
    drop_stale_lock,
    file_lock,
    fsync_dir,
    json_default,
    sha256_file,
    write_atomic,
)
from cscore.scorers.engine.stats import FORMAT_VERSION
from cscore.scorers.store.checkpoint import CHECKPOINT_SECONDS, LOCK_DIR, PARTIAL_DIR, Checkpoint, remove_folder

log = logging.getLogger(__name__)

CACHE_SCHEMA = 2  # bump when the entry layout (stats.npz / meta.json) or the key recipe changes (2: meta_sha256)
STALE_TMP_SECONDS = 3600  # temp dirs older than this are leftovers of a crashed writer
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)  # a cache folder this process cannot write
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk or quota, a file-size limit
BLOCKED = (errno.ENOTDIR, errno.EEXIST)  # the cache folder, or a folder above it, is a file
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
FRONT_DIR = "front"  # the front index (``front``): a record per token pass, pointing at its entries


class Payload(Protocol):
    """What an entry keeps per head, as named arrays. ``ENTRY_KIND`` is meta.json's ``kind`` (None: token
    statistics); ``ENTRY_FORMAT`` the (meta.json field, version) a reader checks."""

    ENTRY_KIND: ClassVar[str | None]
    ENTRY_FORMAT: ClassVar[tuple[str, int] | None]
    ARRAY_NAMES: ClassVar[tuple[str, ...]]

    @property
    def n_items(self) -> int: ...

    def to_arrays(self) -> dict[str, np.ndarray]: ...

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Any: ...

    def entry_figures(self) -> dict: ...


class Entry(NamedTuple):
    stats: dict[str, Any]  # head -> payload
    meta: dict  # meta.json: key parts, extra, shapes, created time


def default_root() -> Path:
    """$CSCORE_STATS_CACHE, else $CSCORE_CACHE/stats, else ~/.cache/cscore/stats."""
    if os.environ.get("CSCORE_STATS_CACHE"):
        return Path(os.environ["CSCORE_STATS_CACHE"]).expanduser()
    return cache_root() / "stats"


def _normalise(parts: Mapping) -> dict:
    parts = dict(parts)
    if "temperatures" in parts:  # 1 and 1.0 are one temperature
        parts["temperatures"] = [float(t) for t in parts["temperatures"]]
    return parts


def stats_key(parts: Mapping) -> str:
    """SHA-256 (hex) of ``parts`` (everything that changes the statistics) as canonical JSON (temperatures as
    floats), FORMAT_VERSION and CACHE_SCHEMA."""
    payload = {"parts": _normalise(parts), "format_version": FORMAT_VERSION, "cache_schema": CACHE_SCHEMA}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def ids_digest(items: Iterable) -> str:
    """SHA-256 over every (prompt_ids, hyp_ids) pair scored, with lengths."""
    h = hashlib.sha256(b"cscore-ids-v1")
    n = 0
    for n, (prompt, hyp) in enumerate(items, 1):
        p, y = np.asarray(prompt, dtype="<i8"), np.asarray(hyp, dtype="<i8")
        h.update(struct.pack("<qq", p.size, y.size))
        h.update(p.tobytes())
        h.update(y.tobytes())
    h.update(struct.pack("<q", n))
    return h.hexdigest()


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise ValueError(f"a cache key is 64 lowercase hex characters (stats_key), got {key!r}")
    return key


class StatsCache:
    """Directory of verified entries (a payload per head), one per key."""

    def __init__(self, root: str | os.PathLike | None = None, checkpoint_seconds: float | None = CHECKPOINT_SECONDS,
                 about: Mapping | None = None):
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.about = dict(about or {})  # meta.json's ``about`` (what the writing run scored); in no key
        self.checkpoint_seconds = checkpoint_seconds  # None: no checkpoints
        self.unusable: str | None = None  # why nothing can be written here (found by ``lock``)

    def path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def _lock_path(self, key: str) -> Path:
        return self.root / LOCK_DIR / f"{_check_key(key)}.lock"

    @contextmanager
    def lock(self, key: str):
        """Exclusive fcntl lock for ``key`` (across processes and threads); a folder this process cannot
        write is read without one (its entries appear complete or not at all)."""
        with ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self._lock_path(key)))
            except OSError as err:
                if err.errno not in READ_ONLY + BLOCKED:
                    raise
                self._cannot_write(err)
            yield

    def _cannot_write(self, err: OSError) -> None:
        """One warning per cache; the run goes on."""
        if self.unusable is not None:
            return
        self.unusable = err.strerror or str(err)
        if err.errno in BLOCKED:
            file = next((p for p in (self.root, *self.root.parents) if p.exists() and not p.is_dir()), err.filename)
            log.warning("statistics cache %s cannot be a folder: %s is a file; statistics are neither read nor "
                        "stored", self.root, file)
        else:
            log.warning("statistics cache %s is not writable (%s): reading it without a lock", self.root,
                        err.strerror)

    def get_or_compute(self, parts: Mapping, compute: Callable[[str], tuple[Mapping[str, Payload], Mapping | None]],
                       payload_type: type[Payload], on_saved: Callable[[], None] | None = None
                       ) -> tuple[dict[str, Any], dict | None]:
        """Under the key's lock, read the entry of ``parts``, else ``compute(key)`` -> (payloads, extra) and
        store it. Returns (payload per head, meta.json; None when computed now)."""
        key = stats_key(parts)
        with self.lock(key):
            hit = self.load(key, payload_type)
            if hit is not None:
                return hit.stats, hit.meta
            stats, extra = compute(key)
            if self.save(key, stats, parts, extra=extra) is not None and on_saved is not None:
                on_saved()
            return dict(stats), None

    def read(self, key: str, payload_type: type[Payload]) -> Entry:
        """Read and verify an entry; raises FileNotFoundError (absent) or CacheEntryError."""
        d = self.path(key)
        if not d.is_dir():
            raise FileNotFoundError(d)
        try:
            meta = json.loads((d / "meta.json").read_text())
        except FileNotFoundError:
            raise CacheEntryError("meta.json is missing (partial entry)") from None
        except (OSError, ValueError, RecursionError) as err:
            raise CacheEntryError(f"meta.json is unreadable: {err}") from None
        if not isinstance(meta, dict):
            raise CacheEntryError("meta.json is not an object")
        digest = _meta_digest(meta)
        if digest is None or meta.get("meta_sha256") != digest:
            raise CacheEntryError("meta.json does not match its own checksum (meta_sha256)")
        for field, want in (("key", key), ("cache_schema", CACHE_SCHEMA), ("format_version", FORMAT_VERSION)):
            if meta.get(field) != want:
                raise CacheEntryError(f"meta.json has {field}={meta.get(field)!r}, expected {want!r}")
        try:
            data = (d / "stats.npz").read_bytes()
        except OSError as err:
            raise CacheEntryError(f"stats.npz is unreadable: {err}") from None
        if len(data) != meta.get("npz_bytes"):
            raise CacheEntryError(f"stats.npz has {len(data)} bytes, meta.json says {meta.get('npz_bytes')}")
        digest = hashlib.sha256(data).hexdigest()
        if digest != meta.get("sha256"):
            raise CacheEntryError(f"stats.npz checksum {digest[:12]}… does not match {str(meta.get('sha256'))[:12]}…")
        heads = meta.get("heads")
        if not isinstance(heads, list) or not heads:
            raise CacheEntryError("meta.json lists no heads")
        if meta.get("kind") != payload_type.ENTRY_KIND:  # the reader's mistake, not a damaged entry: kept
            raise TypeError(f"cache entry {key[:12]} holds {meta.get('kind') or 'token statistics'}, not "
                            f"{payload_type.ENTRY_KIND or 'token statistics'} ({payload_type.__name__})")
        if payload_type.ENTRY_FORMAT is not None:
            field, want = payload_type.ENTRY_FORMAT
            if meta.get(field) != want:
                raise CacheEntryError(f"{field} {meta.get(field)!r}, expected {want}")
        try:
            return Entry(_unpack(data, heads, meta.get("arrays") or {}, payload_type), meta)
        except CacheEntryError:
            raise
        except Exception as err:  # zip / npy / TokenStats shape errors
            raise CacheEntryError(f"stats.npz is invalid: {type(err).__name__}: {err}") from None

    def load(self, key: str, payload_type: type[Payload]) -> Entry | None:
        """The entry, or None on a miss; a damaged entry is logged, removed and missed."""
        try:
            return self.read(key, payload_type)
        except FileNotFoundError:
            return None
        except CacheEntryError as err:
            log.warning("cache entry %s is corrupted (%s): removing it, it will be recomputed", key[:12], err)
            self.remove(key)
            return None

    def meta(self, key: str) -> dict | None:
        """The entry's meta.json, unverified (None when missing or unreadable): for listings."""
        try:
            meta = json.loads((self.path(key) / "meta.json").read_text())
            return meta if isinstance(meta, dict) else None
        except (OSError, ValueError, RecursionError):
            return None

    def __contains__(self, key: str) -> bool:
        return (self.path(key) / "meta.json").is_file()

    def save(
        self, key: str, stats: Mapping[str, Payload], parts: Mapping, extra: Mapping | None = None
    ) -> Path | None:
        """Write an entry atomically (a valid one written first is kept); a read-only or full folder stores none
    (a warning; the statistics still go to the run, anything half-written removed)."""
        _check_key(key)
        if not stats:
            raise ValueError("nothing to save: stats is empty")
        try:
            return self._save(key, stats, parts, extra)
        except OSError as err:
            if err.errno not in READ_ONLY + FULL + BLOCKED:
                raise
            if self.unusable is not None and err.errno in BLOCKED:
                return None  # said once already (lock)
            log.warning("statistics cache %s: cannot store entry %s (%s); the run goes on without caching it",
                        self.root, key[:12], err.strerror)
            return None

    def _save(self, key: str, stats, parts: Mapping, extra: Mapping | None) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.path(key)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=self.root))
        try:
            heads = list(stats)
            arrays = _pack(stats)
            npz = tmp / "stats.npz"
            with atomic_file(npz, "wb") as f:
                np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds as allow_pickle
            first = stats[heads[0]]
            kind, fmt = type(first).ENTRY_KIND, type(first).ENTRY_FORMAT
            figures = {h: stats[h].entry_figures() for h in heads}
            now = time.time()
            meta = {
                "key": key, "cache_schema": CACHE_SCHEMA, "format_version": FORMAT_VERSION,
                "created": now, "created_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now)),
                "sha256": sha256_file(npz), "npz_bytes": npz.stat().st_size, "heads": heads,
                "arrays": {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in arrays.items()},
                "temperatures": {h: f["temperatures"] for h, f in figures.items() if "temperatures" in f},
                "n_items": first.n_items, "n_tokens": figures[heads[0]].get("n_tokens", 0),
                **({"kind": kind} if kind else {}), **(dict([fmt]) if fmt else {}),
                "parts": _normalise(parts), "extra": dict(extra) if extra else {},
                **({"about": self.about} if self.about else {}),
            }
            meta = json.loads(json.dumps(meta, allow_nan=False, default=json_default))  # as it will be read back
            meta["meta_sha256"] = _meta_digest(meta)
            write_atomic(tmp / "meta.json", json.dumps(meta, indent=1, sort_keys=True, allow_nan=False,
                                                       default=json_default))
            fsync_dir(tmp)
            if not self._publish(tmp, final, key, type(first)):
                log.debug("cache entry %s was written by another job first; keeping it", key[:12])
            fsync_dir(self.root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # gone already when published
        return final

    def _publish(self, tmp: Path, final: Path, key: str, payload_type: type[Payload]) -> bool:
        for _ in range(2):
            try:
                os.rename(tmp, final)  # atomic; fails on a non-empty target
                return True
            except OSError as err:
                if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
            try:
                self.read(key, payload_type)
                return False  # a valid winner: keep it
            except FileNotFoundError:
                continue
            except CacheEntryError as err:
                log.warning("replacing the corrupted cache entry %s (%s)", key[:12], err)
                self.remove(key)
        return False

    def checkpoint(self, key: str, heads, offsets, temperatures, every: float) -> Checkpoint | None:
        """The checkpoint of the pass computing ``key``, taken under ``lock(key)`` (None where nothing is written)."""
        if self.unusable is not None:
            return None
        folder = self.root / PARTIAL_DIR / _check_key(key)
        return Checkpoint(folder, key, heads, offsets, temperatures, every=every, schema=CACHE_SCHEMA)

    def keys(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if _KEY_RE.match(p.name) and p.is_dir())

    def resolve(self, prefix: str) -> str:
        """The one key starting with ``prefix``; CacheError if none or several."""
        prefix = prefix.strip().lower()
        if not prefix:
            raise CacheError("empty key prefix")
        found = [k for k in self.keys() if k.startswith(prefix)]
        if not found:
            raise CacheError(f"no cache entry starts with {prefix!r} in {self.root}")
        if len(found) > 1:
            raise CacheError(f"key prefix {prefix!r} is ambiguous: {', '.join(k[:12] for k in found)}")
        return found[0]

    def remove(self, key: str) -> int:
        """Remove one entry; returns the bytes freed."""
        d = self.path(key)
        if not d.exists():
            return 0
        size = disk_size(d)
        trash = self.root / f".trash-{key[:16]}-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(d, trash)
        except FileNotFoundError:
            return 0
        shutil.rmtree(trash, ignore_errors=True)
        remove_folder(self.root / PARTIAL_DIR / key)
        return size

    def clear(self, keys: Iterable[str] | None = None) -> int:
        """Remove the given entries (keys or unique prefixes), or everything when None; returns the bytes freed."""
        targets = self.keys() if keys is None else list(dict.fromkeys(self.resolve(k) for k in keys))
        freed = 0
        for key in targets:
            freed += self.remove(key)
            drop_stale_lock(self._lock_path(key))
        if keys is None and self.root.is_dir():
            for folder in (PARTIAL_DIR, FRONT_DIR):
                freed += disk_size(self.root / folder)
                remove_folder(self.root / folder)
            now = time.time()
            for p in self.root.iterdir():
                stale = p.name.startswith(".trash-") or (
                    p.name.startswith(".tmp-") and now - p.stat().st_mtime > STALE_TMP_SECONDS)
                if stale and p.is_dir():
                    freed += disk_size(p)
                    shutil.rmtree(p, ignore_errors=True)
        return freed


def _meta_digest(meta: dict) -> str | None:
    """SHA-256 of meta.json less ``meta_sha256`` (None when it cannot be hashed)."""
    try:
        return hashlib.sha256(
            canonical_json({k: v for k, v in meta.items() if k != "meta_sha256"}).encode()
        ).hexdigest()
    except (ValueError, TypeError, RecursionError):
        return None


def _pack(stats: Mapping[str, Payload]) -> dict[str, np.ndarray]:
    """The arrays of every head, named ``<head index>_<array>``."""
    arrays = {}
    kind = type(next(iter(stats.values())))
    for i, (head, st) in enumerate(stats.items()):
        if not (hasattr(st, "to_arrays") and hasattr(type(st), "ARRAY_NAMES")):
            raise TypeError(f"stats[{head!r}] is {type(st).__name__}, not a cache payload (to_arrays, from_arrays)")
        if type(st) is not kind:
            raise TypeError(f"stats[{head!r}] is {type(st).__name__}; an entry holds one payload type "
                            f"({kind.__name__})")
        arrays.update({f"{i}_{k}": np.ascontiguousarray(v) for k, v in st.to_arrays().items()})
    return arrays


def _unpack(data: bytes, heads: list, arrays_meta: dict, payload_type: type[Payload]) -> dict:
    """The payload per head, each array checked against meta.json."""
    stats = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        if sorted(z.files) != sorted(arrays_meta):
            raise CacheEntryError(f"stats.npz holds {sorted(z.files)}, meta.json lists {sorted(arrays_meta)}")
        for i, head in enumerate(heads):
            got = {}
            optional = [n for n in getattr(payload_type, "OPTIONAL_ARRAYS", ()) if f"{i}_{n}" in arrays_meta]
            for name in [*payload_type.ARRAY_NAMES, *optional]:
                field = f"{i}_{name}"
                if field not in arrays_meta:
                    raise CacheEntryError(f"array {field} is missing")
                arr, want = z[field], arrays_meta[field]
                if list(arr.shape) != want.get("shape") or str(arr.dtype) != want.get("dtype"):
                    raise CacheEntryError(f"array {field} is {arr.dtype}{list(arr.shape)}, meta.json says "
                                          f"{want.get('dtype')}{want.get('shape')}")
                got[name] = arr
            stats[head] = payload_type.from_arrays(got)
    return stats
