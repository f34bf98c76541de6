"""Config pins: every preset a user can choose, composed as ``cscore run`` composes it, against the
snapshot in tests/integration/pins/config/ (issue 21: keep every config key through the rebuild).

One snapshot per preset: each ``method=``, ``data=``, ``pair=``, ``prompt=``, ``tracking=`` and
``+sweep=`` file, each ``judge_prompt=`` and ``range=`` with method=cd_judge, each ``baseline=``
with method=baseline, the default run, and the two stage configs (conf/cdm.yaml,
conf/t5score.yaml, as ``cscore cdm`` / ``cscore t5score`` compose them). A snapshot holds the
overrides, the resolved config without the ``hydra`` node, key order kept (a method's parameters
are signed in config order), after the run's pair rule (``cli.run.resolve_pair``); for a run, the
run directory's name part (``<data>_<models>_<method>``); for a sweep, its
``hydra.sweeper.params`` (the sweep's whole content).

A mismatch prints a unified diff. Regenerate after an intended change:
``CSCORE_UPDATE_PINS=1 python -m pytest tests/integration/test_pins_*.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf, open_dict

from cscore.tests.support.presets import composed, presets

PINS = Path(__file__).parent / "pins" / "config"
UPDATE = os.environ.get("CSCORE_UPDATE_PINS") == "1"


def dump(record: dict) -> str:
    return yaml.safe_dump(record, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def run_record(overrides: list[str]) -> dict:
    """What ``cscore run <overrides>`` works with: the names made canonical (baseline aliases),
    composed from cscore.conf, the hydra node off, the pair rule applied, then resolved."""
    from cscore.cli.baseline_names import canonical_names
    from cscore.cli.names import name_of
    from cscore.cli.run import resolve_pair

    cfg = composed("config", overrides)  # tests/support/presets.py: test_config_schema.py's compose too
    overrides = canonical_names(overrides)
    hydra = OmegaConf.to_container(cfg.hydra, resolve=False)
    with open_dict(cfg):
        del cfg["hydra"]
    resolve_pair(cfg, overrides)
    config = OmegaConf.to_container(cfg, resolve=True)
    record = {"overrides": overrides, "run_name": name_of(config, hydra["runtime"]["choices"], overrides, set())}
    if hydra["sweeper"].get("params"):
        record["sweeper_params"] = hydra["sweeper"]["params"]
    record["config"] = config
    return record


def stage_record(name: str) -> dict:
    """A stage command's config, composed by that command's own function."""
    from cscore.cli import cdm_cmd, t5score_cmd

    cfg = {"cdm": cdm_cmd.compose, "t5score": t5score_cmd.compose}[name]([])
    return {"overrides": [], "config": OmegaConf.to_container(cfg, resolve=True)}



PRESETS = presets()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_config_is_pinned(name, pin_snapshot):
    config_name, overrides = PRESETS[name]
    record = run_record(overrides) if config_name == "config" else stage_record(config_name)
    pin_snapshot(PINS / f"{name}.yaml", dump(record))


def test_every_snapshot_belongs_to_a_preset():
    """A preset removed or renamed leaves its snapshot behind: that is a change to a config key too."""
    stale = sorted(p.stem for p in PINS.glob("*.yaml") if p.stem not in PRESETS)
    if UPDATE:
        for name in stale:
            (PINS / f"{name}.yaml").unlink()
        return
    assert not stale, f"snapshots without a preset (removed or renamed config?): {stale}"
