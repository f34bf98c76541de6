"""``cscore run --help``: a short page (at most 100 columns) with the config groups read from ``conf/``,
pointing to ``--help-all`` (Hydra's help), ``--cfg job`` and the configuration reference."""

from __future__ import annotations

import textwrap

from cscore.cli import compose

WIDTH = 100
HEAD = """usage: cscore run [overrides]              one run: load, score, meta-evaluate, write
       cscore run -m key=a,b [overrides]    a sweep: one run per point of the grid (docs/sweeps.md)

Score a dataset with a model pair and a method; an override is group=option or key=value.
  cscore run                                    the demo data, the offline SmolLM2 pair, contrast
  cscore run data=summeval pair=qwen_3b_0.5b method=cd_score
  cscore run -m method.gamma=0.05,0.1,0.2 runtime.threads=1

config groups (group=option; conf/<group>/<option>.yaml):"""
TAIL = """
settings (key=value): any key that `cscore run --cfg job` prints, e.g. method.gamma=0.2
  every key, its type, default and meaning: docs/reference/config.md (docs/configuration.md)

more:
  cscore run --cfg job [overrides]   the composed config of this command, nothing run
  cscore run --help-all              Hydra's help: the groups and the whole default config
  cscore run --hydra-help            Hydra's own flags (--multirun, --config-dir, --info, ...)
  cscore list                        what runs here: datasets, pairs (offline or not), methods"""


def groups() -> dict[str, list[str]]:
    """{group: its options}, from the YAML files under ``conf/`` (``hydra/launcher`` included)."""
    root = compose.conf_folder()
    names = [str(p.relative_to(root)) for p in [*root.iterdir(), *root.glob("hydra/*")]
             if p.is_dir() and p != root / "hydra"]
    return {name: found for name in sorted(names) if (found := compose.options(name))}


def text() -> str:
    found = groups()
    pad = max(len(g) for g in found) + 4
    lines = [HEAD]
    for group, options in found.items():
        lines += textwrap.wrap(", ".join(options), WIDTH, initial_indent=f"  {group}".ljust(pad),
                               subsequent_indent=" " * pad, break_on_hyphens=False)
    return "\n".join(lines) + "\n" + TAIL
