"""A pass's partial files (``Checkpoint``, ``ItemCheckpoint``), the shard plan (``deal``, ``Shard``)
and where shards meet (``Place``). Each file is one atomic flush named by its SHA-256: a damaged or
foreign file is removed and its items computed again, never trusted. A killed pass resumes from its last
completed batch; a resumed or merged pass is bit-identical (docs/scaling.md). No torch."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cscore.files import canonical_json, file_lock, held, write_atomic
from cscore.scorers.engine.stats import FORMAT_VERSION, ROW_NAMES

log = logging.getLogger(__name__)

PARTIAL_DIR = ".partial"  # under the cache root
LOCK_DIR = ".locks"  # under the cache root: the entries' and the shards' locks (``Place``)
CHECKPOINT_SECONDS = 10.0  # default flush interval (cache.checkpoint_seconds)
_NAME_RE = re.compile(r"^(?:s(\d+)-)?(\d+)-([0-9a-f]{64})\.npz$")


def _as_numpy(x) -> np.ndarray:
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)


class Checkpoint:
    """One pass's checkpoint: ``load`` what an earlier run kept; the engine skips ``done`` items,
    ``add``s each completed batch and ``fill``s the kept rows into its arrays."""

    def __init__(self, folder: Path, key: str, heads: Sequence[str], offsets: np.ndarray,
                 temperatures: Sequence[float], every: float = CHECKPOINT_SECONDS, schema: int = 0,
                 shard: tuple[int, int] | None = None):
        self.folder, self.heads, self.every = Path(folder), list(heads), float(every)
        # the part of the plan this process runs (``engine.passes.PlanPart``; None: all): one shard's units
        self.part = None if shard is None else Shard(*shard)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.n_items, self.n_tokens = len(self.offsets) - 1, int(self.offsets[-1])
        self.header = canonical_json({"key": key, "heads": self.heads, "n_items": self.n_items,
                                      "n_tokens": self.n_tokens, "temperatures": [float(t) for t in temperatures],
                                      "format_version": FORMAT_VERSION, "cache_schema": schema})
        self.done = np.zeros(self.n_items, dtype=bool)  # items kept by an earlier run
        self.saved = np.zeros(self.n_items, dtype=bool)  # items on disk now (earlier runs' and this one's)
        self.foreign = np.zeros(self.n_items, dtype=bool)  # items of other shards' batches (``mark_foreign``)
        self.owner = np.full(self.n_items, -1, dtype=np.int64)  # the shard whose file holds an item (-1: none's)
        self.kept: list[tuple[np.ndarray, dict]] = []
        self.pending: list[tuple[np.ndarray, dict]] = []
        self.last = time.monotonic()
        self.seq = 0
        self.enabled = True

    @property
    def n_kept(self) -> int:
        return int(self.done.sum())

    @property
    def n_saved(self) -> int:
        return int(self.saved.sum())

    def load(self) -> int:
        """Read the files an earlier run left (a shard: its own), a bad one removed; the items kept."""
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return 0
        for name in names:
            m = _NAME_RE.match(name)
            own = None if m is None or m.group(1) is None else int(m.group(1))
            if m is None or (self.part is not None and own != self.part.index):
                continue  # a shard reads its own files; the merge (no shard) reads them all
            if own == (None if self.part is None else self.part.index):
                self.seq = max(self.seq, int(m.group(2)) + 1)
            try:
                dest, rows = self._read(self.folder / name, m.group(3))
            except Exception as err:  # noqa: BLE001 - a file that does not read back is never trusted
                log.warning("checkpoint file %s is damaged (%s): removed, its items are recomputed", name, err)
                (self.folder / name).unlink(missing_ok=True)
                continue
            self.kept.append((dest, rows))
            self.done[self._items_of(dest)] = True
            if own is not None:
                self.owner[self._items_of(dest)] = own
        self.saved |= self.done
        return self.n_kept

    def covered(self) -> dict[int, int]:
        """{shard: the items its files hold}."""
        shards, counts = np.unique(self.owner[self.owner >= 0], return_counts=True)
        return {int(k): int(n) for k, n in zip(shards, counts)}

    def _read(self, path: Path, sha: str) -> tuple[np.ndarray, dict]:
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise ValueError("its checksum does not match its name")
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if str(z["header"]) != self.header:
                raise ValueError("it belongs to another pass")
            dest = z["dest"]
            rows = self._rows_of(z)
        if dest.dtype != np.int64 or dest.ndim != 1 or not dest.size:
            raise ValueError("bad token positions")
        if dest.min() < 0 or dest.max() >= self.n_tokens or np.unique(dest).size != dest.size:
            raise ValueError("token positions out of range or repeated")
        items = self._items_of(dest)
        if int(np.diff(self.offsets)[items].sum()) != dest.size:
            raise ValueError("it holds part of an item")
        self._check_rows(dest, rows)
        return dest, rows

    def _rows_of(self, z) -> dict:
        """Per head its rows, in ``stats.ROW_NAMES`` order."""
        return {h: tuple(z[f"{i}_{name}"] for name in ROW_NAMES if f"{i}_{name}" in z.files)
                for i, h in enumerate(self.heads)}

    def _check_rows(self, dest: np.ndarray, rows: dict) -> None:
        want = (len(json.loads(self.header)["temperatures"]), dest.size)
        for arrays in rows.values():
            if len(arrays) < 2:
                raise ValueError("rows without logp and logp_max")
            for a in arrays:
                if a.shape != want or a.dtype.kind != "f":
                    raise ValueError(f"rows of shape {a.shape}, expected {want}")

    def _arrays(self, pending: list) -> dict[str, Any]:
        arrays: dict[str, Any] = {}
        for i, h in enumerate(self.heads):
            for k, name in enumerate(ROW_NAMES[:len(pending[0][1][h])]):
                arrays[f"{i}_{name}"] = np.concatenate([_as_numpy(rows[h][k]) for _, rows in pending], axis=1)
        return arrays

    def mark_foreign(self, items: np.ndarray) -> None:
        """The items of other shards' units (``Shard.foreign``): never computed here."""
        self.foreign |= np.asarray(items, dtype=bool)

    def _items_of(self, dest: np.ndarray) -> np.ndarray:
        return np.unique(np.searchsorted(self.offsets, dest, side="right") - 1)

    def row_names(self) -> dict[str, tuple[str, ...]]:
        """Each head's statistics in the files read (logp and logp_max when none)."""
        rows = self.kept[0][1] if self.kept else {}
        return {h: ROW_NAMES[:len(rows[h])] if h in rows else ROW_NAMES[:2] for h in self.heads}

    def fill(self, full: dict) -> None:
        """Put the kept rows into the pass's arrays ({head: {name: array}}); another layout is an error."""
        for dest, rows in self.kept:
            for h, arrays in rows.items():
                if len(arrays) != len(full[h]):
                    raise ValueError(f"checkpoint rows of {h} hold {len(arrays)} statistics, the pass {len(full[h])}")
                for name, a in zip(ROW_NAMES, arrays):
                    full[h][name][:, dest] = a

    def add(self, dest, per_head: dict) -> None:
        """One completed batch: token positions and each head's rows (kept on device until a flush)."""
        if not self.enabled:
            return
        self.pending.append((np.asarray(_as_numpy(dest), dtype=np.int64), dict(per_head)))
        if time.monotonic() - self.last >= self.every:
            self.flush()

    def flush(self) -> None:
        """Write the pending batches as one file; a folder that cannot take it ends checkpointing
        for this pass with one warning."""
        self.last = time.monotonic()
        if not self.pending or not self.enabled:
            return
        pending, self.pending = self.pending, []
        arrays: dict[str, Any] = {"header": np.array(self.header), "dest": np.concatenate([d for d, _ in pending]),
                                  **self._arrays(pending)}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        data = buf.getvalue()
        try:
            prefix = "" if self.part is None else f"s{self.part.index:03d}-"
            write_atomic(self.folder / f"{prefix}{self.seq:06d}-{hashlib.sha256(data).hexdigest()}.npz", data)
        except OSError as err:
            self.enabled = False
            log.warning("statistics checkpoint %s cannot be written (%s): this pass goes on without one",
                        self.folder, err.strerror or err)
            return
        self.seq += 1
        self.saved[self._items_of(arrays["dest"])] = True

    def discard(self) -> None:
        """Remove the checkpoint (the full entry holds everything now)."""
        self.pending, self.kept = [], []
        remove_folder(self.folder)


