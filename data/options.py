"""The check of a loader's option keys: an unknown one is a DataError naming it as ``data.<key>``."""

from __future__ import annotations

from collections.abc import Mapping

from cscore.data.schema import DataError
from cscore.registry import unknown_keys

# Keys of cfg.data that the runner reads itself; every other key is handed to the loader as an option.
RUNNER_KEYS = ("name", "path", "template", "split_by", "judge_aspect")


def loader_options(data: Mapping) -> dict:
    """The loader's options in a composed ``cfg.data`` section: every key but ``RUNNER_KEYS``."""
    return {k: v for k, v in data.items() if k not in RUNNER_KEYS}


def check_options(options: dict, allowed, dataset: str, prefix: str = "data.") -> dict:
    """``options`` with every allowed key present (None when not given); a DataError on any other key."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        keys = list(allowed)
        if prefix == "data.":  # read by the runner, so valid on the command line too
            keys += [k for k in RUNNER_KEYS if k != "name" and k not in keys]
        raise DataError(unknown_keys(f"data={dataset}", unknown, keys, prefix))
    return {k: options.get(k) for k in allowed}
