"""Composing a config from ``conf/<name>.yaml`` and overrides: ``composed`` is the one place Hydra's
config module is opened; ``compose`` adds the one-line errors of a stage command."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from cscore.cli.exits import fail
from cscore.errors import ConfigError


def conf_folder() -> Path:
    """The folder of ``cscore.conf``, found, not imported (importing it registers the schema)."""
    return Path(__file__).parents[1] / "conf"


def options(group: str) -> list[str] | None:
    """The presets of a config group (``conf/<group>/*.yaml``) by name; None where there is no such group."""
    folder = conf_folder() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else None


def plain(node, resolve: bool = True) -> dict[str, Any]:
    """A config node (a mapping) as a plain dict, interpolations resolved unless ``resolve`` is false."""
    out = OmegaConf.to_container(node, resolve=resolve)
    if not isinstance(out, dict):
        raise TypeError(f"a config mapping was expected, not {type(out).__name__}")
    return cast("dict[str, Any]", out)


def composed(name: str = "config", overrides=(), *, hydra: bool = False) -> DictConfig:
    """``conf/<name>.yaml`` with ``overrides`` (``hydra``: with Hydra's own section); Hydra's errors pass through."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
        return hydra_compose(name, overrides=list(overrides), return_hydra_config=hydra)


def compose(name: str, overrides: list[str], sections: dict[str, dict]) -> DictConfig:
    """``conf/<name>.yaml`` with ``overrides``; a failure is a one-line ConfigError, one that names the
    closest setting for a misspelt key under one of ``sections`` ({section: its settings})."""
    from hydra.errors import ConfigCompositionException, OverrideParseException

    from cscore.registry import suggest

    try:
        return composed(name, overrides)
    except OverrideParseException as err:
        raise ConfigError(f"cannot read the overrides: {str(err).splitlines()[0]}") from None
    except ConfigCompositionException as err:
        for o in overrides:  # the usual mistake: a key that is not there
            key = o.lstrip("+~").split("=", 1)[0]
            parent, _, leaf = key.rpartition(".")
            known = sections.get(parent)
            if known is not None and not o.startswith("+") and leaf not in known:
                raise ConfigError(f"no setting {key}{suggest(leaf, known, prefix=parent + '.')}") from None
        raise ConfigError(str(err).splitlines()[0]) from None


def stage_of(argv: list[str], command: str, stages: tuple[str, ...], usage: str) -> str | None:
    """The stage of ``cscore <command> <stage> [overrides]``, with INFO logged to stderr; None once ``usage``
    is printed (no stage, ``help``, ``-h``); an unknown stage exits 2."""
    if argv[:1] not in ([], ["help"]) and argv[0] not in (*stages, "-h", "--help"):
        fail(f"unknown {command} command {argv[0]!r}; use cscore {command} {' | '.join(stages)} "
             f"(cscore {command} --help)", 2)
    if not argv or argv[0] == "help" or any(a in ("-h", "--help") for a in argv):
        print(usage)
        return None
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    return argv[0]


def checked(section: DictConfig, specs: dict, prefix: str) -> dict:
    """The settings of one section, each checked by its ``Param`` (one-line ConfigErrors)."""
    from cscore.scorers.methods.params import check_keys

    given = plain(section)
    check_keys(prefix, given, set(specs))
    return {k: spec.check(f"{prefix}.{k}", given.get(k)) for k, spec in specs.items()}