def remove_folder(folder: Path) -> None:
    """Remove a folder, renamed first so no reader sees it half-deleted."""
    trash = folder.with_name(f".trash-{folder.name[:16]}-{os.getpid()}")
    try:
        os.rename(folder, trash)
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ENOTDIR):
            shutil.rmtree(folder, ignore_errors=True)
        return
    shutil.rmtree(trash, ignore_errors=True)


# -- the shard plan (runtime.shards): which shard's partials hold which unit -----------------------

def deal(costs: Sequence[int], n: int) -> list[int]:
    """Each unit's shard: in plan order, each to the shard with the least cost (padded tokens) so far
    (ties: lowest); every shard deals the same plan alike."""
    loads = [0] * n
    owner = []
    for c in costs:
        k = min(range(n), key=lambda s: (loads[s], s))
        owner.append(k)
        loads[k] += int(c)
    return owner


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``."""

    index: int
    count: int

    def owners(self, costs: Sequence[int]) -> list[int]:
        """Each unit's shard."""
        return deal(costs, self.count)

    def mine(self, units: Sequence, costs: Sequence[int]) -> list:
        """This shard's units, in plan order."""
        return [u for u, owner in zip(units, self.owners(costs)) if owner == self.index]

    def foreign(self, units: Sequence[Sequence[int]], costs: Sequence[int], n_items: int) -> np.ndarray:
        """A mask of the items in other shards' units."""
        out = np.zeros(n_items, dtype=bool)
        for members, owner in zip(units, self.owners(costs)):
            if owner != self.index:
                out[list(members)] = True
        return out

    def detail(self, mine: int, planned: int) -> str:
        """The progress line's detail of a shard's pass."""
        return f"shard {self.index} of {self.count}: {mine:,} of {planned:,} batches"


