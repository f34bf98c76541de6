"""The configuration reference (docs/reference/config.md), generated from the schema: every key,
its type, default, what it may be and its meaning. Never written by hand: scripts/config_reference.py
writes the page and the MkDocs hook docs/hooks/config_reference.py makes it at each build."""

from __future__ import annotations

import sys
from dataclasses import MISSING, fields, is_dataclass
from importlib import resources

import yaml

HEADER = """# Configuration reference

Generated from the schema (`config/run.py`, `config/groups.py`, each loader's `Options` in
`data/`, each method's `Params` in `scorers/methods/`, `training/params.py`, the baselines' settings) by
`scripts/config_reference.py`; do not edit by hand. The YAML presets under `conf/` choose
values; a setting not in a preset keeps the default written here. Any key can be set on the
command line, e.g. `cscore run runtime.token_budget=auto method.gamma=0.2`.
"""
COLUMNS = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n"


def escape(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


def type_name(t) -> str:
    text = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    return text.replace("|", "or")


def cell(value) -> str:
    """A value as it is written in YAML, on one line of a table."""
    if is_dataclass(value):
        return ""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()
    if len(text) > 60:
        text = text[:57] + "..."
    return escape(f"`{text}`")


def default_value(f):
    return f.default_factory() if f.default is MISSING else f.default


def rows(cls, prefix: str) -> list[str]:
    """One table row per setting of ``cls`` (nested dataclasses: their settings, with a dotted key)."""
    out = []
    for f in fields(cls):
        value = default_value(f)
        if f.metadata.get("section"):  # its own tables (data.options: data_options)
            continue
        if is_dataclass(value):
            out += rows(type(value), f"{prefix}{f.name}.")
            continue
        out.append(f"| `{prefix}{f.name}` | {type_name(f.type)} | {cell(value)} "
                   f"| {escape(describe(f.metadata.get('spec')))} | {escape(f.metadata.get('doc', ''))} |")
    return out


def table(title: str, text: str, cls, prefix: str) -> str:
    return f"\n## {title}\n\n{text}\n\n{COLUMNS}" + "\n".join(rows(cls, prefix)) + "\n"


def run_sections() -> str:
    from cscore.config.run import RunSettings

    out = "".join(table(f"`{f.name}`", f.metadata["doc"].capitalize() + ".", type(value), f"{f.name}.")
                  for f in fields(RunSettings) if is_dataclass(value := default_value(f)))
    top = [r for r in rows(RunSettings, "") if "." not in r.split("`")[1]]
    return out + "\n## Top-level keys\n\n" + COLUMNS + "\n".join(top) + "\n"


def group_sections() -> str:
    from cscore.config.groups import Data, JudgePrompt, Prompt, Tracking
    from cscore.config.run import Pair

    out = ""
    for name, cls in (("pair", Pair), ("data", Data), ("prompt", Prompt), ("judge_prompt", JudgePrompt),
                      ("tracking", Tracking)):
        text = (cls.__doc__ or "").split("\n\n")[0].strip() + " Defaults here; each preset sets its own."
        out += table(f"`{name}` (group)", escape(" ".join(text.split())), cls, f"{name}.")
        out += data_options() if name == "data" else ""
    return out


def data_options() -> str:
    """Each dataset's own options: its loader's ``Options`` (``data.<key>``)."""
    from cscore.data.registry import LOADERS

    out = ""
    for name, loader in LOADERS.items():
        where = f"`{loader.Options.__name__}` in `data/{loader.Options.__module__.rsplit('.', 1)[-1]}.py`"
        out += f"\n### `data={name}`\n\n"
        if not fields(loader.Options):
            out += "No options of its own.\n"
            continue
        out += f"Its loader's options ({where}).\n\n{COLUMNS}" + "\n".join(rows(loader.Options, "data.")) + "\n"
    return out


def method_presets(name: str) -> str:
    """' Presets: method=X (sets a, b).' for the conf/method/ files that build on method ``name``."""
    found = []
    for file in sorted(resources.files("cscore.conf").joinpath("method").iterdir(), key=lambda f: f.name):
        preset = yaml.safe_load(file.read_text()) if file.name.endswith(".yaml") else None
        stem = file.name.removesuffix(".yaml")
        if preset and stem != name and f"/schema/method/{name}@_here_" in (preset.get("defaults") or []):
            keys = ", ".join(k for k in preset if k != "defaults")
            found.append(f"`method={stem}` (sets {keys})")
    return f" Presets: {'; '.join(found)}." if found else ""


def method_sections() -> str:
    from cscore.scorers import methods

    out = "\n# Methods (`method=<name>`)\n\nEach method's `Params` (its module in `scorers/methods/`).\n"
    for name, method in methods.METHODS.items():
        doc = method.Params.__doc__ or ""
        # the dataclass's own signature text: the module's first paragraph instead
        if doc.startswith(f"{method.Params.__name__}("):
            doc = (sys.modules[method.__module__].__doc__ or "").split("\n\n")[0]
        doc = " ".join(doc.split())
        doc = (doc or f"`scorers/methods/{name}.py`.") + method_presets(name)
        out += table(f"`method={name}`", escape(doc), method.Params, "method.")
    return out


def describe(spec) -> str:
    return spec.describe() if hasattr(spec, "describe") else ""


def baseline_sections() -> str:
    from cscore.scorers.baselines import BASELINES
    from cscore.scorers.methods.params import specs_of

    out = "\n# Baselines (`method=baseline baseline=<name>`)\n\nThe defaults are the presets in `conf/baseline/`.\n"
    for name, baseline in BASELINES.items():
        preset = yaml.safe_load((resources.files("cscore.conf") / "baseline" / f"{name}.yaml").read_text())
        lines = [
            f"| `baseline.{name}.{key}` | {type_name(getattr(spec, 'kind', ''))} "
            f"| {cell((preset or {}).get(key))} | {escape(describe(spec))} | |"
            for key, spec in specs_of(baseline.Params).items()
        ]
        out += f"\n## `baseline={name}`\n\n{COLUMNS}" + "\n".join(lines) + "\n"
    return out


def stage_sections() -> str:
    from cscore.training.params import CdmGenerate, CdmTrain, T5ScoreTrain

    out = "\n# Stage commands\n"
    for title, cls, prefix in (("`cscore cdm generate`", CdmGenerate, "cdm.generate."),
                               ("`cscore cdm train`", CdmTrain, "cdm.train."),
                               ("`cscore t5score train`", T5ScoreTrain, "t5score.train.")):
        out += table(title, escape(" ".join((cls.__doc__ or "").split())), cls, prefix)
    return out


def config_reference_markdown() -> str:
    """The whole reference page, in Markdown."""
    return (HEADER + "\n# Run settings (`cscore run`)\n" + run_sections() + group_sections() + method_sections()
            + baseline_sections() + stage_sections())
