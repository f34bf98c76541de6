"""A token statistics pass read from the statistics cache without a model, tokenizer or torch, through the
cache's front index (``cscore.scorers.store.front``): ``read`` on the way in, ``write`` after a full pass."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from cscore.config.run import RunConfig
from cscore.run.kinds.base import Plan
from cscore.scorers.engine.pass_options import PassOptions

if TYPE_CHECKING:
    from cscore.scorers.api import ModelPair, PairStatistics, ScoringInput

log = logging.getLogger(__name__)


@dataclass
class KeptModel:
    """A model of a pass read through the front index, as the full path recorded it; its weights not needed."""

    name: str
    info: dict
    device: str
    dtype: str
    parent: None = None
    load_seconds: float = 0.0
    loaded: bool = False
    reused: bool = False

    def status(self) -> str:
        """"not used" where an earlier job of this process holds the weights, else "not loaded"."""
        models = sys.modules.get("cscore.scorers.models.models")  # imported only if a job loaded one
        base = self.name.rsplit("[:", 1)[0] if self.name.endswith("]") else self.name
        held = getattr(models, "_POOL", {}).values()
        return "not used" if any(lm.name == base and lm.loaded for lm in held) else "not loaded"


def pass_options(run: RunConfig, plan: Plan) -> PassOptions:
    """The run's pass options with what its variants read: the distributional statistics, early-exit heads."""
    from cscore.scorers import methods

    opts = run.passes
    if any(methods.get(v.method).distributional(vars(v.params)) for v in plan.variants):
        opts = replace(opts, distribution=True)
    exits = sorted({k for v in plan.variants for k in methods.get(v.method).exits(vars(v.params))})
    if exits:
        opts = replace(opts, exits=tuple(exits))
    return opts


def frame_digest(df: pd.DataFrame) -> str:
    """SHA-256 over the examples: column names, dtypes and every value, in row order."""
    h = hashlib.sha256(b"cscore-frame-v1")
    for name in df.columns:
        values = df[name].to_numpy()
        h.update(json.dumps([str(name), str(df[name].dtype)]).encode())
        if values.dtype.kind in "biufcmM":
            h.update(values.astype(values.dtype.newbyteorder("<")).tobytes())
        else:
            h.update(json.dumps(values.tolist(), default=repr, ensure_ascii=False).encode())
    return h.hexdigest()


def model_files(spec: str, revision: str | None) -> dict | None:
    """The folder a model spec loads from and its files' fingerprint, where known without loading it."""
    from cscore.scorers.models import gguf, specs
    from cscore.scorers.store import front

    kind = specs.kind(spec)
    if kind == "gguf":
        try:
            folder = gguf.conversion_dir(gguf.gguf_path(spec))
        except (OSError, specs.ModelSpecError):
            return None
        if not (folder / "COMPLETE").is_file():
            return None
    elif kind == "local" and os.path.isdir(os.path.expanduser(spec)):
        folder = Path(os.path.expanduser(spec))
    else:
        return None
    fingerprint = front.folder_fingerprint(folder)
    return None if fingerprint is None else {"spec": spec, "revision": revision, "path": str(folder),
                                             "files": fingerprint}


def what(run: RunConfig, examples: pd.DataFrame, plan: Plan, opts: PassOptions) -> dict | None:
    """What the record of this run's pass is keyed by; None where only torch or transformers would know (a hub
    model, a GPU), without the cache or with a pass split over processes."""
    from cscore.scorers.store import front

    if not run.cache.enabled or run.runtime.split:
        return None
    device = front.device_and_dtype(opts.device, opts.dtype)
    if device is None:
        return None
    models = {}
    for role in ("expert", "amateur"):
        spec = getattr(run.pair, role)
        if spec.path is not None and (role == "expert" or role in plan.models):
            models[role] = model_files(str(spec.path), spec.revision)
            if models[role] is None:
                return None

    def plain(obj) -> Any:
        return json.loads(json.dumps(dataclasses.asdict(obj), default=str))

    return {"data": plain(run.data), "split": plain(run.split), "prompt": plain(run.prompt), "pair": plain(run.pair),
            "options": plain(opts), "temperatures": [float(t) for t in plan.temperatures],
            "models_needed": list(plan.models), "examples": frame_digest(examples), "model_files": models,
            "device": list(device)}