# -- partials with one entry per item (a judge context, a decoded prompt), kept as named arrays ----

SIZES = "sizes"  # the fixed array with each item's length of the ragged arrays


@dataclass(frozen=True)
class Layout:
    """An item partial's arrays: ``fixed`` {name: trailing shape}; ``ragged`` (``sizes[item]`` values each)."""

    fixed: dict = field(default_factory=dict)
    ragged: tuple = ()

    def record(self) -> dict:
        return {"fixed": {k: list(v) for k, v in sorted(self.fixed.items())}, "ragged": list(self.ragged)}


class ItemCheckpoint(Checkpoint):
    """Partials with one entry per item: ``add(items, {name: array})``; ``assemble()`` merges."""

    def __init__(self, *args, layout: Layout, assemble: Callable[[ItemCheckpoint], dict], **kw):
        super().__init__(*args, **kw)  # as ``Checkpoint``: folder, key, heads, offsets, temperatures, every, ...
        if self.n_tokens != self.n_items:
            raise ValueError("an item partial keeps one position per item")
        self.layout, self._assemble = layout, assemble
        self.header = json.dumps({"pass": json.loads(self.header), "layout": layout.record()}, sort_keys=True)

    def _rows_of(self, z) -> dict:
        names = [*self.layout.fixed, *self.layout.ragged]
        return {name: z[name] for name in names}

    def _check_rows(self, dest: np.ndarray, rows: dict) -> None:
        for name, shape in self.layout.fixed.items():
            if rows[name].shape != (dest.size, *shape):
                raise ValueError(f"{name} of shape {rows[name].shape}, expected {(dest.size, *shape)}")
        if self.layout.ragged:
            sizes = rows[SIZES]
            if sizes.dtype.kind != "i" or (sizes < 0).any():
                raise ValueError("bad sizes")
            for name in self.layout.ragged:
                if rows[name].shape != (int(sizes.sum()),):
                    raise ValueError(f"{name} does not match the sizes")

    def _arrays(self, pending: list) -> dict[str, Any]:
        names = [*self.layout.fixed, *self.layout.ragged]
        return {name: np.concatenate([np.asarray(rows[name]) for _, rows in pending]) for name in names}

    def gather(self) -> tuple[dict[str, np.ndarray], dict[str, list]]:
        """({fixed name: rows by item}, {ragged name: each item's run, None if not kept})."""
        fixed: dict[str, np.ndarray] = {}
        ragged: dict[str, list] = {name: [None] * self.n_items for name in self.layout.ragged}
        for dest, rows in self.kept:
            for name in self.layout.fixed:
                if name not in fixed:
                    fixed[name] = np.zeros((self.n_items, *rows[name].shape[1:]), dtype=rows[name].dtype)
                fixed[name][dest] = rows[name]
            if self.layout.ragged:
                bounds = np.concatenate([[0], np.cumsum(rows[SIZES])]).astype(np.int64)
                for name in self.layout.ragged:
                    for r, item in enumerate(dest.tolist()):
                        ragged[name][item] = rows[name][bounds[r]:bounds[r + 1]]
        return fixed, ragged

    def assemble(self) -> dict:
        """The merged payload ({head: statistics}) of a checkpoint that holds every item."""
        return self._assemble(self)


