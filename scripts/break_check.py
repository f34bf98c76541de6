"""Break each core formula on purpose, one at a time, and see which fast-tier test fails.

    python scripts/break_check.py                 # every break; prints the table
    python scripts/break_check.py --only eq5_gamma --write   # -> docs/measured/breaks.yaml

Each break replaces one piece of source (it must occur exactly once), runs the fast tier
(``-m "not slow"``) of the test files of its area with ``-x``, records the first failing test, and
puts the file back as it was (also on Ctrl-C). A break that no fast test fails exits 1: add a fast
test that catches it. docs/benchmarks.md shows the written file (scripts/benchmarks_page.py)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "measured" / "breaks.yaml"


@dataclass(frozen=True)
class Break:
    name: str
    formula: str
    file: str  # in the package
    old: str
    new: str
    tests: tuple[str, ...]  # test file names (found anywhere under tests/)


# the merge's two guards (every item done, every shard marked), broken together: either alone is
# caught by the other
MERGE_GUARD = ("        merged = None if not checkpoint.done.all() else (\n"
               "            merge(checkpoint, list(job.heads), job.offsets(), job.temperatures, job.pairs, "
               "job.stats_type)\n"
               "            if job.partials is None else checkpoint.assemble())\n"
               "        marks = place.marks()  # after the merge's checks: a damaged file unmarks its shard\n"
               "        if merged is None or len(marks) < count:")
BREAKS = [
    Break("eq5_gamma", "ContrastScore Eq. 5: gamma scales the amateur", "scorers/methods/contrast.py",
          "b = np.log(p.gamma) + la", "b = la", ("test_methods.py",)),
    Break("eq5_temperature", "ContrastScore Eq. 5: the expert at t_exp", "scorers/methods/contrast.py",
          'a = logp(stats["expert"], p.t_exp, p.clamp)', 'a = logp(stats["expert"], 1.0, p.clamp)',
          ("test_methods.py",)),
    Break("log_abs_diff", "the stable log|e^a - e^b|", "scorers/methods/contrast.py",
          "out = hi + np.log(-np.expm1(-gap))", "out = np.log(np.abs(np.exp(a) - np.exp(b)))",
          ("test_methods.py", "test_log_abs_diff.py")),
    Break("kendall_23", "Kendall tau_23: ties in both count as agreement", "metaeval/kendall.py",
          "return (c.concordant + c.ties_both - c.discordant - c.ties_x - c.ties_y) / c.total",
          "return (c.concordant - c.discordant - c.ties_x - c.ties_y) / c.total",
          ("test_metaeval.py", "test_kernels.py")),
    Break("kendall_like", "Kendall-like (WMT20 DARR): (C - D) / (C + D)", "metaeval/kendall.py",
          "return (con - dis) / (con + dis)", "return (con - dis) / max(con + dis + 1, 1)",
          ("test_metaeval.py", "test_kernels.py")),
    Break("avg_table", "AVG over aspects (correlation tables)", "metaeval/correlation.py",
          'out["AVG"] = out.mean(axis=1, skipna=False)', 'out["AVG"] = out.max(axis=1, skipna=False)',
          ("test_metaeval.py", "test_report.py")),
    Break("avg_statistic", "AVG over aspects (the report's statistic)", "metaeval/statistic.py",
          "return np.mean([s.batch(df, xs, ws, units) for s in self.stats], axis=0)",
          "return np.max([s.batch(df, xs, ws, units) for s in self.stats], axis=0)",
          ("test_metaeval.py", "test_metaeval_levels.py", "test_metaeval_uncertainty.py", "test_report.py")),
    Break("mqm_major", "MQM weights: Major 5", "data/mqm.py",
          "MAJOR, MINOR, MINOR_PUNCT, NON_TRANSLATION = 50, 10, 1, 250",
          "MAJOR, MINOR, MINOR_PUNCT, NON_TRANSLATION = 40, 10, 1, 250", ("test_data_mqm.py",)),
    Break("mqm_punct", "MQM weights: Minor Fluency/Punctuation 0.1", "data/mqm.py",
          "MAJOR, MINOR, MINOR_PUNCT, NON_TRANSLATION = 50, 10, 1, 250",
          "MAJOR, MINOR, MINOR_PUNCT, NON_TRANSLATION = 50, 10, 10, 250", ("test_data_mqm.py",)),
    Break("cd_judge_first_token", "CD-judge Eq. 1, decode=first_token (first step)", "scorers/judge/stats.py",
          'softmax_mean({"contrast": a - c * z, "main": a, "asst": z}[who]',
          'softmax_mean({"contrast": a + c * z, "main": a, "asst": z}[who]',
          ("test_judge.py", "test_judge_chain.py")),
    Break("cd_judge_head", "CD-judge Eq. 1, the first step over V_head", "scorers/judge/stats.py",
          "f = self.front_a[flat] - c * self.front_z[flat]", "f = self.front_a[flat] + c * self.front_z[flat]",
          ("test_judge.py", "test_judge_chain.py", "test_judge_decode.py")),
    Break("cd_judge_greedy", "CD-judge Eq. 1, decode=greedy (later steps)", "scorers/judge/decode.py",
          "score = a - c * z if c else a.clone()", "score = a + c * z if c else a.clone()",
          ("test_judge_decode.py",)),
    Break("cd_judge_values", "CD-judge Eq. 1, decode=values", "scorers/judge/values.py",
          "score = a - lam * b[float(t)] if who", "score = a + lam * b[float(t)] if who",
          ("test_judge.py", "test_judge_decode.py", "test_cross_family.py")),
    Break("cd_judge_released", "CD-judge, the released code's contrast", "scorers/judge/released.py",
          "return main - lam * asst", "return main + lam * asst", ("test_judge_released.py",)),
    Break("parse_clamp", "the parse clamps above the range to its maximum", "scorers/judge/parse.py",
          "        return float(hi), ABOVE", "        return value, ABOVE", ("test_judge_parse.py",)),
    Break("shard_deal", "the shard deal (fewest padded tokens first)", "scorers/store/checkpoint.py",
          "        loads[k] += int(c)\n", "", ("test_plan.py", "test_shards.py", "test_checkpoint.py")),
    Break("shard_merge", "the shard merge waits for every item", "scorers/store/runner.py",
          MERGE_GUARD, MERGE_GUARD.replace("done.all()", "done.any()").replace(" or len(marks) < count:", ":"),
          ("test_shards.py", "test_shards_merge.py")),
    Break("resume_partials", "resume from partials: kept items are not recomputed", "scorers/store/checkpoint.py",
          "            self.kept.append((dest, rows))\n            self.done[self._items_of(dest)] = True\n",
          "            self.kept.append((dest, rows))\n", ("test_checkpoint.py", "test_resume_folder.py")),
]


def test_paths(names: tuple[str, ...]) -> list[str]:
    out = []
    for name in names:
        found = sorted((REPO / "tests").rglob(name))
        if not found:
            raise SystemExit(f"error: no test file {name} under tests/")
        out.append(str(found[0].relative_to(REPO)))
    return out


def run_break(b: Break, timeout: int) -> dict:
    path = REPO / b.file
    original = path.read_text()
    if original.count(b.old) != 1:
        raise SystemExit(f"error: {b.name}: the text to break occurs {original.count(b.old)} times in {b.file}")
    tests = test_paths(b.tests)
    t0 = time.perf_counter()
    try:
        path.write_text(original.replace(b.old, b.new))
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider",
                              "--durations=0", *tests], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        out = res.stdout + res.stderr
        rc = res.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", -1
    finally:
        path.write_text(original)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
    change = f"`{b.old.strip()}` -> `{b.new.strip()}`" if b.new.strip() else f"`{b.old.strip()}` removed"
    return {"break": b.name, "formula": b.formula, "file": b.file, "change": change,
            "tests": " ".join(tests), "exit": rc, "caught_by": failed[0] if failed else None,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="the names of the breaks to run (default: all)")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds one break's tests may take")
    ap.add_argument("--write", action="store_true", help="write docs/measured/breaks.yaml")
    args = ap.parse_args(argv)
    chosen = [b for b in BREAKS if not args.only or b.name in args.only]
    rows = []
    for b in chosen:
        row = run_break(b, args.timeout)
        rows.append(row)
        print(f"{row['break']}: exit {row['exit']}, caught by {row['caught_by']} ({row['seconds']} s)", flush=True)
    if args.write:
        old = yaml.safe_load(OUT.read_text()) if OUT.is_file() else {}
        by_name = {r["break"]: r for r in (old or {}).get("breaks", [])}
        by_name.update({r["break"]: {**r, "date": str(date.today())} for r in rows})
        order = [b.name for b in BREAKS]
        record = {"breaks": sorted(by_name.values(), key=lambda r: order.index(r["break"]) if r["break"] in order
                                   else len(order))}
        OUT.write_text("# generated by scripts/break_check.py: do not edit by hand\n"
                       + yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=120))
        print(f"wrote {OUT}")
    missed = [r["break"] for r in rows if r["exit"] != 1 or not r["caught_by"]]
    if missed:
        print(f"not caught by a failing fast test: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
