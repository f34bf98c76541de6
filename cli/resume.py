"""The same command after a Ctrl-C or a failure resumes in the run directory it left (``failed.json``
under ``./outputs``, the same overrides), unless it names its directory or says ``resume=false``."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from cscore import rundir

OUTPUTS = Path("outputs")  # conf/config.yaml's hydra.run.dir / hydra.sweep.dir, relative to the working folder
MULTIRUN_FLAGS = ("-m", "--multirun")
UNSAFE = set("'\"\\$")  # a folder name Hydra's override grammar would read as something else


def earlier_dir(args: list[str], root: Path = OUTPUTS) -> list[str]:
    """``args`` with ``hydra.run.dir`` / ``hydra.sweep.dir`` set to the same command's unfinished directory, if any."""
    multirun = any(a in MULTIRUN_FLAGS for a in args)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    flags = [a for a in args if a.startswith("-") and a not in MULTIRUN_FLAGS]
    given = {a.lstrip("+~").split("=", 1)[0] for a in args}
    if flags or "hydra.run.dir" in given or "hydra.sweep.dir" in given or not root.is_dir():
        return args
    task = [a for a in args if a not in MULTIRUN_FLAGS and not a.lstrip("+~").startswith("hydra")]  # as Hydra records
    if any(a.lstrip("+~").replace(" ", "") in ("resume=false", "resume=False") for a in task):
        return args
    found = unfinished_sweep(root, task) if multirun else unfinished_run(root, task)
    if found is None or UNSAFE & set(str(found)):
        return args
    print(f"cscore: resuming the unfinished {'multirun' if multirun else 'run'} in {found} (the same command; "
          "resume=false starts a new one)", file=sys.stderr, flush=True)
    return [*args, f"{key}='{found}'"]


def unfinished_run(root: Path, task: list[str]) -> Path | None:
    """The latest run directory under ``root/<date>/`` with these overrides that failed and is not complete."""
    for failed in sorted(root.glob(f"*/*/{rundir.FAILED}"), reverse=True):
        folder = failed.parent
        got = loaded(folder / ".hydra" / "overrides.yaml")
        if folder.parent.name != "multirun" and isinstance(got, list) and [str(x) for x in got] == task \
                and not rundir.is_complete(folder):
            return folder
    return None


def unfinished_sweep(root: Path, task: list[str]) -> Path | None:
    """The latest multirun directory in ``root/multirun`` with these overrides and a failed, unfinished job."""
    for record in sorted((root / "multirun").glob("*/*/multirun.yaml"), reverse=True):
        folder = record.parent
        hydra = (loaded(record) or {}).get("hydra") or {}
        if list((hydra.get("overrides") or {}).get("task") or []) == task \
                and any(not rundir.is_complete(f.parent) for f in folder.glob(f"*/{rundir.FAILED}")):
            return folder
    return None


def loaded(file: Path):
    """The YAML in ``file``; None where it cannot be read."""
    try:
        return yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError):
        return None