# -- where the shards meet: the one path scheme of their partials, marks and locks ----------------


@dataclass(frozen=True)
class Place:
    """Where the ``count`` shards of one piece of work meet: partials, marks, locks."""

    folder: Path
    stem: Path
    count: int

    @classmethod
    def of_cache(cls, root: Path, key: str, count: int) -> Place:
        """A cache entry's."""
        return cls(Path(root) / PARTIAL_DIR / key, Path(root) / LOCK_DIR / key, count)

    @classmethod
    def of_folder(cls, folder: Path, count: int) -> Place:
        """Partials in a folder of their own (``cscore cdm generate``)."""
        return cls(Path(folder), Path(folder) / "shards", count)

    def mark_path(self, k: int) -> Path:
        return self.folder / f"s{k:03d}of{self.count:03d}.done.json"

    def lock_path(self, k: int | None = None) -> Path:
        """Shard ``k``'s lock; None: the merge's."""
        return self.stem.with_name(self.stem.name + ("" if k is None else f".s{k:03d}") + ".lock")

    def lock(self, k: int | None = None):
        return file_lock(self.lock_path(k))

    def mark(self, k: int, record: dict) -> None:
        """Mark shard ``k`` done, naming its partial files."""
        files = sorted(p.name for p in self.folder.glob(f"s{k:03d}-*.npz"))
        write_atomic(self.mark_path(k), json.dumps({"shard": k, "shards": self.count, **record, "files": files}))

    def unmark(self, k: int) -> None:
        self.mark_path(k).unlink(missing_ok=True)

    def marks(self) -> dict[int, dict]:
        """The finished shards' records; a mark that does not read or lacks a file is missing."""
        out = {}
        for k in range(self.count):
            try:
                record = json.loads(self.mark_path(k).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and all((self.folder / f).is_file() for f in record.get("files", [None])):
                out[k] = record
        return out

    def missing(self) -> list[int]:
        """The shards not marked done."""
        marks = self.marks()
        return [k for k in range(self.count) if k not in marks]

    def check_items(self, covered: dict[int, int], label: str) -> list[int]:
        """Unmark (and return) the shards whose mark says more items than their partials hold
        (``covered``), so they run again."""
        marks = self.marks()
        short = [k for k, r in marks.items() if "items" in r and covered.get(k, 0) < int(r["items"])]
        for k in short:
            log.warning("%s: shard %d of %d is marked done but its partials hold %d of its %d items: its mark is "
                        "removed, the shard runs again", label, k, self.count, covered.get(k, 0),
                        int(marks[k]["items"]))
            self.unmark(k)
        return short

    def running(self, shards: Sequence[int]) -> bool:
        """Whether some process is computing one of ``shards`` (holds its lock)."""
        return any(held(self.lock_path(k)) for k in shards)


def missing_text(missing: Sequence[int], count: int) -> str:
    names = ", ".join(str(k) for k in missing)
    return f"shard{'s' * (len(missing) != 1)} {names} of {count}"


def pending_text(missing: Sequence[int], count: int) -> str:
    """What a command that did its shards says of the rest (none missing: another process merges)."""
    if missing:
        return f"{missing_text(missing, count)} not done yet"
    return "this process's shards done; another process merges or writes the run directory"
