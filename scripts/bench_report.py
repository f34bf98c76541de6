"""Benchmark: `cscore report` on a realistic run directory, with the vectorised bootstrap and
permutation tests, side by side with a per-resample loop reference of the same statistics.

    python scripts/bench_report.py [--run DIR] [--items 160] [--sweep 1] [--bootstrap 1000]
                                   [--permutations 1000] [--loop-resamples N | --no-loop]

Without --run it writes a synthetic run directory in the layout `cscore run` writes
(config.yaml from the default config, scores.parquet with id/group/system/human.*/score.*
columns, metrics.json) on the demo data; --sweep K writes K runs that differ in method.gamma.
The loop reference computes the quality tables as the report did before: every statistic
(correlate_at on a pandas table) once per resample, on the resampled table, with the same
draws and coins; --loop-resamples N runs it with N resamples and scales its time to the
report's count (shown as "scaled"). Both are timed in this process, wall clock and CPU.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

import cscore
from cscore import rundir
from cscore.data import load_examples
from cscore.metaeval import tables
from cscore.metaeval.clusters import significance_clusters
from cscore.metaeval.levels import correlate_at
from cscore.metaeval.resampling import bootstrap_ci
from cscore.run.typed import typed_method
from cscore.run.variants import plan
from cscore.rundir import find_runs
from cscore.scorers import methods

NOISE = {"expert": 1.0, "amateur": 1.6, "ensemble": 1.2}  # larger = worse metric; main row: 0.8


def compose(overrides: list[str]):
    from cscore.cli.compose import composed

    return composed("config", overrides)


def examples(n_items: int) -> pd.DataFrame:
    """The demo rows, repeated with fresh ids and groups until there are n_items."""
    demo, _ = load_examples("demo")
    copies = []
    for k in range(-(-n_items // len(demo))):
        part = demo.copy()
        part["id"] = part["id"] + f"#{k}"
        part["group"] = part["group"] + f"#{k}"
        copies.append(part)
    return pd.concat(copies, ignore_index=True).iloc[:n_items]


def write_run(path: Path, overrides: list[str], rows: pd.DataFrame, seed: int) -> None:
    cfg = compose(overrides)
    method = OmegaConf.to_container(cfg.method, resolve=True)
    variants = plan(typed_method(method), baseline_t=cfg.baselines.t, rows=list(cfg.baselines.rows))
    rng = np.random.default_rng(seed)
    humans = [c for c in rows.columns if c.startswith("human.")]
    quality = rows[humans].mean(axis=1).to_numpy()
    table = rows.copy()
    table["hypothesis_tokens"] = rng.integers(10, 80, size=len(rows))
    for v in variants:
        table[f"score.{v.name}"] = quality + NOISE.get(v.name, 0.8) * rng.normal(size=len(rows))
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    table.to_parquet(path / "scores.parquet", index=False)
    seconds = {"expert": 9.0, "amateur": 3.0}
    passes = {k: {"score_seconds": s, "from_cache": False, "tokens": int(table["hypothesis_tokens"].sum())}
              for k, s in seconds.items()}
    metrics = {"cscore_version": cscore.__version__, "signature": "synthetic (scripts/bench_report.py)",
               "data": {"name": cfg.data.name, "synthetic": True}, "n_truncated": 0, "truncated_ids": [],
               "temperatures": [1.0], "models": {}, "correlations": {}, "nonfinite_scores": {}, "environment": {},
               "n_items": len(rows), "variants": [{"name": v.name, "method": v.method, "params": v.params}
                                                  for v in variants],
               "split": {"use": cfg.split.use},
               "speed": {"passes": passes, "score_seconds": sum(seconds.values()), "items_scored": len(rows),
                         "samples_per_second": len(rows) / sum(seconds.values()), "load_seconds": {},
                         "peak_rss_mb": 0.0}}
    rundir.write_metrics(path, metrics)  # the writer `cscore run` uses: the report reads it as complete


def synthesise(root: Path, n_items: int, sweep: int) -> Path:
    rows = examples(n_items)
    if sweep == 1:
        write_run(root, [], rows, seed=0)
        return root
    for k, gamma in enumerate(np.linspace(0.1, 0.7, sweep)):
        write_run(root / str(k), [f"method.gamma={gamma:.2f}"], rows, seed=k)
    return root


def quiet_report(root: Path, spec: tables.Spec, out: Path) -> None:
    from rich.console import Console

    from cscore.metaeval.assemble import report
    from cscore.progress import Progress

    sink = Console(file=io.StringIO())
    report(root, spec, out, console=sink, progress=Progress(console=sink))


def timed(fn, *args):
    """(result, wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def vectorised_quality(datasets, spec: tables.Spec) -> pd.DataFrame:
    return pd.concat([tables.quality(ds, spec) for ds in datasets], ignore_index=True)


def loop_statistics(ds: tables.Dataset, spec: tables.Spec) -> list:
    """(column, statistic) of the quality table as the report defined them before: plain
    functions of (table, metric column) calling correlate_at, which bootstrap_ci and
    permutation_test evaluate once per resample, on the resampled table."""
    def stat_for(human, value):
        def stat(df, col):
            part = df if value is None else df[df[ds.split_by] == value]
            return correlate_at(part, col, human, spec.level, spec.kind, spec.variant)["value"]
        return stat

    stats = [stat_for(h, v) for h, v in tables.targets(ds)]

    def avg(df, col):
        return float(np.mean([stat(df, col) for stat in stats]))

    names = [name for name, _ in tables.columns(ds, spec)]
    return list(zip(names, stats + [avg]))


def loop_quality(datasets, spec: tables.Spec) -> pd.DataFrame:
    """The quality table through the per-resample loop (same draws and coins as the report)."""
    rows = []
    for ds in datasets:
        labels = list(ds.rows)
        for name, stat in loop_statistics(ds, spec):
            clusters = significance_clusters(ds.frame, stat, [f"score.{lb}" for lb in labels],
                                             n=spec.permutations, seed=spec.seed, alpha=spec.alpha)
            ranks = {c["metric"].removeprefix("score."): c["rank"] for c in clusters}
            for lb in labels:
                point, low, high = bootstrap_ci(ds.frame, stat, f"score.{lb}", resample="group", n=spec.bootstrap,
                                                seed=spec.seed, alpha=spec.alpha)
                rows.append({"label": lb, "target": name, "value": point, "low": low, "high": high,
                             "rank": ranks[lb]})
    return pd.DataFrame(rows)


def compare(fast: pd.DataFrame, slow: pd.DataFrame) -> str:
    diff = max(float(np.nanmax(np.abs(fast[c] - slow[c]))) for c in ("value", "low", "high"))
    same_ranks = bool((fast["rank"].fillna(-1) == slow["rank"].fillna(-1)).all())
    return f"max |difference| of value / CI bounds {diff:.1e}, same significance clusters: {same_ranks}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--run", type=Path, default=None, help="an existing run or multirun directory")
    ap.add_argument("--items", type=int, default=160)
    ap.add_argument("--sweep", type=int, default=1, help="runs in the synthetic multirun")
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--permutations", type=int, default=1000)
    ap.add_argument("--correlation", default="pearson", choices=["pearson", "spearman", "kendall"])
    ap.add_argument("--level", default="segment", choices=["segment", "item", "system_grouped", "system"])
    ap.add_argument("--loop-resamples", type=int, default=None, help="resamples of the loop reference "
                    "(default: the same as the report); its time is scaled to the report's count")
    ap.add_argument("--no-loop", action="store_true", help="skip the loop reference")
    args = ap.parse_args()
    spec = tables.Spec(level=args.level, kind=args.correlation, bootstrap=args.bootstrap,
                       permutations=args.permutations)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.run or synthesise(Path(tmp) / "runs", args.items, args.sweep)
        datasets = tables.collect(find_runs(root), methods.with_defaults)
        rows = sum(len(ds.frame) for ds in datasets)
        print(f"{root}: {len(datasets)} dataset(s), {rows} rows, {spec.describe()}")
        _, wall, cpu = timed(quiet_report, root, spec, Path(tmp) / "report")
        print(f"cscore report (tables, plots, files):  {wall:7.2f} s  (CPU {cpu:.2f} s)")
        fast, fast_wall, fast_cpu = timed(vectorised_quality, datasets, spec)
        print(f"quality tables, vectorised:            {fast_wall:7.2f} s  (CPU {fast_cpu:.2f} s)")
        if args.no_loop:
            return
        n_loop = args.loop_resamples or max(spec.bootstrap, spec.permutations)
        loop_spec = tables.Spec(spec.level, spec.kind, spec.variant, min(n_loop, spec.bootstrap),
                                min(n_loop, spec.permutations), spec.seed, spec.alpha)
        slow, slow_wall, slow_cpu = timed(loop_quality, datasets, loop_spec)
        scale = (spec.bootstrap + spec.permutations) / max(loop_spec.bootstrap + loop_spec.permutations, 1)
        note = "" if scale == 1 else f"  (measured with {n_loop} resamples, scaled x{scale:.1f})"
        print(f"quality tables, per-resample loop:     {slow_wall * scale:7.2f} s  (CPU {slow_cpu * scale:.2f} s)"
              f"{note}")
        print(f"loop / vectorised: {slow_wall * scale / fast_wall:.0f}x wall, {slow_cpu * scale / fast_cpu:.0f}x CPU")
        same = fast if scale == 1 else vectorised_quality(datasets, loop_spec)
        print("check, at the loop's resample count: " + compare(same, slow))


if __name__ == "__main__":
    main()
