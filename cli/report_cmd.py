"""``cscore report <run or multirun dir>``: paper-style tables and plots from finished runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cscore
from cscore.metaeval import plots, tables
from cscore.metaeval.runs import find_runs, missing_jobs

NUMERIC = (int, float)


def write(out: Path, stem: str, table, title: str, signature: str) -> None:
    table.to_csv(out / f"{stem}.csv")
    (out / f"{stem}.md").write_text(tables.to_markdown(table, title, signature))
    (out / f"{stem}.tex").write_text(tables.to_latex(table, title, signature))


def swept_params(ds: tables.Dataset) -> list[str]:
    mains = [r for r in ds.rows.values() if r["main"]]
    keys = sorted({k for r in mains for k, v in r["params"].items() if isinstance(v, NUMERIC)})
    return [k for k in keys if len({r["params"].get(k) for r in mains}) > 1]


def report(root: Path, spec: tables.Spec, out: Path | None = None, console=None) -> Path:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    runs = find_runs(root)
    if not runs:
        raise FileNotFoundError(f"no cscore run directories (with config.yaml) under {root}")
    out = out or root / "report"
    (out / "plots").mkdir(parents=True, exist_ok=True)
    incomplete = [r for r in runs if not r.complete]
    missing = missing_jobs(root, runs)
    lines = [f"# cscore report: {root}", "", f"runs: {len(runs) - len(incomplete)} complete, "
             f"{len(incomplete)} incomplete, {len(missing)} not started"]
    lines += [f"- incomplete: {r.path}" for r in incomplete] + [f"- missing: {m}" for m in missing]

    for ds in tables.collect(runs):
        first = next(iter(ds.rows.values()))["run"]
        data = first.config["data"]["name"]
        stem = f"{data}_{first.config.get('split', {}).get('use', 'all')}"
        signature = f"cscore {cscore.__version__} | data={data} n={len(ds.frame)} | {spec.describe()}"

        long = tables.quality(ds, spec)
        long.to_csv(out / f"{stem}_quality_long.csv", index=False)
        wide = tables.wide(long)
        title = f"{data}: correlation with human judgements"
        write(out, f"{stem}_quality", wide, title, signature)
        lines += ["", tables.to_markdown(wide, title, signature)]
        t = Table(title=title, caption=signature, title_justify="left")
        t.add_column("")
        for c in wide.columns:
            t.add_column(str(c), justify="right")
        for idx, row in wide.iterrows():
            t.add_row(str(idx), *map(str, row))
        console.print(t)

        bias = tables.bias(ds)
        if not bias.empty:
            bw = tables.wide(bias, with_ci=False)
            bsig = f"cscore {cscore.__version__} | data={data} | BiasScore = Spearman(LS, US), LS = expert mean log-lik"
            write(out, f"{stem}_bias", bw, f"{data}: likelihood bias (lower is better)", bsig)
            lines += ["", tables.to_markdown(bw, f"{data}: likelihood bias (lower is better)", bsig)]

        quant = tables.quantized(ds)
        qw = tables.wide(quant, with_ci=False)
        qsig = (f"cscore {cscore.__version__} | data={data} | quantized accuracy (CDM Table 5): human = top score, "
                "prediction = metric's top share of the same size")
        write(out, f"{stem}_quantized_accuracy", qw, f"{data}: quantized accuracy", qsig)
        lines += ["", tables.to_markdown(qw, f"{data}: quantized accuracy", qsig)]

        params = swept_params(ds)
        avg = long[long["target"] == "AVG"]
        mains = {lb for lb, r in ds.rows.items() if r["main"]}
        if len(params) == 1:
            p = params[0]
            sub = long[long["label"].isin(mains)].copy()
            sub[p] = sub["label"].map(lambda lb: ds.rows[lb]["params"][p])
            sub["series"] = sub["target"]
            plots.correlation_vs_param(sub, p, out / "plots" / f"{stem}_corr_vs_{p}.png", title)
        elif len(params) == 2:
            sub = avg[avg["label"].isin(mains)].copy()
            for p in params:
                sub[p] = sub["label"].map(lambda lb, p=p: ds.rows[lb]["params"][p])
            plots.heatmap(sub, params[0], params[1], out / "plots" / f"{stem}_{params[0]}_x_{params[1]}.png", title)
        score_cols = [f"score.{lb}" for lb in list(ds.rows)[:6]]
        plots.score_distributions(ds.frame, score_cols, ds.humans[0], out / "plots" / f"{stem}_distributions.png")
        sp = avg.copy()
        sp["samples_per_second"] = sp["label"].map(
            lambda lb: ds.rows[lb]["run"].metrics.get("speed", {}).get("samples_per_second"))
        sp = sp.dropna(subset=["samples_per_second"])
        if len(sp):
            plots.speed_vs_quality(sp, out / "plots" / f"{stem}_speed_vs_quality.png", title)

    speed = tables.speed(runs)
    if not speed.empty:
        speed = speed.round(3)
        ssig = f"cscore {cscore.__version__} | scoring phase only; model load separate"
        write(out, "speed", speed.set_index("run"), "Speed", ssig)
        lines += ["", tables.to_markdown(speed.set_index("run"), "Speed", ssig)]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    for m in missing:
        console.print(f"[yellow]missing: {m}[/]")
    for r in incomplete:
        console.print(f"[yellow]incomplete: {r.path}[/]")
    console.print(f"report written to [bold]{out}[/]")
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="cscore report", description=__doc__)
    ap.add_argument("path", type=Path, help="a run directory, a multirun directory or any folder holding runs")
    ap.add_argument("--level", default="segment", choices=["segment", "item", "system_grouped", "system"])
    ap.add_argument("--correlation", default="pearson", choices=["pearson", "spearman", "kendall"])
    ap.add_argument("--kendall", default=None, help="Kendall variant: b (default), c, 23, acc23, like")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples (0: no CIs)")
    ap.add_argument("--permutations", type=int, default=1000, help="permutations per test (0: no clusters)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: <path>/report)")
    args = ap.parse_args(argv)
    spec = tables.Spec(args.level, args.correlation, args.kendall, args.bootstrap, args.permutations, args.seed,
                       args.alpha)
    try:
        report(args.path, spec, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"cscore: error: {err}", file=sys.stderr)
        sys.exit(1)
