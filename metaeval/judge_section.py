"""The report's section on judge runs: per study its tables, long csv files, notes and plots."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from cscore.metaeval import judge, judge_plots, judge_runs, render, tables
from cscore.metaeval.resampling import few_units_warning
from cscore.metaeval.sections import file_stem, like_note, warn, write
from cscore.metaeval.spec import Spec
from cscore.progress import Progress


def judge_section(runs, spec: Spec, out: Path, console, progress: Progress,
                  select_by: str = "spearman") -> list[str]:
    """The judge studies among ``runs``: writes their files, prints their tables, returns report.md's lines."""
    criterion = judge.Criterion(select_by, spec.level, spec.variant, spec.like_threshold)
    studies = judge_runs.collect(runs)
    lines = []
    for study, stem in zip(studies, map(file_stem, judge_runs.stems(studies))):
        settings = study.settings()
        progress.say(f"{stem}: {len(study.points)} judge grid points, {len(settings)} (pair, range) settings; "
                     f"(lambda, t) chosen by dev {select_by}; {spec.bootstrap} bootstrap resamples")
        with progress.steps(f"{stem} correlations") as update:
            rep = judge.build(study, criterion, bootstrap=spec.bootstrap, seed=spec.seed, alpha=spec.alpha,
                              resample=spec.resample, progress=update)
        for name, frame in (("correlation_long", rep.long), ("grid", rep.grid), ("invalid_long", rep.invalid)):
            frame.to_csv(out / f"{stem}_{name}.csv", index=False)
        lines += ["", f"Files `{stem}_*`: judge runs on {study.data}, aspect {study.aspect}: "
                      f"{len(study.points)} grid points"]
        if spec.bootstrap and not rep.long.empty:  # the fewest documents (or rows) behind a reported correlation
            grouped = "group" in study.points[0].frame.columns and spec.resample == "groups"
            unit, count = ("documents", "n_groups") if grouped else ("rows", "n")
            lines += warn(stem, few_units_warning(int(rep.long[count].min()), f"{unit} in the reported rows",
                                                  "the bootstrap intervals (±)"), console)
        if not study.has_dev_split:
            lines += ["", f"**{judge.NO_DEV}**"]
            console.print(f"[bold yellow]{escape(stem)}: {escape(judge.NO_DEV)}[/]")
        notes = list(study.notes)
        threshold = spec.like_threshold  # set: spec.like
        if threshold is not None and study.points:
            d = tables.largest_human_difference(study.points[0].frame, study.human, spec.level)
            notes += [like_note({study.aspect: d}, spec)] if d < threshold else []
        for note in notes:
            lines.append(f"- note: {note}")
            console.print(f"[yellow]{escape(stem)}: {escape(note)}[/]")
        for suffix, table in rep.tables.items():
            lines += write(out, f"{stem}_{suffix}", table)
            console.print(render.rich(table))
        progress.say(f"{stem}: plots")
        judge_plots.write(rep, out / "plots", stem, criterion)
    return lines