def index(run: RunConfig):
    from cscore.run.kinds.pair import stats_cache
    from cscore.scorers.store.front import FrontIndex

    cache = stats_cache(run)
    assert cache is not None  # what() is None without it
    return cache, FrontIndex(cache.root)


def read(run: RunConfig, examples: pd.DataFrame, plan: Plan
         ) -> tuple[ScoringInput, PairStatistics, dict[str, KeptModel], list[str]] | None:
    """(encoded items, statistics, models, the pair's warnings) where the pass's record and every entry it names
    are in the cache; None: the full path runs."""
    from cscore.scorers.api import PairStatistics, ScoringInput
    from cscore.scorers.engine.report import EngineReport
    from cscore.scorers.engine.stats import TokenStats
    from cscore.scorers.store import front
    from cscore.scorers.store.cache import stats_key
    from cscore.scorers.store.runner import PassReport

    key = what(run, examples, plan, pass_options(run, plan))
    if key is None:
        return None
    cache, records = index(run)
    got = records.read(front.front_key(key))
    if got is None or len(got[0]) != len(examples):
        return None
    items, record = got
    stats: dict[str, TokenStats] = {}
    reports: dict[str, EngineReport] = {}
    for one in record["passes"]:
        start = time.perf_counter()
        entry = cache.load(stats_key(one["parts"]), TokenStats)
        if entry is None:  # removed since (cscore cache rm, clear): the full path computes it again
            return None
        reports[one["label"]] = PassReport.of_entry(entry.meta)
        reports[one["label"]].fetch_seconds = time.perf_counter() - start
        stats.update(entry.stats)
    inputs = ScoringInput(items)
    models = {role: KeptModel(**m) for role, m in record["models"].items()}
    return inputs, PairStatistics(stats, inputs, reports), models, list(record.get("notes", []))


def write(run: RunConfig, examples: pd.DataFrame, plan: Plan, pair: ModelPair, inputs: ScoringInput,
          stats: PairStatistics) -> None:
    """Record the pass the full path just read or computed for the runs after it, where ``what`` is known and
    holds (device, dtype) and the pair is not cross-family."""
    from cscore.files import canonical_json
    from cscore.scorers.models import size
    from cscore.scorers.store import front
    from cscore.scorers.store.cache import stats_key

    opts = pass_options(run, plan)
    key = what(run, examples, plan, opts) if not pair.aligned else None
    if key is None or any([m.device.type, str(m.dtype)] != key["device"] for m in pair.models.values()):
        return
    cache, records = index(run)
    passes = [(label, json.loads(canonical_json(parts)))  # as the key hashes them: JSON data
              for label, parts in pair.pass_parts(inputs, plan.temperatures, plan.models, opts)]
    if [label for label, _ in passes] != list(stats.reports) or any(stats_key(p) not in cache for _, p in passes):
        return  # a pass the cache did not keep (a folder that takes no writes): nothing to point at
    ama = pair.amateur  # an amateur that is not the smaller: the line ModelPair warned with
    line = size.upside_down(pair.expert, ama) if ama is not None and ama.parent is not pair.expert else None
    models = {role: {"name": m.name, "info": m.info, "device": str(m.device), "dtype": str(m.dtype)}
              for role, m in pair.models.items()}
    records.write(front.front_key(key), inputs.items,
                  {"passes": [{"label": label, "parts": parts} for label, parts in passes], "models": models,
                   "notes": [line] if line else []})
