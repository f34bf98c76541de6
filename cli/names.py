"""What a run is called after: the models that run (the pair's label, ``pair_name``) and its
directory name (the ``cscore.run_name`` resolver of ``hydra.run.dir`` / ``hydra.sweep.dir``)."""

from __future__ import annotations

import os
import re
import time

from omegaconf import DictConfig, OmegaConf, open_dict

from cscore.cli.compose import composed, plain
from cscore.cli.resume import MULTIRUN_FLAGS
from cscore.errors import CscoreError

RESOLVER = "cscore.run_name"
SWEPT = "sweep"  # a part of a multirun directory's name that differs between its jobs


def overridden(overrides: list[str], key: str) -> bool:
    """Was ``key`` set on the command line (``key=``, ``+key=``, ``++key=``)?"""
    return any(o.lstrip("+~").split("=", 1)[0] == key for o in overrides)


def short_name(spec: str) -> str:
    spec = str(spec).rstrip("/").removeprefix("gguf:")
    return os.path.basename(spec).removesuffix(".gguf") or spec


def models_run(c: dict) -> list[str]:
    """The roles (expert, amateur) the run's method reads; both when that cannot be told."""
    from cscore.run.typed import typed_method
    from cscore.run.variants import models_needed, plan

    baselines = c.get("baselines") or {}
    try:
        return models_needed(plan(typed_method(dict(c["method"])), baseline_t=baselines.get("t", 1.0),
                                  rows=list(baselines.get("rows", ("expert", "amateur", "ensemble")))))
    except (CscoreError, KeyError, TypeError, ValueError):  # a bad method config: validate says so
        return ["expert", "amateur"]


def pair_name(c: dict, overrides: list[str]) -> tuple[str, object, list[str]]:
    """(label, the amateur's early exit, notes) for the plain config ``c``. Another model put in the
    amateur's place runs whole unless the command line asks for an early exit too. The label: a given
    ``pair.name``, else the one model a single-model method reads, else ``A+B`` / ``A+A[:k]`` with a
    model path overridden, else the pair config's name."""
    p = c["pair"]
    ama = p.get("amateur") or {}
    expert, amateur, early_exit = p["expert"]["path"], ama.get("path"), ama.get("early_exit")
    notes = []
    if (overridden(overrides, "pair.amateur.path") and amateur is not None and early_exit is not None
            and not overridden(overrides, "pair.amateur.early_exit")):
        notes.append(f"pair {p.get('name')}: its amateur.early_exit={early_exit} is for its own amateur; "
                     f"{amateur} runs whole (pair.amateur.early_exit=k cuts it)")
        early_exit = None
    if overridden(overrides, "pair.name"):
        return p.get("name"), early_exit, notes
    roles = models_run(c) if "method" in c else ["expert", "amateur"]
    amateur_label = short_name(amateur or expert) + (f"[:{early_exit}]" if early_exit is not None else "")
    if roles == ["expert"]:
        return short_name(expert), early_exit, notes
    if roles == ["amateur"]:
        return amateur_label, early_exit, notes
    if overridden(overrides, "pair.expert.path") or overridden(overrides, "pair.amateur.path"):
        return f"{short_name(expert)}+{amateur_label}", early_exit, notes
    return p.get("name"), early_exit, notes


def dir_part(text) -> str:
    """``text`` as part of a folder name: letters, digits and ``. + -``, anything else ``_``."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", str(text)).strip("_.") or "_"


def run_name(_root_, swept: set[str] | None = None) -> str:
    """The ``${cscore.run_name:}`` resolver of ``hydra.run.dir``: ``<data>_<models>_<method>`` (``name_of``)
    of a config with Hydra's section, its overrides those of ``hydra.overrides.task``."""
    hydra = plain(_root_.hydra, resolve=False)
    c = plain(OmegaConf.masked_copy(_root_, [str(k) for k in _root_ if k != "hydra"]))
    return name_of(c, hydra["runtime"]["choices"], list(hydra["overrides"]["task"]), swept or set())


def name_of(c: dict, choices: dict, overrides: list[str], swept: set[str]) -> str:
    """``<data>_<models>_<method>`` for the plain config ``c`` (the models, or what the method's kind
    names instead: ``MethodKind.dir_label``); a part in ``swept`` reads ``sweep``."""
    from cscore.run import kinds

    try:
        label = kinds.of_method(c["method"].get("name")).dir_label(c)
    except CscoreError:  # no such method: the models
        label = None
    part, models = label if label is not None else ("pair", pair_name(c, overrides)[0])
    parts = [("data", choices.get("data") or c["data"].get("name")), (part, models),
             ("method", choices.get("method") or c["method"].get("name"))]
    return "_".join(SWEPT if key in swept else dir_part(value) for key, value in parts)


# the parts of a directory name (data, pair, method, or a kind's own: baseline) each swept key can change
PARTS = {"data": {"data"}, "data.name": {"data"},
         "method": {"method", "pair"}, "method.name": {"method", "pair"},  # a single-model method names one model
         **{k: {"pair"} for k in ("pair", "pair.name", "pair.expert.path", "pair.amateur.path",
                                  "pair.amateur.early_exit")},
         "baseline": {"baseline"}}  # the baseline group: the part the baseline kind names (its dir_label)


def sweep_dir(args: list[str]) -> list[str]:
    """``args`` of a multirun with ``hydra.sweep.dir=outputs/multirun/<date>/<time>_<name>`` added (unless
    given), named by ``name_of`` for what its jobs share; a plain path, the same for every job."""
    given = [a for a in args if a not in MULTIRUN_FLAGS]
    if given == args or any(a.startswith("-") or a.lstrip("+~").startswith("hydra.sweep.dir=") for a in given):
        return args  # no multirun, another flag, or a sweep dir given
    swept = {part for a in given if is_sweep(a) for part in PARTS.get(a.lstrip("+~").split("=", 1)[0], set())}
    unswept = [a for a in given if not is_sweep(a) and not a.lstrip("+~").startswith("hydra")]
    try:
        cfg = composed("config", unswept, hydra=True)  # its hydra.overrides.task: ``unswept``
    except Exception:  # noqa: BLE001 - Hydra reports what does not compose
        return args
    return [*args, f"hydra.sweep.dir=outputs/multirun/{time.strftime('%Y-%m-%d/%H-%M-%S')}_{run_name(cfg, swept)}"]


def is_sweep(override: str) -> bool:
    """A multirun override with several values (``k=a,b``, ``k=range(...)``, ``k=choice(...)``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return OverridesParser.create().parse_overrides([override])[0].is_sweep_override()
    except Exception:  # noqa: BLE001 - Hydra reports an unreadable override itself
        return False


def register() -> None:
    """Make ``${cscore.run_name:}`` available to the configs (before Hydra composes them)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, run_name)


def resolve_pair(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """Apply the early-exit rule and name the pair after what runs (``pair_name``); returns lines to log."""
    name, early_exit, notes = pair_name(plain(cfg), overrides)
    with open_dict(cfg):
        if early_exit != cfg.pair.amateur.get("early_exit"):
            cfg.pair.amateur.early_exit = early_exit
        if name != cfg.pair.get("name"):
            cfg.pair.name = name
    return notes
