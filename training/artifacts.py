"""The artifact directory of a training command (negatives, a discriminator, a T5Score model).

One rule for all of them: the directory belongs to one *identity* (what decides its content); its
identity JSON (``provenance.json`` / ``cscore_discriminator.json`` / ``cscore_t5score.json``) is
written atomically and last, so a directory whose JSON says finished holds the whole artifact.
The same identity again is skipped (or resumed), another one is refused with a one-line error."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cscore.errors import ConfigError
from cscore.files import write_atomic


def versions() -> dict:
    import torch
    import transformers

    from cscore.version import __version__

    return {"cscore": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


def write_json(path: Path, obj) -> None:
    write_atomic(Path(path), json.dumps(obj, indent=1, default=float) + "\n")


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

    def read(self) -> dict | None:
        return json.loads(self.meta_file.read_text()) if self.meta_file.exists() else None

    def check(self, identity: dict, refuse: Callable[[dict], str]) -> dict | None:
        """The identity JSON already there when it has this identity (None: there is none); another
        identity is a ConfigError with ``refuse(its identity)`` as the message."""
        old = self.read()
        if old is not None and old.get("identity") != identity:
            raise ConfigError(refuse(old.get("identity") or {}))
        return old

    def finish(self, meta: dict) -> None:
        """Write the identity JSON (after everything else): from now on the directory is finished."""
        write_json(self.meta_file, meta)


def split_groups(groups: list[str], holdout: float, seed: int, what: str = "cdm") -> np.ndarray:
    """True for items of held-out groups: the groups ranked by sha256(seed, group), the first
    round(holdout * n) (at least one) held out -- the rule of cscore's dev split (data/splits.py).
    ``what``: the command whose items these are (``cdm``: its negatives; ``t5score``: rated rows)."""
    distinct = sorted(set(groups))
    if len(distinct) < 2:
        items, fix = (("the negatives come", "generate from more documents / dialogues") if what == "cdm" else
                      ("the rated rows come", "give data with more documents / source segments"))
        raise ConfigError(f"{items} from {len(distinct)} group(s); a group-held-out split needs at least 2 ({fix})")
    ranked = sorted(distinct, key=lambda g: hashlib.sha256(f"{seed}\0{g}".encode()).hexdigest())
    held = set(ranked[:max(1, round(holdout * len(distinct)))])
    if len(held) == len(distinct):
        raise ConfigError(f"{what}.train.holdout={holdout} holds out every group; lower it")
    return np.array([g in held for g in groups])
