"""The whole report of ``cscore report``: datasets and judge studies, their sections, speed, report.md."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.markup import escape

from cscore.errors import ConfigError, CscoreError
from cscore.files import folder_problem
from cscore.metaeval import render, sections, side_tables, tables
from cscore.metaeval.judge_runs import is_judge_run
from cscore.metaeval.judge_section import judge_section
from cscore.metaeval.report_plots import plot_section
from cscore.metaeval.runs import check_folder, missing_jobs, run_status, runs_under
from cscore.metaeval.signature import Signature
from cscore.metaeval.spec import PAPERS, Spec
from cscore.progress import Progress

SUMMARY_AFTER = 3  # a report over more datasets prints one line per dataset, not its tables
STATUS_LINES = 10  # runs not complete named on the console (all of them in report.md)


def dataset_section(ds, stem: str, spec: Spec, out: Path, console, progress: Progress, longs: list,
                    show: bool) -> list[str]:
    grouped = "group" in ds.frame and spec.resample == "groups"
    items = ds.frame["group"].nunique() if grouped else len(ds.frame)
    progress.say(f"{stem}: {len(ds.frame)} rows, {items} items, {len(ds.rows)} score rows x "
                 f"{len(tables.targets(ds)) + 1} columns; {spec.bootstrap} bootstrap resamples, "
                 f"{spec.permutations} permutations")
    lines = ["", f"Files `{stem}_*`: {len(ds.frame)} rows of {sections.describe_key(ds.key)}"]
    lines += sections.warn(stem, sections.units_warning(items, spec), console)
    long, quality_lines = sections.quality_section(ds, stem, spec, out, console if show else None, progress)
    if not show:
        console.print(escape(summary_line(stem, long)), highlight=False, soft_wrap=True)
    longs.append((stem, sections.task_of(ds), long))
    lines += sections.warn(stem, sections.like_note(tables.unreachable_like_threshold(ds, spec), spec), console)
    lines += (quality_lines + sections.bias_section(ds, stem, out)
              + sections.quantized_section(ds, stem, out, spec.accuracy) + sections.pairwise_section(ds, stem, out))
    plot_section(ds, long, stem, out, progress, spec, items)
    return lines


def summary_line(stem: str, long) -> str:
    """One dataset in one line: its best row by AVG (or by its one column)."""
    avg = long[long["target"] == "AVG"] if (long["target"] == "AVG").any() else long
    avg = avg[avg["value"].notna()]
    if avg.empty:
        return f"{stem}: no finite correlation (see {stem}_quality.md)"
    best = avg.loc[avg["value"].idxmax()]
    return (f"{stem}: {long['label'].nunique()} rows; best {best['label']} ({best['target']} "
            f"{best['value']:.3f}); table in {stem}_quality.md")


def default_out(roots: list[Path], paper: str | None = None) -> Path:
    """``<dir>/report`` (``report-<paper>`` with ``--paper``); for several folders, in their common folder."""
    name = f"report-{paper}" if paper else "report"
    if len(roots) == 1:
        return roots[0] / name
    parent = Path(os.path.commonpath([str(r.resolve()) for r in roots]))
    if parent == Path(parent.anchor):
        raise ConfigError(f"the folders have no common folder but {parent}: give the report's folder with --out")
    return parent / name


def notes(repeated: list[Path], paper: str | None, spec: Spec, console) -> list[str]:
    """report.md's lines on the runs found under several folders and on the ``--paper`` preset."""
    lines = []
    if repeated:
        text = (f"{len(repeated)} run directories lie under more than one of the folders given and count once: "
                + ", ".join(map(str, repeated)))
        lines += ["", text]
        console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True)
    if paper:
        text = f"statistic: --paper {paper}: {PAPERS[paper]['says']} ({spec.describe()})"
        lines += ["", text]
        console.print(escape(text), highlight=False, soft_wrap=True)
    return lines


