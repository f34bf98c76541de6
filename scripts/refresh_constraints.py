"""Refresh constraints.txt: the exact versions the test suite judges with, upgraded as a tested step.

    python scripts/refresh_constraints.py                 # fresh venv, newest allowed versions, whole suite
    python scripts/refresh_constraints.py -- -m "not slow"   # pytest arguments after --: a quicker try

The README's test command installs with ``-c constraints.txt`` (so does .ci/run), so a fresh
machine tests with the versions the suite last passed with, whatever the index serves that day;
the package's own requirements (pyproject.toml) stay ranges, so users get new releases. This
script makes a new virtual environment in a temporary folder, runs the README's test command there
*without* the constraints file (pip takes the newest versions pyproject allows; torch stays the
README's pinned CPU build), and rewrites constraints.txt from that environment's ``pip freeze``
only when the suite passes. A failing run leaves the file alone and prints pytest's summary: fix
the code (or cap the range in pyproject.toml, saying why), then run this again. A refresh run with
pytest arguments after ``--`` only reports: it never writes the file from less than the whole suite.

The header of the written file records the date, the Python, the pip, the command and pytest's
closing line. Run it from the repository root of a checkout on the machine kind CI uses.
"""

from __future__ import annotations

import argparse
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "constraints.txt"
FLAG = " -c constraints.txt"


def readme_test_command(readme: Path = REPO / "README.md") -> str:
    """The README's second code block: its test command (installs, then pytest)."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", readme.read_text(), re.M | re.S)
    command = blocks[1].strip()
    if FLAG not in command:
        raise SystemExit(f"README's test command does not install with{FLAG}: {command}")
    return command


def unconstrained(command: str, pytest_args: list[str]) -> str:
    """The test command without the constraints file; ``pytest_args`` replace pytest's own."""
    command = command.replace(FLAG, "")
    if pytest_args:
        head, _, _ = command.rpartition("python -m pytest")
        command = head + "python -m pytest " + " ".join(shlex.quote(a) for a in pytest_args)
    return command


def frozen(python: Path) -> list[str]:
    """``name==version`` of every package in the environment but the project itself (local build
    labels dropped: ``torch==2.13.0+cpu`` is written ``torch==2.13.0``, which a CUDA build also meets)."""
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                         text=True, check=True).stdout
    lines = [re.sub(r"\+[\w.]+$", "", x.strip()) for x in out.splitlines()]
    return sorted((x for x in lines if "==" in x and not x.startswith("cscore==")), key=str.lower)


def closing_line(log: str) -> str:
    """pytest's last summary line (``N passed, M skipped in Xs``)."""
    found = [x.strip("= ") for x in log.splitlines() if re.search(r"\b(passed|failed|error)\b.* in [\d.]+s", x)]
    return found[-1] if found else "(no pytest summary)"


def header(python: Path, command: str, summary: str, seconds: float) -> list[str]:
    pip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True).stdout.split()
    return [
        "# The exact versions the test suite last passed with (the README's test command and .ci/run",
        "# install with -c constraints.txt). Written by scripts/refresh_constraints.py, never by hand:",
        "# it installs the newest versions pyproject.toml allows in a fresh venv, runs the whole suite",
        "# and rewrites this file only when it passes.",
        f"# refreshed: {date.today().isoformat()} on {platform.machine()}, Python {platform.python_version()}, "
        f"pip {pip[1] if len(pip) > 1 else '?'}",
        f"# command: {command}",
        f"# suite: {summary} ({seconds / 60:.0f} min)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the venv (its path is printed)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter the venv is made from")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments instead of the README's (after --)")
    args = parser.parse_args(argv)
    command = unconstrained(readme_test_command(), args.pytest_args)
    venv = Path(tempfile.mkdtemp(prefix="cscore-refresh-")) / "venv"
    subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env_prefix = f"export VIRTUAL_ENV={shlex.quote(str(venv))} PATH={shlex.quote(str(venv / 'bin'))}:\"$PATH\"; "
    print(f"venv: {venv}\nrunning: {command}", flush=True)
    start = time.monotonic()
    run = subprocess.run(["bash", "-c", env_prefix + command], cwd=REPO, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seconds = time.monotonic() - start
    (venv.parent / "suite.log").write_text(run.stdout)
    summary = closing_line(run.stdout)
    print(f"{summary}; exit {run.returncode} after {seconds:.0f} s (log: {venv.parent / 'suite.log'})")
    pins = frozen(python) if python.exists() else []
    if run.returncode != 0 or args.pytest_args:
        why = "the suite failed" if run.returncode else "not the whole suite (pytest arguments given)"
        print(f"constraints.txt left as it is: {why}. Newest versions tried:\n  " + "\n  ".join(pins))
    else:
        old = set(CONSTRAINTS.read_text().splitlines()) if CONSTRAINTS.exists() else set()
        changed = [p for p in pins if p not in old]
        CONSTRAINTS.write_text("\n".join([*header(python, command, summary, seconds), *pins]) + "\n")
        print(f"constraints.txt rewritten: {len(pins)} pins, {len(changed)} changed: " + ", ".join(changed))
    if not args.keep:
        subprocess.run(["rm", "-rf", str(venv)])
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
