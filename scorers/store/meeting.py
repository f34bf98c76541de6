"""Where the shards of one sharded unit of work meet (``runtime.shards``): the one path scheme for
their partials, done marks and locks, and the reading of the marks. Every sharded kind of work
meets in a ``Place``; what its partials hold is its own payload (``checkpoint.Checkpoint``: token
statistics; ``checkpoint.ItemCheckpoint``: the judge's first step and its decodes; the CDM
generator's negatives.jsonl lines).

A place is a folder (partials ``s<K>-...``, marks ``s<K>of<N>.done.json``) and a lock stem (shard K's
lock ``<stem>.s<K>.lock``, the merge's ``<stem>.lock``):

- a statistics, judge or decode pass: ``<cache>/.partial/<key>/``, locks ``<cache>/.locks/<key>...``
  (the merge's lock is the cache entry's own, ``StatsCache.lock``);
- ``cscore cdm generate``: ``<out>/.shards/`` (partials ``s<K>of<N>.jsonl``), locks
  ``<out>/.shards/shards...``.

A mark lists the partial files its shard wrote and how many items they hold: a mark whose files
are not all there, or that does not read, counts as missing; one whose files hold fewer items than
it says is removed by ``check_items`` (its shard is missing again and computes what it lacks).

This module does not import torch."""

from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cscore.files import file_lock, write_atomic
from cscore.scorers.store.checkpoint import LOCK_DIR, PARTIAL_DIR

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Place:
    """The meeting place of the ``count`` shards of one unit of work (see the module's docstring)."""

    folder: Path
    stem: Path
    count: int

    @classmethod
    def of_cache(cls, root: Path, key: str, count: int) -> Place:
        """A pass keyed ``key`` in the statistics cache at ``root``."""
        return cls(Path(root) / PARTIAL_DIR / key, Path(root) / LOCK_DIR / key, count)

    @classmethod
    def of_folder(cls, folder: Path, count: int) -> Place:
        """Work whose partials lie in a folder of their own (``cscore cdm generate``'s ``.shards``)."""
        return cls(Path(folder), Path(folder) / "shards", count)

    # -- paths --------------------------------------------------------------------------------

    def mark_path(self, k: int) -> Path:
        return self.folder / f"s{k:03d}of{self.count:03d}.done.json"

    def lock_path(self, k: int | None = None) -> Path:
        """Shard ``k``'s lock (two runs of one shard: one computes); None: the merge's."""
        return self.stem.with_name(self.stem.name + ("" if k is None else f".s{k:03d}") + ".lock")

    def lock(self, k: int | None = None):
        return file_lock(self.lock_path(k))

    def files(self, k: int) -> list[str]:
        """The partial files shard ``k`` wrote (``s<K>-*.npz``)."""
        return sorted(p.name for p in self.folder.glob(f"s{k:03d}-*.npz"))

    # -- marks --------------------------------------------------------------------------------

    def mark(self, k: int, record: dict) -> None:
        """Shard ``k`` is done: its ``record``, with the partial files that hold its items."""
        write_atomic(self.mark_path(k), json.dumps({"shard": k, "shards": self.count, **record,
                                                    "files": self.files(k)}))

    def unmark(self, k: int) -> None:
        self.mark_path(k).unlink(missing_ok=True)

    def marks(self) -> dict[int, dict]:
        """The records of the shards that finished. A mark whose files are not all there any more
        (a damaged one was removed) or that does not read counts as missing."""
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
        """The shards whose mark says more items than their partials hold (``covered``: {shard:
        items its files hold}, as the merge read them): their marks are removed, so they are
        missing again (a shard computes what its partials lack) rather than marked forever."""
        marks = self.marks()
        short = [k for k, r in marks.items() if "items" in r and covered.get(k, 0) < int(r["items"])]
        for k in short:
            log.warning("%s: shard %d of %d is marked done but its partials hold %d of its %d items: its mark is "
                        "removed, the shard runs again", label, k, self.count, covered.get(k, 0),
                        int(marks[k]["items"]))
            self.unmark(k)
        return short

    # -- who is running -----------------------------------------------------------------------

    def running(self, shards: Sequence[int]) -> bool:
        """Whether some process holds the lock of one of ``shards`` now (it is computing it)."""
        return any(held(self.lock_path(k)) for k in shards)


def held(path: Path) -> bool:
    """Whether someone holds the lock file ``path`` now (``files.file_lock``)."""
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


def missing_text(missing: Sequence[int], count: int) -> str:
    names = ", ".join(str(k) for k in missing)
    return f"shard{'s' * (len(missing) != 1)} {names} of {count}"


def pending_text(missing: Sequence[int], count: int) -> str:
    """What a command that did its shards says of the rest (``missing``: none, every shard is done
    and the merge is another process's)."""
    if missing:
        return f"{missing_text(missing, count)} not done yet"
    return "every shard done; the merge is the parent's (runtime.devices)"

