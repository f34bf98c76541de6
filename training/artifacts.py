"""The artifact directory of a training command: it belongs to one identity, whose JSON is written
atomically and last; the same identity again is skipped (or resumed), another one is refused."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cscore.data.splits import rank_groups
from cscore.errors import ConfigError
from cscore.files import write_atomic


def versions() -> dict:
    import torch
    import transformers

    from cscore.version import __version__

    return {"cscore": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def out_dir(given: str | None, *default: str) -> Path:
    """The output directory asked for, else outputs/<default...>/<date>_<time>."""
    if given:
        return Path(given).expanduser()
    return Path("outputs").joinpath(*default, time.strftime("%Y-%m-%d_%H-%M-%S"))


@dataclass(frozen=True)
class ArtifactDir:
    path: Path
    meta_name: str  # the identity JSON

    @property
    def meta_file(self) -> Path:
        return self.path / self.meta_name

    def check(self, identity: dict, refuse: Callable[[dict], str]) -> dict | None:
        """The identity JSON already there (None: none); another identity is ``ConfigError(refuse(it))``."""
        old = json.loads(self.meta_file.read_text()) if self.meta_file.exists() else None
        if old is not None and old.get("identity") != identity:
            raise ConfigError(refuse(old.get("identity") or {}))
        return old

    def finish(self, meta: dict) -> None:
        """Write the identity JSON (after everything else): from now on the directory is finished."""
        write_atomic(self.meta_file, json.dumps(meta, indent=1, default=float) + "\n")


def split_groups(groups: list[str], holdout: float, seed: int, what: str = "cdm") -> np.ndarray:
    """True for items of held-out groups (at least one), ranked as data/splits.py ranks; ``what``: cdm | t5score."""
    ranked = rank_groups(groups, seed)
    if len(ranked) < 2:
        items, fix = (("the negatives come", "generate from more documents / dialogues") if what == "cdm" else
                      ("the rated rows come", "give data with more documents / source segments"))
        raise ConfigError(f"{items} from {len(ranked)} group(s); a group-held-out split needs at least 2 ({fix})")
    held = set(ranked[:max(1, round(holdout * len(ranked)))])
    if len(held) == len(ranked):
        raise ConfigError(f"{what}.train.holdout={holdout} holds out every group; lower it")
    return np.array([g in held for g in groups])
