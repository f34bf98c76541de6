"""Score pins across a change (issue 21): record the scores of three real runs, then check after a
change that the same runs give bit-identical scores.

    python scripts/pin_scores.py record OUT.json [--runs demo,summeval_dev,judge_grid] [--root DIR] [--cache DIR]
    python scripts/pin_scores.py compare OUT.json [--dir NAME=RUN_OR_SWEEP_DIR ...] [--root DIR] [--cache DIR]

The runs (gguf:smollm2 with its early-exit amateur, offline):
  demo          cscore run                              (the default: demo set, contrast)
  summeval_dev  cscore run data=summeval split.use=dev  (160 rows; needs the shared SummEval file)
  judge_grid    cscore run -m method=cd_judge +sweep=cd_judge_grid data=demo split.use=dev
                'method.score_range=[1,5]'              (24 (lam, t) points on 16 demo rows, one judge pass)
  judge_released_grid  cscore run -m method=cd_judge_released method.lam=0.1,1.0 method.t=1,2
                data=demo split.use=dev                 (4 points, each its own greedy decode)
  sharded_2     cscore run runtime.devices=[cpu,cpu]    (the demo run as 2 CPU worker shards, merged)

``record`` stores per run and job the SHA-256 of every ``score.*`` column's float64 bytes, the
values themselves and their summary (n, finite, mean, min, max), the row ids' SHA-256, the
command, its wall time and the environment. ``compare`` re-runs each recorded run (or reads the run
directories given with ``--dir``) and prints per column "bit-identical" or the largest absolute
difference; exit status 1 on any difference (or a missing run, job, column or row), else 0.

Bit identity is only meaningful on the same machine with the same torch build (and the same
threads setting): float32 forward passes round differently on other CPUs, GPUs or BLAS kernels.
Each run uses a fresh statistics cache (``DIR/<run>`` under ``--cache DIR``; a comparison across a change
should not read statistics computed before it). Run directories go under ``--root``
(default outputs/pin_scores/<time>_<command>/, which git ignores)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
RUNS = {
    "demo": ["run"],
    "summeval_dev": ["run", "data=summeval", "split.use=dev"],
    "judge_grid": ["run", "-m", "method=cd_judge", "+sweep=cd_judge_grid", "data=demo", "split.use=dev",
                   "method.score_range=[1,5]"],
    "judge_released_grid": ["run", "-m", "method=cd_judge_released", "method.lam=0.1,1.0", "method.t=1,2",
                            "data=demo", "split.use=dev"],
    "sharded_2": ["run", "runtime.devices=[cpu,cpu]"],
}
NOTE = ("bit identity is only meaningful on the same machine with the same torch build: float32 forward "
        "passes round differently on other CPUs, GPUs or BLAS kernels")


def environment() -> dict:
    from importlib import metadata

    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True)
    return {"git_commit": commit.stdout.strip() or None, "git_dirty": bool(dirty.stdout.strip()),
            "cscore": version("cscore"), "torch": version("torch"), "transformers": version("transformers"),
            "numpy": version("numpy"), "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine(), "processor": platform.processor() or None, "cpus": os.cpu_count()}


def run_cscore(name: str, root: Path, cache: Path) -> tuple[Path, float]:
    """Run ``name`` into ``root/name`` with the statistics cache ``cache``: (its folder, seconds)."""
    args = RUNS[name]
    out = root / name
    where = f"hydra.sweep.dir={out}" if "-m" in args else f"hydra.run.dir={out}"
    env = dict(os.environ, CSCORE_STATS_CACHE=str(cache / name), OMP_NUM_THREADS="1")  # fresh per run
    log = root / f"{name}.log"
    print(f"{name}: cscore {' '.join(args)} ... (output in {log})", flush=True)
    start = time.perf_counter()
    with log.open("w") as f:
        command = [sys.executable, "-m", "cscore.cli.main", *args, "runtime.progress=60", "runtime.threads=1", where]
        res = subprocess.run(command, cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"pin_scores: {name} failed (exit {res.returncode}); see {log}")
    print(f"{name}: {seconds:.1f} s", flush=True)
    return out, seconds


def job_dirs(path: Path) -> dict[str, Path]:
    """{job label: run directory} of a run directory or a multirun folder; a multirun job is
    labelled by its overrides that not every job shares."""
    if (path / "metrics.json").is_file():
        return {"run": path}
    jobs = sorted((d for d in path.iterdir() if (d / "metrics.json").is_file()),
                  key=lambda d: (len(d.name), d.name))
    if not jobs:
        sys.exit(f"pin_scores: no finished run under {path}")
    given = {d: yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text()) or [] for d in jobs}
    common = set.intersection(*(set(o) for o in given.values()))
    return {" ".join(o for o in given[d] if o not in common) or d.name: d for d in jobs}


def column_digest(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    summary = {"n": int(values.size), "finite": int(finite.size)}
    if finite.size:
        summary.update(mean=float(finite.mean()), min=float(finite.min()), max=float(finite.max()))
    return {"sha256": hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest(), **summary,
            "values": values.tolist()}


def digest_run(run: Path) -> dict:
    """The row ids' SHA-256 and every score column's digest of one run directory."""
    table = pd.read_parquet(run / "scores.parquet")
    ids = "\n".join(map(str, table["id"])).encode()
    columns = {c: column_digest(table[c].to_numpy(dtype=np.float64)) for c in table.columns
               if c.startswith("score.")}
    return {"rows": len(table), "ids_sha256": hashlib.sha256(ids).hexdigest(), "columns": columns}


def digest(path: Path) -> dict:
    return {label: digest_run(d) for label, d in job_dirs(path).items()}


def new_root(given: str | None, command: str) -> Path:
    root = Path(given) if given else REPO / "outputs" / "pin_scores" / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{command}"
    root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def record(out: Path, names: list[str], root: Path, cache: Path) -> int:
    runs = {}
    for name in names:
        folder, seconds = run_cscore(name, root, cache)
        runs[name] = {"command": ["cscore", *RUNS[name]], "seconds": round(seconds, 1), "dir": str(folder),
                      "jobs": digest(folder)}
    rec = {"note": NOTE, "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"), "environment": environment(), "runs": runs}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rec, indent=1) + "\n")
    total = sum(r["seconds"] for r in runs.values())
    print(f"recorded {len(runs)} runs ({total:.0f} s in all) in {out}")
    return 0


def compare_column(want: dict, got: dict | None) -> tuple[bool, str]:
    """(the same bits, the line that says how they differ)."""
    if got is None:
        return False, "missing"
    if got["sha256"] == want["sha256"]:
        return True, "bit-identical"
    a, b = np.asarray(want["values"], dtype=np.float64), np.asarray(got["values"], dtype=np.float64)
    if a.shape != b.shape:
        return False, f"{b.size} values, {a.size} recorded"
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    diff = np.abs(a - b)[~same]
    worst = np.nanmax(diff) if np.isfinite(diff).any() else float("nan")
    return False, f"differs in {int((~same).sum())} of {a.size} values, max |diff| {worst:.3g}"


def compare_run(name: str, want: dict, got: dict) -> int:
    """Print one line per column; the number of differences."""
    bad = 0
    for label in sorted(set(want) | set(got)):
        w, g = want.get(label), got.get(label)
        if w is None or g is None:
            print(f"{name} [{label}]: {'not recorded' if w is None else 'missing'}")
            bad += 1
            continue
        if g["ids_sha256"] != w["ids_sha256"]:
            print(f"{name} [{label}]: other rows ({g['rows']} now, {w['rows']} recorded)")
            bad += 1
        for col in sorted(set(w["columns"]) | set(g["columns"])):
            if col not in w["columns"]:
                print(f"{name} [{label}] {col}: not recorded")
                bad += 1
                continue
            ok, line = compare_column(w["columns"][col], g["columns"].get(col))
            print(f"{name} [{label}] {col}: {line}")
            bad += not ok
    return bad


def compare(path: Path, dirs: dict[str, Path], root: Path | None, cache: Path | None) -> int:
    rec = json.loads(path.read_text())
    now = environment()
    for key in ("torch", "platform", "machine", "processor"):
        if rec["environment"].get(key) != now.get(key):
            print(f"warning: {key} differs ({rec['environment'].get(key)} recorded, {now.get(key)} now): {NOTE}")
    bad = 0
    for name, want in rec["runs"].items():
        folder = dirs.get(name)
        if folder is None:
            folder, _ = run_cscore(name, root, cache)
        bad += compare_run(name, want["jobs"], digest(folder))
    print(f"{bad} difference(s)" if bad else "all score columns bit-identical")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("command", choices=["record", "compare"])
    ap.add_argument("file", type=Path, help="the record (JSON)")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"record: which runs (of {', '.join(RUNS)})")
    ap.add_argument("--dir", action="append", default=[], metavar="NAME=DIR",
                    help="compare: read this run (or multirun) directory instead of running NAME again")
    ap.add_argument("--root", help="where the run directories go (default outputs/pin_scores/<time>_<command>)")
    ap.add_argument("--cache", help="statistics cache to use (default: a fresh one under the root)")
    args = ap.parse_args(argv)
    names = [n for n in args.runs.split(",") if n]
    unknown = [n for n in names if n not in RUNS]
    dirs = dict(d.split("=", 1) for d in args.dir if "=" in d)
    if unknown or len(dirs) != len(args.dir):
        ap.error(f"unknown run(s) {unknown}; runs are {', '.join(RUNS)}" if unknown else "--dir takes NAME=DIR")
    if args.command == "compare" and set(dirs) >= set(json.loads(args.file.read_text())["runs"]):
        return compare(args.file, {k: Path(v) for k, v in dirs.items()}, None, None)
    root = new_root(args.root, args.command)
    cache = Path(args.cache).resolve() if args.cache else root / "stats"
    if args.command == "record":
        return record(args.file, names, root, cache)
    return compare(args.file, {k: Path(v) for k, v in dirs.items()}, root, cache)


if __name__ == "__main__":
    sys.exit(main())
