"""Compose and validate ``cscore run`` configs before Hydra makes a run directory: a typo, a bad
value, a model that cannot load, a missing launcher or an unreadable data file is one line within
a second. A multirun checks every point of its command-line grid before the first job starts."""

from __future__ import annotations

from pathlib import Path

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, OverrideParseException
from omegaconf import OmegaConf

from cscore.cli.compose import composed, options, plain
from cscore.cli.resume import MULTIRUN_FLAGS
from cscore.errors import ConfigError
from cscore.files import cache_root, folder_problem, nearest
from cscore.registry import suggest

MAX_POINTS = 512  # larger command-line grids are checked job by job instead


def _missing_key_error(overrides, original: Exception) -> ConfigError:
    """Explain a failed composition: an unknown key (with a close match) or an unknown option."""
    groups = [o for o in overrides if "." not in o.key_or_group and not o.is_add()]
    try:
        base = composed("config", [o.input_line for o in groups])
    except ConfigCompositionException as err:  # an unknown option of a group
        for o in groups:
            known, value = options(o.key_or_group), o.value()
            if known is not None and isinstance(value, str) and value not in known:
                return ConfigError(f"no {o.key_or_group} config {value!r}{suggest(value, known)}; "
                                   f"available: {', '.join(known)}")
        return ConfigError(str(err).splitlines()[0])
    for o in overrides:
        if o.is_add() or o.is_delete() or "." not in o.key_or_group:
            continue
        parent, _, leaf = o.key_or_group.rpartition(".")
        node = OmegaConf.select(base, parent, default=None)
        if node is None or not OmegaConf.is_dict(node):
            return ConfigError(f"no setting {o.key_or_group}: {parent} is not a section of the config")
        if leaf not in node:
            hint = suggest(leaf, list(node.keys()), prefix=f"{parent}.")
            return ConfigError(f"no setting {o.key_or_group}{hint}; "
                               f"to add a new key on purpose write +{o.key_or_group}=...")
    return ConfigError(str(original).splitlines()[0])


def points(args: list[str]) -> list[list[str]] | None:
    """The override lists of every job the command line asks for (None: leave it to Hydra)."""
    rest = [a for a in args if a not in MULTIRUN_FLAGS]
    multirun = rest != args
    if any(a.startswith("-") for a in rest):  # --cfg, --help, --config-dir, ...: Hydra's business
        return None
    rest = [a for a in rest if not a.lstrip("+~").startswith("hydra")]  # launcher / sweeper / dirs
    parsed = OverridesParser.create().parse_overrides(rest)
    if not multirun:
        return [rest] if not any(o.is_sweep_override() for o in parsed) else None
    jobs = BasicSweeper.split_arguments(parsed, None)[0]  # no batch size: one batch
    return jobs if len(jobs) <= MAX_POINTS else jobs[:1]


OUTPUT_DIRS = ("hydra.run.dir", "hydra.sweep.dir")


def check_output_dirs(args: list[str]) -> None:
    """A ConfigError when ``hydra.run.dir=`` / ``hydra.sweep.dir=`` names a place no folder can be made in."""
    for arg in args:
        key, _, value = arg.lstrip("+~").partition("=")
        if key not in OUTPUT_DIRS or not value:
            continue
        path = Path(value.strip("'\"").split("${")[0] or ".").expanduser()  # the part before an interpolation
        if (problem := folder_problem(path)) is not None:
            raise ConfigError(f"{key}={value}: {problem}")


LAUNCHERS = {"slurm": "hydra_plugins.hydra_submitit_launcher", "slurm_warm": "hydra_plugins.hydra_submitit_launcher"}


def installed(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # not even its parent package
        return False


def check_launcher(args: list[str]) -> bool:
    """Whether the jobs run on SLURM (``hydra/launcher=slurm`` or ``slurm_warm``); a ConfigError when that
    needs a plugin that is not installed, or SlurmUnavailable when SLURM's commands are not on PATH."""
    from cscore.cli.slurm_check import check_slurm_tools

    slurm = [value for key, _, value in (a.lstrip("+~").partition("=") for a in args)
             if key == "hydra/launcher" and value in LAUNCHERS]
    for value in slurm:
        if not installed(LAUNCHERS[value]):
            raise ConfigError(f"hydra/launcher={value} needs Hydra's submitit launcher, which is not installed: "
                              "pip install 'cscore[slurm]' (hydra-submitit-launcher==1.2.0)")
        check_slurm_tools()
    return bool(slurm)


def check_cache(run) -> None:
    """A ConfigError when a ``gguf:`` model would be converted into a cache folder that cannot be
    made, or on a disk with less room than the GGUF file takes (an existing folder is left to the run)."""
    import shutil

    from cscore.run.pair_check import needed_models

    ggufs = [spec for spec, _ in needed_models(run).values() if spec.startswith("gguf:")]
    folder = cache_root() / "models"
    if not ggufs or folder.is_dir():
        return
    where = f"{ggufs[0]} is converted once into {folder} (the cache: $CSCORE_CACHE, else ~/.cache/cscore)"
    if (problem := folder_problem(folder)) is not None:
        raise ConfigError(f"{where}, but {problem}; set CSCORE_CACHE to a writable folder")
    ancestor = nearest(folder)
    need, free = gguf_bytes(ggufs[0]), shutil.disk_usage(ancestor).free
    if need > free:
        raise ConfigError(f"{where}, which needs more than {need / 1e6:.0f} MB, but {ancestor} has "
                          f"{free / 1e6:.1f} MB free; set CSCORE_CACHE to a folder with room")


def gguf_bytes(spec: str) -> int:
    """The size of the GGUF file(s) a ``gguf:`` spec names (0 when they cannot be found)."""
    from cscore.scorers.models import specs

    rest = spec[len("gguf:"):]
    try:
        found = [Path(rest).expanduser()] if specs.names_a_path(rest) else specs.packaged_files(rest)
        return sum(p.stat().st_size for p in found)
    except (OSError, specs.ModelSpecError):
        return 0


def check(args: list[str]) -> None:
    """Raise ConfigError for the first bad override or value among the jobs ``args`` asks for."""
    from cscore.data.registry import PRELOADED, check_config, preload
    from cscore.data.schema import DataError
    from cscore.run import kinds, launch, pair_check
    from cscore.run.validate import validate

    PRELOADED.clear()  # an earlier command's (in the same process), never taken
    check_output_dirs(args)
    slurm = check_launcher(args)

    try:
        jobs = points(args) or []
    except OverrideParseException as err:
        raise ConfigError(f"cannot read the overrides: {str(err).splitlines()[0]}") from None
    for job in jobs:
        try:
            cfg = composed("config", job)
        except ConfigCompositionException as err:
            raise _missing_key_error(OverridesParser.create().parse_overrides(job), err) from None
        try:
            run = validate(cfg)
            c = plain(cfg)
            check_config(c["data"])  # the data section as its loader will read it, before any file is read
            launch.check_settings(run)  # runtime.shards / shard / devices; then the kind (imports it)
            if run.runtime.shards > 1:
                launch.check_kind(run, kinds.of_method(run.method.name))
            pair_check.check(c, run)
            check_cache(run)
            preload(run.data)  # the data file(s) read as the loader will, before torch loads; the job takes them
            if slurm and run.runtime.shards > 1 and run.runtime.devices is None:  # before anything is submitted
                launch.check_shared(run)  # (a job checks it again: run/launch.py check)
        except (ConfigError, DataError) as err:
            where = f" (multirun point {' '.join(job)})" if len(jobs) > 1 else ""
            raise ConfigError(f"{err}{where}") from None