@dataclass(frozen=True)
class ReportOptions:
    """How a report reads its runs."""

    select_by: str = "spearman"  # the statistic that picks the judge's best grid point
    combined: bool = False  # also the all-datasets tables (combined_section)
    paper: str | None = None  # the --paper preset the statistic came from, named in report.md
    judge_methods: tuple[str, ...] = ()  # methods whose runs get the judge section even unfinished
    defaults: Callable[[str, dict], dict] | None = None  # a method's parameters, defaults filled in
    spa: tuple[int, int] | None = None  # (permutations, seed) of the SPA tables; None: none


def report(root: Path | list[Path], spec: Spec, out: Path | None = None, console=None,
           progress: Progress | None = None, options: ReportOptions = ReportOptions()) -> Path:
    """One report over every run under ``root`` (a folder or several; a run under two counts once)."""
    from rich.console import Console

    console = console or Console()
    progress = progress or Progress()
    roots = [Path(r) for r in (root if isinstance(root, (list, tuple)) else [root])]
    for r in roots:
        check_folder(r)
    runs, per_root, repeated = runs_under(roots)
    where = ", ".join(map(str, roots))
    if not runs:
        raise CscoreError(f"no cscore run directories (with config.yaml) under {where}")
    out = out or default_out(roots, options.paper)
    replaced = (out / "report.md").is_file()
    if (problem := folder_problem(out)) is not None:  # before anything is computed
        raise ConfigError(f"cannot write the report to {out}: {problem}")
    (out / "plots").mkdir(parents=True, exist_ok=True)
    outcome = run_status(runs)
    missing = [m if len(roots) == 1 else f"{r}: {m}" for r, found in zip(roots, per_root)
               for m in missing_jobs(r, found)]
    status = outcome.line(len(missing))
    progress.say(f"{len(runs)} run directories under {where}; {status}")
    lines = [f"# cscore report: {where}", "", status] + notes(repeated, options.paper, spec, console)
    lines += [*outcome.lines(), *[f"- missing: {m}" for m in missing]]

    judged = [r for r in runs if is_judge_run(r, options.judge_methods)]
    datasets = tables.collect([r for r in runs if not is_judge_run(r, options.judge_methods)], options.defaults)
    longs: list = []
    show = len(datasets) <= SUMMARY_AFTER
    if not show:
        console.print(f"{len(datasets)} datasets: one line each here, their tables in {escape(str(out))}",
                      highlight=False, soft_wrap=True)
    for ds, stem in zip(datasets, sections.stems(datasets)):
        lines += dataset_section(ds, stem, spec, out, console, progress, longs, show)
        if options.spa:
            lines += sections.spa_section(ds, stem, out, *options.spa, console)
    if options.combined:
        lines += sections.combined_section(longs, spec, out, console)
    if judged:
        lines += judge_section(judged, spec, out, console, progress, options.select_by)

    speed = side_tables.speed(runs)
    if not speed.empty:
        ssig = f"{Signature({'table': 'speed', 'phase': 'scoring'})} — scoring phase only; model load separate"
        lines += sections.write(out, "speed", render.from_frame(speed.round(3).set_index("run"), "Speed", ssig))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    said = [f"missing: {m}" for m in missing] + [line[2:] for line in outcome.lines()]
    for line in said[:STATUS_LINES]:
        style = {"failed": "red", "finished later": "dim"}.get(line.split(":")[0], "yellow")
        console.print(f"[{style}]{escape(line)}[/]", soft_wrap=True)  # a path is never broken
    if len(said) > STATUS_LINES:
        console.print(f"[yellow]... and {len(said) - STATUS_LINES} more runs not complete (report.md lists them)[/]",
                      soft_wrap=True)
    console.print(f"report {'replaced' if replaced else 'written'} in [bold]{escape(str(out))}[/] "
                  f"(report.md and the tables) in {progress.elapsed():.1f}s", soft_wrap=True)
    return out
