"""The slowest tests of a pytest run and where their time goes, from its junit report.

    python -m pytest -m "not slow" --junitxml=/tmp/fast.xml --durations=60 | tee /tmp/fast.log
    python scripts/test_times.py /tmp/fast.xml --log /tmp/fast.log          # print the table
    python scripts/test_times.py /tmp/fast.xml --log /tmp/fast.log --write \\
        --run "fast tier, main" --load "other jobs running: load 2-4"    # -> docs/measured/test_times.yaml

The time of a test is the junit report's (set-up + call + tear-down); with ``--log`` (the
run's ``--durations`` lines) it is split into set-up and call. Where the time goes is read from the
test's source and the fixtures it asks for (this module, tests/conftest.py, tests/support): the
``cscore`` commands it starts as fresh processes (an interpreter start-up and a torch import each),
in-process CLI runs, GGUF conversions, model loads, Hydra composes, the SLURM cluster, other
subprocesses (mkdocs, mypy, scripts), fuzzing. docs/benchmarks.md shows the written file
(scripts/benchmarks_page.py)."""

from __future__ import annotations

import argparse
import ast
import re
import sys
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "measured" / "test_times.yaml"

# (label, pattern in the source of the test and its fixtures), in the order the table names them
COSTS = [
    ("SLURM", r"sbatch|squeue|sinfo|slurm|submitit"),
    ("GGUF conversion", r"gguf|convert_gguf|GGUF"),
    ("fresh cscore processes", r"cscore_cli\(|run_cscore\(|\"-m\", \"cscore|'cscore\.cli\.main'|cscore\.cli\.main\""),
    ("in-process CLI runs", r"cscore_main\(|run_main\((?!\*args, cwd)"),  # not its def, nor cscore_main's call
    ("other subprocesses", r"subprocess\.(run|Popen|check_output|check_call)|sys\.executable"),
    ("kill / signal", r"SIGKILL|SIGINT|SIGTERM|os\.kill|\.kill\(\)"),
    ("model loads", r"from_pretrained|load_model|ModelPair|load_pair|tiny_dirs|judge_dirs|smollm2|gemma"),
    ("Hydra composes", r"compose\(|initialize_config_dir|initialize\(|GlobalHydra"),
    ("fuzzing", r"@given|hypothesis\.strategies|from hypothesis|fuzz\.|mutat"),
    ("docs build", r"mkdocs"),
    ("lint / types", r"\bmypy\b|\bruff\b|lint-imports|import_linter"),
]


