"""Every preset a user can choose under conf/ and its composed config, shared by the tests that
check each one (tests/unit/cli/test_config_schema.py, tests/integration/test_pins_config.py; one
xdist worker: support/groups.py): a preset composes once per session, not once per file."""

from __future__ import annotations

import copy
from importlib import resources


def options(group: str) -> list[str]:
    """The names of a config group's files (conf/<group>/*.yaml)."""
    folder = resources.files("cscore.conf") / group
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def presets() -> dict[str, tuple[str, list[str]]]:
    """{id: (config name, overrides)} for every file under conf/ a user can choose, the default run
    and the two stage configs."""
    out = {"default": ("config", []), "stage-cdm": ("cdm", []), "stage-t5score": ("t5score", [])}
    for group in ("method", "data", "pair", "prompt", "tracking"):
        out.update({f"{group}-{n}": ("config", [f"{group}={n}"]) for n in options(group)})
    out.update({f"judge_prompt-{n}": ("config", ["method=cd_judge", f"judge_prompt={n}"])
                for n in options("judge_prompt")})
    out.update({f"range-{n}": ("config", ["method=cd_judge", f"range={n}"]) for n in options("range")})
    out.update({f"baseline-{n}": ("config", ["method=baseline", f"baseline={n}"]) for n in options("baseline")})
    out.update({f"sweep-{n}": ("config", [f"+sweep={n}"]) for n in options("sweep")})
    return out


COMPOSED: dict = {}  # (config name, overrides) -> its composed config


def composed(name: str, overrides: list[str]):
    """The config ``name`` composed from cscore.conf with ``overrides`` (their names made
    canonical, as ``cscore run`` does), its ``hydra`` node included: a copy of this session's one
    compose of it."""
    from hydra import compose, initialize_config_module

    from cscore.cli.baseline_names import canonical_names

    key = (name, tuple(overrides))
    if key not in COMPOSED:
        with initialize_config_module(config_module="cscore.conf", version_base="1.3"):
            COMPOSED[key] = compose(name, overrides=canonical_names(overrides), return_hydra_config=True)
    return copy.deepcopy(COMPOSED[key])
