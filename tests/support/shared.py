"""Expensive read-only fixtures built once per test run, also under pytest-xdist: the first
worker to ask builds the value in the run's common temp folder (the parent of every worker's
basetemp) under a file lock; the others wait on the lock and read what it wrote. Without xdist,
the session's own temp folder. The value must be JSON (paths as strings); what it points to
is shared: copy before changing anything in it."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Callable

from cscore.files import file_lock

DONE = "value.json"


def once_per_run(tmp_path_factory, name: str, build: Callable[[Any], Any]):
    """build(folder) -> a JSON value, called once per run for ``name``; its value for everyone."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    with file_lock(root.with_name(root.name + ".lock")):
        done = root / DONE
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a build that failed half way
            root.mkdir(parents=True)
            value = build(root)
            done.write_text(json.dumps(value))
            return value
    return json.loads(done.read_text())
