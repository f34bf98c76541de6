"""Time each command of the README's tour ("A short tour") as a user runs it, and print a
markdown table of the measured seconds with the date and machine.

    python scripts/tour_times.py [--only 1,4] [--list] [--timeout 3600] [--threads 1] [--keep DIR]

Each line runs through the CLI (``python -m cscore.cli.main``, so PYTHONPATH picks the checkout)
with ``runtime.threads=<--threads>`` added, in a fresh temporary folder (its ``outputs/``) and
with a cold statistics cache (``CSCORE_STATS_CACHE`` a new empty folder per line); the converted
GGUF models stay cached (converting them is the install's cost, not a run's). ``cscore report
<dir>`` gets the multirun folder an earlier line of this session wrote. Lines that need what
this machine lacks (a GPU, your own ratings file) are listed as skipped, with why.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_lines(readme: Path = README) -> list[str]:
    """The commands of the first code block under "## A short tour", continuation lines joined,
    comments removed."""
    text = readme.read_text(encoding="utf-8")
    section = text.split("## A short tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    if block is None:
        raise SystemExit(f"{readme}: no bash block under '## A short tour'")
    joined = re.sub(r"\\\n\s*", " ", block.group(1))
    out = []
    for raw in joined.splitlines():
        args = shlex.split(raw, comments=True)
        if args:
            out.append(shlex.join(args))
    return out


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{os.cpu_count()} CPUs ({cpu}), {system}, python {platform.python_version()}"


def skip_reason(args: list[str], cwd: Path) -> str | None:
    """Why a tour line cannot run here, or None."""
    for a in args:
        if a.startswith("runtime.device=cuda"):
            import torch

            if not torch.cuda.is_available():
                return "needs a CUDA device"
        if a.startswith("data.path="):
            path = Path(a.split("=", 1)[1])
            if not (path if path.is_absolute() else cwd / path).exists():
                return f"needs your own file {path}"
    return None


def multirun_dir(root: Path) -> Path | None:
    """The newest multirun folder under ``root/outputs`` (one holding multirun.yaml)."""
    found = sorted(root.glob("outputs/**/multirun.yaml"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else None


def command_of(line: str, cwd: Path, threads: int) -> tuple[list[str] | None, str | None]:
    """(argv to run, why not): ``cscore run ...`` with runtime.threads, ``cscore report <dir>``
    with the session's multirun folder."""
    args = shlex.split(line)
    if not args or args[0] != "cscore":
        return None, "not a cscore command"
    rest = args[1:]
    if rest[:1] == ["run"]:
        rest = rest + [f"runtime.threads={threads}"]
    elif rest[:1] == ["report"]:
        runs = multirun_dir(cwd)
        if runs is None:
            return None, "no multirun folder from an earlier line"
        rest = ["report", str(runs)] + [a for a in rest[2:] if "<" not in a]
    why = skip_reason(rest, cwd)
    if why:
        return None, why
    return [sys.executable, "-m", "cscore.cli.main", *rest], None


def time_line(argv: list[str], cwd: Path, timeout: float) -> tuple[float, int | str]:
    env = dict(os.environ)
    env["CSCORE_STATS_CACHE"] = tempfile.mkdtemp(prefix="stats-", dir=cwd)  # cold, per line
    start = time.perf_counter()
    try:
        res = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, f"timed out after {timeout:.0f}s"
    seconds = time.perf_counter() - start
    if res.returncode:
        tail = res.stdout.strip().splitlines()[-1:] or [""]
        print(f"  exit {res.returncode}: {tail[0]}", file=sys.stderr)
    return seconds, res.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="comma-separated line numbers (1-based, as --list shows)")
    ap.add_argument("--list", action="store_true", help="print the tour's lines and exit")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per line")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep", default=None, help="run in this folder (kept) instead of a temporary one")
    args = ap.parse_args(argv)
    lines = tour_lines()
    if args.list:
        for i, line in enumerate(lines, 1):
            print(f"{i:2d}  {line}")
        return 0
    pick = [int(x) for x in args.only.split(",")] if args.only else list(range(1, len(lines) + 1))
    bad = [i for i in pick if not 1 <= i <= len(lines)]
    if bad:
        raise SystemExit(f"--only: no tour line {bad[0]} (there are {len(lines)})")
    with tempfile.TemporaryDirectory(prefix="cscore-tour-") as tmp:
        cwd = Path(args.keep) if args.keep else Path(tmp)
        cwd.mkdir(parents=True, exist_ok=True)
        rows = []
        for i in pick:
            cmd, why = command_of(lines[i - 1], cwd, args.threads)
            if cmd is None:
                rows.append((i, lines[i - 1], "skipped", why))
                print(f"[{i}] skipped: {why}", file=sys.stderr)
                continue
            print(f"[{i}] {lines[i - 1]}", file=sys.stderr)
            seconds, code = time_line(cmd, cwd, args.timeout)
            rows.append((i, lines[i - 1], f"{seconds:.0f}", "ok" if code == 0 else f"failed ({code})"))
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Tour times, {stamp}, {machine()}, runtime.threads={args.threads}, cold statistics cache:\n")
    print("| # | command | seconds | result |")
    print("|---:|---|---:|---|")
    for i, line, seconds, result in rows:
        print(f"| {i} | `{line}` | {seconds} | {result} |")
    return 0 if all(r[3] in ("ok",) or r[2] == "skipped" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
