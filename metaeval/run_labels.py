"""Short names of compared runs: the config values in which they differ (``method.gamma=0.1``), a
differing config group by its preset (``method=cd_judge``)."""

from __future__ import annotations

import json

SKIP = ("hydra.", "cache.", "runtime.progress", "runtime.shard")  # where a run is kept, how it reports: no point
LONGEST = 40  # characters of a value in a name; a longer one keeps its end (a path's file name)


def flat(config: dict, prefix: str = "", lists_as_json: bool = True) -> dict:
    """``{"a.b": value}`` for every leaf of ``config``; lists as JSON (or as they are)."""
    out = {}
    for k, v in (config or {}).items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}.", lists_as_json))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, default=str) if lists_as_json and isinstance(v, list) else v
    return out


def preset(group) -> str | None:
    """The name a config group goes by: its ``variant`` (a method preset), else its ``name``."""
    if not isinstance(group, dict):
        return None
    name = group.get("variant") or group.get("name")
    return None if name is None else str(name)


def shown(value) -> str:
    text = "-" if value is None else repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= LONGEST else "…" + text[-(LONGEST - 1):]


def run_labels(configs: list[dict], folders: list[str]) -> list[str]:
    """One label per config: the differing presets, then the keys that differ among runs of the key's
    group's preset; the folder name where nothing differs, ``<folder>: <label>`` where labels repeat."""
    flats = [flat(c) for c in configs]
    groups = [g for g in dict.fromkeys(k for c in configs for k in c)
              if any(preset(c.get(g)) is not None for c in configs)]
    named = [g for g in groups if len({preset(c.get(g)) for c in configs}) > 1]
    keys = [k for k in dict.fromkeys(k for f in flats for k in f) if not k.startswith(SKIP)]
    labels = []
    for c, mine in zip(configs, flats):
        peers = {g: [f for f, o in zip(flats, configs) if preset(o.get(g)) == preset(c.get(g))] for g in groups}
        parts = [f"{g}={shown(preset(c.get(g)))}" for g in named]
        for k in keys:
            group, _, tail = k.partition(".")
            if group in peers and tail in ("name", "variant"):  # the preset, named above where it differs
                continue
            if len({repr(f.get(k)) for f in peers.get(group, flats)}) > 1:
                parts.append(f"{k}={shown(mine.get(k))}")
        labels.append(" ".join(parts))
    labels = [lb or folder for lb, folder in zip(labels, folders)]
    if len(set(labels)) < len(labels):  # the same point twice: the folders tell them apart
        labels = [lb if lb == folder else f"{folder}: {lb}" for lb, folder in zip(labels, folders)]
    return labels