def parse_junit(path: Path) -> list[dict]:
    """[{id, file, name, seconds, outcome}] for every test case of the report."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        classname = tc.get("classname", "")
        name = re.sub(r"@[\w.-]+$", "", tc.get("name", ""))  # xdist's --dist loadgroup suffix
        parts = classname.split(".")
        # classname: dotted module path (tests.test_cli) and maybe a class; find the file
        file, cls = None, []
        for k in range(len(parts), 0, -1):
            candidate = REPO.joinpath(*parts[:k]).with_suffix(".py")
            if candidate.is_file():
                file, cls = candidate, parts[k:]
                break
        if file is None and tc.get("file"):
            file = REPO / tc.get("file")
        rel = str(file.relative_to(REPO)) if file else classname.replace(".", "/") + ".py"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if tc.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        cases.append({"id": "::".join([rel, *cls, name]), "file": rel, "name": name,
                      "seconds": float(tc.get("time", 0.0)), "outcome": outcome})
    return cases


def parse_durations(log: Path) -> dict[str, dict[str, float]]:
    """{node id: {setup, call, teardown: seconds}} from the ``--durations`` lines of a log."""
    out: dict[str, dict[str, float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S.*)$", line)
        if m:
            node = re.sub(r"@[\w.-]+$", "", m.group(3).strip())
            out.setdefault(node, {})[m.group(2)] = float(m.group(1))
    return out


class Sources:
    """The source of test functions and of the fixtures they ask for."""

    def __init__(self) -> None:
        self.trees: dict[Path, ast.Module] = {}
        self.texts: dict[Path, str] = {}

    def _tree(self, path: Path) -> ast.Module | None:
        if path not in self.trees:
            try:
                self.texts[path] = path.read_text()
                self.trees[path] = ast.parse(self.texts[path])
            except (OSError, SyntaxError):
                return None
        return self.trees[path]

    def _functions(self, path: Path) -> dict[str, ast.FunctionDef]:
        tree = self._tree(path)
        if tree is None:
            return {}
        return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}

    def text(self, file: Path, name: str, depth: int = 3) -> str:
        """The test's source, the fixtures it asks for (to ``depth`` levels) and the module-level
        helpers it calls."""
        places = [file, REPO / "tests" / "conftest.py", *sorted((REPO / "tests" / "support").glob("*.py"))]
        seen: set[str] = set()
        chunks: list[str] = []
        todo = [(re.sub(r"\[.*$", "", name), 0)]
        while todo:
            fn, level = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            for place in places:
                node = self._functions(place).get(fn)
                if node is None:
                    continue
                src = ast.get_source_segment(self.texts[place], node) or ""
                chunks.append(src)
                if level < depth:
                    asked = [a.arg for a in node.args.args]
                    called = [c.func.id for c in ast.walk(node) if isinstance(c, ast.Call)
                              and isinstance(c.func, ast.Name)]
                    todo += [(x, level + 1) for x in asked + called]
                break
        return "\n".join(chunks)


def costs(source: str) -> list[str]:
    """The labels of COSTS found in the source; fresh processes and in-process runs counted."""
    found = []
    for label, pattern in COSTS:
        hits = len(re.findall(pattern, source))
        if hits:
            counted = label in ("fresh cscore processes", "in-process CLI runs")
            found.append(f"{label} ({hits} in the source)" if counted and hits > 1 else label)
    return found


def slowest(cases: list[dict], durations: dict, top: int) -> list[dict]:
    sources = Sources()
    rows = []
    for case in sorted(cases, key=lambda c: -c["seconds"])[:top]:
        split = durations.get(case["id"], {})
        rows.append({"test": case["id"], "seconds": round(case["seconds"], 1),
                     "setup": round(split["setup"], 1) if "setup" in split else None,
                     "call": round(split["call"], 1) if "call" in split else None,
                     "outcome": case["outcome"],
                     "costs": ", ".join(costs(sources.text(REPO / case["file"], case["name"]))) or "computation"})
    return rows


def summary(cases: list[dict]) -> dict:
    total = sum(c["seconds"] for c in cases)
    by_file: dict[str, float] = {}
    for c in cases:
        by_file[c["file"]] = by_file.get(c["file"], 0.0) + c["seconds"]
    files = sorted(by_file.items(), key=lambda kv: -kv[1])[:10]
    return {"tests": len(cases), "test_seconds": round(total, 1),
            "outcomes": {k: sum(c["outcome"] == k for c in cases) for k in ("passed", "failed", "error", "skipped")},
            "slowest_files": [{"file": f, "seconds": round(s, 1)} for f, s in files]}


def table(rows: list[dict]) -> str:
    out = ["| # | test | s | set-up | call | where the time goes |", "|---:|---|---:|---:|---:|---|"]
    for i, r in enumerate(rows, 1):
        out.append(f"| {i} | `{r['test']}` | {r['seconds']} | {'' if r['setup'] is None else r['setup']} | "
                   f"{'' if r['call'] is None else r['call']} | {r['costs']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path, help="the junit xml of the run (pytest --junitxml)")
    ap.add_argument("--log", type=Path, help="the run's output with its --durations lines (set-up / call split)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--write", action="store_true", help="write docs/measured/test_times.yaml")
    ap.add_argument("--run", default="", help="what was run (for the written file)")
    ap.add_argument("--load", default="", help="the machine's load while it ran (for the written file)")
    ap.add_argument("--wall", default="", help="the run's wall time, as measured (for the written file)")
    args = ap.parse_args(argv)
    if not args.junit.is_file():
        print(f"error: no junit report {args.junit}", file=sys.stderr)
        return 2
    cases = parse_junit(args.junit)
    if not cases:
        print(f"error: {args.junit} holds no test case", file=sys.stderr)
        return 2
    durations = parse_durations(args.log) if args.log else {}
    rows = slowest(cases, durations, args.top)
    print(table(rows))
    info = summary(cases)
    print(f"\n{info['tests']} tests, {info['test_seconds']} s of test time; {info['outcomes']}")
    if args.write:
        record = {"run": args.run, "date": str(date.today()), "load": args.load, "wall": args.wall, **info,
                  "slowest": rows}
        OUT.write_text("# generated by scripts/test_times.py from a junit report: do not edit by hand\n"
                       + yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=120))
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
