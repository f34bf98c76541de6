"""``cscore report <run or multirun dir> [more dirs]``: paper-style tables and plots from finished runs.

Judge runs (``cd_judge``, ``cd_judge_released``) get the CD-judge paper's tables instead
(``metaeval.judge``: (lambda, t) chosen on dev, correlations by score range, chosen
hyper-parameters, range bias, invalid outputs) and plots (``metaeval.judge_plots``); other runs in
the same folder get the usual tables."""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape

from cscore import rundir
from cscore.errors import ConfigError, CscoreError
from cscore.files import folder_problem, writing
from cscore.metaeval import judge, judge_plots, plots, render, tables
from cscore.metaeval.runs import missing_jobs, run_status, runs_under
from cscore.metaeval.signature import Signature
from cscore.metaeval.uncertainty import few_units_warning

NUMERIC = (int, float)
BIAS_TITLE = "likelihood bias, BiasScore (closer to 0 is better)"
BIAS_NOTE = ("BiasScore = Spearman(LS, US) in [-1, 1]; 0 = the metric's errors do not follow the likelihood; "
             "> 0: texts the expert finds likely are overrated, < 0: they are underrated | "
             "LS = expert mean per-token log-lik, US = minmax(metric) - minmax(human)")
PAIRWISE_NOTE = ("acc_eq (Deutsch et al. 2023, WMT23 segment level): pairs of systems within each source "
                 "segment, correct when metric and human order them alike or both tie them; metric tie = "
                 "abs(difference) <= epsilon, epsilon chosen per cell to maximise the mean over segments")
MAX_DISTRIBUTION_ROWS = 6  # metric panels in distributions.png
COMBINED_STEM = "all"  # all_<task>_quality.{md,csv,tex}: every dataset's columns side by side, one AVG

# --paper X: the statistic that paper's tables report (an option given on the command line wins; the
# correlation -- --correlation / --kendall -- is taken as a whole or not at all)
PAPERS = {
    "contrastscore": {"correlation": "pearson", "level": "segment", "combined": True,
                      "says": "ContrastScore Tables 1-2: Pearson over all rows per aspect / language pair; "
                              "all_<task>_quality: every dataset's columns and their mean (Tables 1-2's AVG)"},
    "cdm": {"correlation": "spearman", "level": "segment",
            "says": "CDM Tables 2 and 7: Spearman over all rows; Table 5: quantized accuracy (SummaC protocol)"},
    "cdjudge": {"correlation": "spearman", "level": "segment", "resample": "items",
                "says": "CD-judge Tables 1-2: Pearson, Spearman and Kendall per score range, (lambda, t) chosen "
                        "on dev by --select-by (Spearman unless given), 95% intervals from a bootstrap over "
                        "summaries"},
    "t5score": {"kendall": "like", "level": "item", "average": "micro",
                "says": "T5Score segment level (seg-k): WMT20 DARR Kendall-like over pairs of translations of one "
                        "source whose human scores differ by >= the threshold, pooled over segments "
                        "(mt-metrics-eval KendallLike, average_by='item')"},
}


class Progress:
    """What the report is doing, on stderr: a live bar on a terminal; elsewhere (logs, pipes)
    one line for the first and last step of a table and at most one every ``every`` seconds."""

    def __init__(self, console=None, every: float = 2.0):
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.every = every
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def say(self, text: str) -> None:
        self.console.print(f"[{self.elapsed():6.1f}s] {text}", highlight=False, markup=False, soft_wrap=True)

    @contextmanager
    def steps(self, title: str):
        """Yields ``update(done, total, what)`` for the steps of one table."""
        if self.console.is_terminal:
            with self._bar(title) as update:
                yield update
        else:
            yield self._lines(title)
        self.say(f"{title}: done")

    @contextmanager
    def _bar(self, title: str):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        bar = Bar(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[what]}", markup=False), console=self.console,
                  transient=True)
        task = bar.add_task(title, total=None, what="")
        with bar:
            yield lambda done, total, what: bar.update(task, completed=done, total=total, what=what)

    def _lines(self, title: str):
        last = -math.inf

        def update(done: int, total: int, what: str) -> None:
            nonlocal last
            now = time.perf_counter()
            if done in (1, total) or now - last >= self.every:
                last = now
                self.say(f"{title} {done}/{total}: {what}")

        return update


def write(out: Path, stem: str, table: render.Table) -> list[str]:
    """``<stem>.{md,csv,tex}``; returns report.md's lines for the table."""
    render.save(table, out, stem)
    return ["", render.markdown(table)]


def swept_params(ds: tables.Dataset) -> list[str]:
    """The numeric parameters that every main row has and that differ among them (a parameter of
    only some methods of a multirun is no axis to plot them on)."""
    mains = [r for r in ds.rows.values() if r["main"]]
    keys = sorted({k for r in mains for k, v in r["params"].items() if isinstance(v, NUMERIC)})
    keys = [k for k in keys if all(isinstance(r["params"].get(k), NUMERIC) for r in mains)]
    return [k for k in keys if len({r["params"][k] for r in mains}) > 1]


def _config(ds: tables.Dataset) -> dict:
    return next(iter(ds.rows.values()))["run"].config


def file_stem(text: str) -> str:
    """``text`` as a file-name part: no path separators, no leading dots (names come from the runs'
    config.yaml files, which must not steer the report outside its folder)."""
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", str(text)).strip("._") or "data"


def stems(datasets: list[tables.Dataset]) -> list[str]:
    """File-name stem of each dataset: ``<data>``; ``<data>_<split>`` for a dev / test split
    (split.use); a further dataset that would get the same stem (same data and split, other
    data options or prompt condition) gets ``_2``, ``_3``, ... in the order found."""
    out, seen = [], {}
    for ds in datasets:
        cfg = _config(ds)
        split = cfg.get("split", {}).get("use", "all")
        base = file_stem(cfg["data"]["name"] + ("" if split in (None, "all") else f"_{split}"))
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return out


def _options(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()) if v is not None)


def describe_key(key: str) -> str:
    """A dataset's key (``tables.Dataset.key``: data options, split, prompt condition as JSON) as
    text: ``data demo (judge_aspect=consistency), split all, prompt source``; null options left out,
    the split's options only for a dev / test split."""
    d = json.loads(key)
    data, split = dict(d.get("data") or {}), dict(d.get("split") or {})
    name, use = data.pop("name", "?"), split.pop("use", "all")
    parts = [f"data {name}" + (f" ({_options(data)})" if _options(data) else "")]
    parts.append(f"split {use}" + (f" ({_options(split)})" if use not in (None, "all") and _options(split) else ""))
    if d.get("prompt") is not None:
        parts.append(f"prompt {d['prompt']}")
    return ", ".join(parts)


def resample_note(spec: tables.Spec) -> str:
    """The caption's words for the bootstrap unit ('' without a bootstrap)."""
    if not spec.bootstrap:
        return ""
    unit = ("documents / source segments (all rows of a drawn one come along)" if spec.resample == "groups"
            else "items (rows: summaries / translations, each drawn on its own)")
    return f" — {round(100 * (1 - spec.alpha), 1):g}% intervals: percentile bootstrap over {unit}"


def quality_section(ds, stem: str, spec: tables.Spec, out: Path, console, progress: Progress):
    """Quality tables (long csv and wide md / csv / tex); prints the table. Returns (long, lines)."""
    data = _config(ds)["data"]["name"]
    signature = f"{Signature({'data': data, 'n': len(ds.frame), **spec.fields()})}{resample_note(spec)}"
    with progress.steps(f"{stem} quality") as update:
        long = tables.quality(ds, spec, update)
    long.to_csv(out / f"{stem}_quality_long.csv", index=False)
    table = tables.to_table(long, f"{data}: correlation with human judgements", signature)
    console.print(render.rich(table))
    return long, write(out, f"{stem}_quality", table)


def bias_section(ds, stem: str, out: Path) -> list[str]:
    bias = tables.bias(ds)
    if bias.empty:
        return []
    data = _config(ds)["data"]["name"]
    fields = {"data": data, "n": len(ds.frame), "statistic": "biasscore"}
    grouped = any(v is not None for _, v in tables.targets(ds))
    if grouped:
        fields["split_by"] = ds.split_by
    note = f"{BIAS_NOTE} | per {ds.split_by} (normalised and correlated within each), AVG = their mean" if grouped \
        else BIAS_NOTE
    signature = f"{Signature(fields)} — {note}"
    return write(out, f"{stem}_bias", tables.to_table(bias, f"{data}: {BIAS_TITLE}", signature))


ACCURACY_NOTES = {
    "summac": ("quantized accuracy, SummaC benchmark protocol: human label = SummaC's (SummEval: most of the 3 "
               "experts gave 5, from their ratings where the data has them, else certain from their mean; other "
               "data: top score); rows cut alternately "
               "(even positions dev, odd test); threshold = the percentile (0, 0.2, ..., 99.8) of the dev scores "
               "with the best balanced accuracy of score > threshold; reported: balanced accuracy on the test cut "
               "(a constant metric gets 0.5)"),
    "topk": ("quantized accuracy, cscore's top-k rule (CDM Table 5 does not say how it cuts): human label = top "
             "score, prediction = the metric's top share of the same size, plain accuracy on all rows"),
}


def quantized_section(ds, stem: str, out: Path, protocol: str = "summac") -> list[str]:
    data = _config(ds)["data"]["name"]
    acc = tables.quantized(ds, protocol)
    acc.to_csv(out / f"{stem}_quantized_accuracy_long.csv", index=False)  # with threshold and cut sizes
    fields = {"data": data, "n": len(ds.frame), "statistic": "quantized-accuracy", "protocol": protocol}
    signature = f"{Signature(fields)} — {ACCURACY_NOTES[protocol]}"
    title = f"{data}: quantized accuracy, {'SummaC protocol' if protocol == 'summac' else 'top-k rule'} " \
            "(higher is better)"
    return write(out, f"{stem}_quantized_accuracy", tables.to_table(acc, title, signature))


def pairwise_section(ds, stem: str, out: Path) -> list[str]:
    acc = tables.pairwise(ds)
    if acc.empty:
        return []
    acc.to_csv(out / f"{stem}_pairwise_accuracy_long.csv", index=False)  # with each cell's epsilon
    data = _config(ds)["data"]["name"]
    fields = {"data": data, "n": len(ds.frame), "statistic": "acc-eq", "level": "item", "ties": "calibrated"}
    signature = f"{Signature(fields)} — {PAIRWISE_NOTE}"
    title = f"{data}: pairwise accuracy with tie calibration (higher is better)"
    return write(out, f"{stem}_pairwise_accuracy", tables.to_table(acc, title, signature))


KENDALL_NAMES = {"b": "tau_b", "c": "tau_c", "23": "tau_23", "acc23": "acc_23", "like": "Kendall-like"}


def plot_caption(ds, spec: tables.Spec, items: int) -> str:
    """Which correlation, split and n a plot of the quality table shows, and what its bars are."""
    cfg = _config(ds)
    kind = spec.kind.capitalize() + (f" ({KENDALL_NAMES.get(spec.variant, spec.variant)})" if spec.variant else "")
    split = (cfg.get("split") or {}).get("use") or "all"
    unit = "documents" if "group" in ds.frame and spec.resample == "groups" else "rows"
    caption = f"{kind}, {spec.level} level, split {split}, n = {len(ds.frame)} rows"
    caption += f" of {items} documents" if unit == "documents" else ""
    if spec.bootstrap:
        caption += f"; bars: {round(100 * (1 - spec.alpha), 1):g}% bootstrap intervals over {unit}"
    return caption


def task_of(ds) -> str:
    """The dataset's task (summarization, translation, ...), for the all-datasets tables."""
    if "task" in ds.frame.columns and ds.frame["task"].notna().any():
        return file_stem(ds.frame["task"].dropna().iloc[0])
    return "datasets"


def combined_section(longs: list[tuple[str, str, object]], spec: tables.Spec, out: Path, console) -> list[str]:
    """Per task (``(stem, task, quality long table)``), every dataset's quality columns side by side
    (``<stem>:<column>``) and AVG = their mean, as ContrastScore Table 1 averages QAGS-XSum and the
    four SummEval aspects and Table 2 the six MQM language pairs; ``all_<task>_quality.*``, for
    every task with two datasets or more."""
    lines = []
    for task in dict.fromkeys(t for _, t, _ in longs):
        part = [(stem, long) for stem, t, long in longs if t == task]
        if len(part) < 2:
            continue
        stem = f"{COMBINED_STEM}_{task}"
        long = tables.combined(part)
        long.to_csv(out / f"{stem}_quality_long.csv", index=False)
        fields = {"datasets": ",".join(s for s, _ in part), **spec.fields()}
        note = ("each cell the value of its dataset's quality table (intervals and clusters there); AVG = the mean "
                "over every column of every dataset, nan where a row lacks one")
        table = tables.to_table(long, f"all {task} datasets: correlation with human judgements",
                                f"{Signature(fields)} — {note}")
        console.print(render.rich(table))
        lines += ["", f"Files `{stem}_*`: the quality columns of {len(part)} {task} datasets side by side"]
        lines += write(out, f"{stem}_quality", table)
    return lines


def sweep_plot(ds, long, stem: str, folder: Path, title: str, caption: str = "", warning: str = "") -> None:
    params = swept_params(ds)
    mains = {lb for lb, r in ds.rows.items() if r["main"]}
    if len(params) == 1:
        p = params[0]
        sub = long[long["label"].isin(mains)].copy()
        sub[p] = sub["label"].map(lambda lb: ds.rows[lb]["params"][p])
        sub["series"] = sub["target"]
        fig = plots.correlation_vs_param_figure(sub, p, title, caption, warning)
        plots.save(fig, folder / f"{stem}_corr_vs_{file_stem(p)}.png")
    elif len(params) == 2:
        sub = long[(long["target"] == "AVG") & long["label"].isin(mains)].copy()
        for p in params:
            sub[p] = sub["label"].map(lambda lb, p=p: ds.rows[lb]["params"][p])
        fig = plots.heatmap_figure(sub, params[0], params[1], f"{title} ({caption.split(';')[0]}), AVG")
        plots.save(fig, folder / f"{stem}_{file_stem(params[0])}_x_{file_stem(params[1])}.png")


def plot_section(ds, long, stem: str, out: Path, progress: Progress, spec: tables.Spec, items: int) -> None:
    """The PNGs; ``items``: the units the bootstrap resamples (documents, or rows)."""
    folder = out / "plots"
    progress.say(f"{stem}: plots")
    title = f"{_config(ds)['data']['name']}: correlation with human judgements"
    caption = plot_caption(ds, spec, items)
    sweep_plot(ds, long, stem, folder, title, caption, units_warning(items, spec) if spec.bootstrap else "")
    score_cols = [f"{rundir.SCORE}{lb}" for lb in list(ds.rows)[:MAX_DISTRIBUTION_ROWS]]
    plots.save(plots.distribution_figure(ds.frame, score_cols, ds.humans), folder / f"{stem}_distributions.png")
    points = tables.speed_points(ds, long)
    if points.empty:
        progress.say(f"{stem}: no speed figures in metrics.json; speed_vs_quality.png not written")
        return
    if len(points) < 2:  # one dot compares nothing
        r = points.iloc[0]
        progress.say(f"{stem}_speed_vs_quality.png not written: every row comes from one forward pass ({r['label']}: "
                     f"{r['samples_per_second']:.1f} samples/s, AVG {r['value']:.3f}); a speed-vs-quality plot "
                     "needs runs with several model pairs")
        return
    ylabel = f"{caption.split(',')[0]} (AVG)"
    plots.save(plots.speed_vs_quality_figure(points, f"{title}\n{caption.split(';')[0]}", ylabel),
               folder / f"{stem}_speed_vs_quality.png")


def like_note(unreachable: dict[str, float], spec: tables.Spec) -> str:
    """One line for the Kendall-like columns in which no pair of human scores differs by the
    threshold (``tables.unreachable_like_threshold``); empty when there are none."""
    if not unreachable:
        return ""
    cols = ", ".join(f"{name} {d:g}" for name, d in unreachable.items())
    return (f"Kendall-like counts only pairs whose human scores differ by >= {spec.like_threshold:g}, and no pair "
            f"at level {spec.level} does (largest difference: {cols}): every Kendall-like value there is nan; "
            f"set --kendall-threshold on the scale of the human scores ({tables.KENDALL_LIKE_THRESHOLD:g} is WMT DA's, "
            "on 0-100)")


def warn(stem: str, text: str, console) -> list[str]:
    """``text`` (if any) as one yellow console line and as report.md's bold line under the files."""
    if not text:
        return []
    console.print(f"[yellow]{escape(stem)}: {escape(text)}[/]", soft_wrap=True)  # one line in a log too
    return ["", f"**{text}**"]


def units_warning(items: int, spec: tables.Spec) -> str:
    """``few_units_warning`` for a quality table: its bootstrap resamples ``spec.resample`` units
    (``items`` of them), its permutations items."""
    what = " and ".join(w for w, n in (("the bootstrap intervals", spec.bootstrap),
                                       ("the significance clusters", spec.permutations)) if n)
    unit = "items (documents / source segments)" if spec.resample == "groups" else "rows"
    return few_units_warning(items, unit, what) if what else ""


def dataset_section(ds, stem: str, spec: tables.Spec, out: Path, console, progress: Progress,
                    longs: list | None = None) -> list[str]:
    grouped = "group" in ds.frame and spec.resample == "groups"
    items = ds.frame["group"].nunique() if grouped else len(ds.frame)
    progress.say(f"{stem}: {len(ds.frame)} rows, {items} items, {len(ds.rows)} score rows x "
                 f"{len(tables.targets(ds)) + 1} columns; {spec.bootstrap} bootstrap resamples, "
                 f"{spec.permutations} permutations")
    lines = ["", f"Files `{stem}_*`: {len(ds.frame)} rows of {describe_key(ds.key)}"]
    lines += warn(stem, units_warning(items, spec), console)
    long, quality_lines = quality_section(ds, stem, spec, out, console, progress)
    if longs is not None:
        longs.append((stem, task_of(ds), long))
    lines += warn(stem, like_note(tables.unreachable_like_threshold(ds, spec), spec), console)
    lines += (quality_lines + bias_section(ds, stem, out) + quantized_section(ds, stem, out, spec.accuracy)
              + pairwise_section(ds, stem, out))
    plot_section(ds, long, stem, out, progress, spec, items)
    return lines


def judge_units_warning(rep: judge.JudgeReport, spec: tables.Spec) -> str:
    """``few_units_warning`` for the judge's bootstrap: the fewest documents (rows without a group
    column) behind a reported correlation."""
    if not spec.bootstrap or rep.long.empty:
        return ""
    grouped = "group" in rep.study.points[0].frame.columns and spec.resample == "groups"
    unit, count = ("documents", "n_groups") if grouped else ("rows", "n")
    return few_units_warning(int(rep.long[count].min()), f"{unit} in the reported rows",
                             "the bootstrap intervals (±)")


def judge_section(runs, spec: tables.Spec, out: Path, console, progress: Progress,
                  select_by: str = "spearman") -> list[str]:
    """The judge studies among ``runs`` (``metaeval.judge``): tables (md / csv / tex), their long
    csv files and plots; prints the tables. Returns report.md's lines."""
    criterion = judge.Criterion(select_by, spec.level, spec.variant, spec.like_threshold)
    studies = judge.collect(runs)
    lines = []
    for study, stem in zip(studies, map(file_stem, judge.stems(studies))):
        settings = study.settings()
        progress.say(f"{stem}: {len(study.points)} judge grid points, {len(settings)} (pair, range) settings; "
                     f"(lambda, t) chosen by dev {select_by}; {spec.bootstrap} bootstrap resamples")
        with progress.steps(f"{stem} correlations") as update:
            rep = judge.build(study, criterion, bootstrap=spec.bootstrap, seed=spec.seed, alpha=spec.alpha,
                              resample=spec.resample, progress=update)
        rep.long.to_csv(out / f"{stem}_correlation_long.csv", index=False)
        rep.grid.to_csv(out / f"{stem}_grid.csv", index=False)
        rep.invalid.to_csv(out / f"{stem}_invalid_long.csv", index=False)
        lines += ["", f"Files `{stem}_*`: judge runs on {study.data}, aspect {study.aspect}: "
                      f"{len(study.points)} grid points"]
        lines += warn(stem, judge_units_warning(rep, spec), console)
        if not study.has_dev_split:
            lines += ["", f"**{judge.NO_DEV}**"]
            console.print(f"[bold yellow]{escape(stem)}: {escape(judge.NO_DEV)}[/]")
        notes = list(study.notes)
        if spec.like and study.points:
            d = tables.largest_human_difference(study.points[0].frame, study.human, spec.level)
            notes += [like_note({study.aspect: d}, spec)] if d < spec.like_threshold else []
        for note in notes:
            lines.append(f"- note: {note}")
            console.print(f"[yellow]{escape(stem)}: {escape(note)}[/]")
        for suffix, table in rep.tables.items():
            lines += write(out, f"{stem}_{suffix}", table)
            console.print(render.rich(table))
        progress.say(f"{stem}: plots")
        judge_plots.write(rep, out / "plots", stem, criterion)
    return lines


def _check_folder(root: Path) -> None:
    if not root.exists():
        raise ConfigError(f"{root} does not exist: cscore report reads a run directory, a multirun directory or "
                          "a folder holding runs")
    if not root.is_dir():
        raise ConfigError(f"{root} is a file: cscore report reads a run directory, a multirun directory or a "
                          "folder holding runs")


def default_out(roots: list[Path]) -> Path:
    """``<dir>/report`` for one folder; for several, ``report`` in the folder that holds them all
    (a file-system root is refused: give ``--out``)."""
    if len(roots) == 1:
        return roots[0] / "report"
    import os

    parent = Path(os.path.commonpath([str(r.resolve()) for r in roots]))
    if parent == Path(parent.anchor):
        raise ConfigError(f"the folders have no common folder but {parent}: give the report's folder with --out")
    return parent / "report"


def notes(repeated: list[Path], paper: str | None, spec: tables.Spec, console) -> list[str]:
    """report.md's lines under the status: the runs found under several folders (also on the
    console) and the ``--paper`` preset the statistic came from."""
    lines = []
    if repeated:
        text = (f"{len(repeated)} run directories lie under more than one of the folders given and count once: "
                + ", ".join(map(str, repeated)))
        lines += ["", text]
        console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True)
    if paper:
        lines += ["", f"statistic: --paper {paper}: {PAPERS[paper]['says']} ({spec.describe()})"]
    return lines


def report(root: Path | list[Path], spec: tables.Spec, out: Path | None = None, console=None,
           progress: Progress | None = None, select_by: str = "spearman", combined: bool = False,
           paper: str | None = None) -> Path:
    """One report over every run under ``root`` (a folder, or several: a run found under more
    than one of them counts once, and the report says so). ``combined``: also the quality
    columns of all datasets side by side with one AVG (``combined_section``); ``paper``: the
    ``--paper`` preset the statistic came from, named in report.md."""
    from rich.console import Console

    from cscore.cli.pipeline import kinds
    from cscore.scorers import methods

    console = console or Console()
    progress = progress or Progress()
    roots = [Path(r) for r in (root if isinstance(root, (list, tuple)) else [root])]
    for r in roots:
        _check_folder(r)
    runs, per_root, repeated = runs_under(roots)
    where = ", ".join(map(str, roots))
    if not runs:
        raise CscoreError(f"no cscore run directories (with config.yaml) under {where}")
    out = out or default_out(roots)
    if (problem := folder_problem(out)) is not None:  # before anything is computed
        raise ConfigError(f"cannot write the report to {out}: {problem}")
    (out / "plots").mkdir(parents=True, exist_ok=True)
    outcome = run_status(runs)
    missing = [m if len(roots) == 1 else f"{r}: {m}" for r, found in zip(roots, per_root)
               for m in missing_jobs(r, found)]
    status = outcome.line(len(missing))
    progress.say(f"{len(runs)} run directories under {where}; {status}")
    lines = [f"# cscore report: {where}", "", status] + notes(repeated, paper, spec, console)
    lines += [*outcome.lines(), *[f"- missing: {m}" for m in missing]]

    judge_methods = kinds.methods_of("judge")  # the methods whose kind writes a judge section
    judge_runs = [r for r in runs if judge.is_judge_run(r, judge_methods)]
    datasets = tables.collect([r for r in runs if not judge.is_judge_run(r, judge_methods)], methods.with_defaults)
    longs: list = []
    for ds, stem in zip(datasets, stems(datasets)):
        lines += dataset_section(ds, stem, spec, out, console, progress, longs)
    if combined:
        lines += combined_section(longs, spec, out, console)
    if judge_runs:
        lines += judge_section(judge_runs, spec, out, console, progress, select_by)

    speed = tables.speed(runs)
    if not speed.empty:
        ssig = f"{Signature({'table': 'speed', 'phase': 'scoring'})} — scoring phase only; model load separate"
        lines += write(out, "speed", render.from_frame(speed.round(3).set_index("run"), "Speed", ssig))
    (out / "report.md").write_text("\n".join(lines) + "\n")
    for m in missing:
        console.print(f"[yellow]missing: {escape(m)}[/]")
    for line in outcome.lines():
        style = {"failed": "red", "finished later": "dim"}.get(line[2:].split(":")[0], "yellow")
        console.print(f"[{style}]{escape(line[2:])}[/]")
    console.print(f"report written to [bold]{escape(str(out))}[/] in {progress.elapsed():.1f}s")
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the usage block
        self.exit(2, f"cscore: error: {message} (cscore report --help for the options)\n")


def spec_from_args(args) -> tables.Spec:
    """The report's statistic from the command line: ``--kendall X`` alone means the Kendall
    correlation with variant X; with ``--correlation pearson|spearman`` it is an error, as is
    ``--kendall-threshold`` without ``--kendall like`` (``tables.Spec`` checks every value).
    ``--paper P`` fills in what the command line leaves out: its statistic (``--correlation``,
    ``--kendall``) unless either is given, its ``--level``, ``--average`` and ``--resample`` unless
    given; without it: Pearson at the segment level, resampling groups."""
    preset = PAPERS.get(getattr(args, "paper", None) or "", {})
    own = args.correlation is not None or args.kendall is not None
    correlation, variant = args.correlation, args.kendall
    if not own:
        correlation, variant = preset.get("correlation"), preset.get("kendall")
    kind = correlation or ("kendall" if variant is not None else "pearson")
    level = args.level or preset.get("level", "segment")
    average = args.average or (preset.get("average") if not own and level in ("item", "system_grouped") else None)
    return tables.Spec(level, kind, variant, args.bootstrap, args.permutations, args.seed, args.alpha,
                       args.kendall_threshold, resample=args.resample or preset.get("resample", "groups"),
                       accuracy=args.accuracy, average=average or "macro", ties=args.ties)


def main(argv: list[str]) -> None:
    ap = _Parser(prog="cscore report", description=__doc__)
    ap.add_argument("path", type=Path, nargs="+",
                    help="a run directory, a multirun directory or any folder holding runs; several make one report "
                         "over all their runs (one found under two of them counts once)")
    ap.add_argument("--paper", default=None, choices=list(PAPERS),
                    help="the statistic that paper's tables report (options given here win): contrastscore = Pearson "
                         "+ the all-datasets table with Table 1's AVG; cdm = Spearman; cdjudge = Spearman, bootstrap "
                         "over summaries; t5score = --level item --kendall like --average micro (WMT20 seg-k)")
    ap.add_argument("--level", default=None, choices=["segment", "item", "system_grouped", "system"],
                    help="default: segment (or the --paper preset's)")
    ap.add_argument("--correlation", default=None, choices=["pearson", "spearman", "kendall"],
                    help="default: pearson, or kendall when --kendall is given")
    ap.add_argument("--kendall", default=None,
                    help="Kendall variant: b (default), c, 23, acc23, like; implies --correlation kendall")
    ap.add_argument("--kendall-threshold", type=float, default=None,
                    help="--kendall like: count only pairs whose human scores differ by at least this much "
                         f"(default {tables.KENDALL_LIKE_THRESHOLD:g}, WMT DA points on 0-100; e.g. 1 for 1-5 ratings)")
    ap.add_argument("--average", default=None,
                    help="--level item / system_grouped: macro (the plain mean of the per-group values; the default) "
                         "or micro (weighted as mt-metrics-eval's macro=False: --kendall like pools the pairs of "
                         "all groups, WMT20's seg-k)")
    ap.add_argument("--ties", default=None,
                    help="--kendall acc23 / 23: calibrated (the metric-tie epsilon that maximises the value, WMT23 / "
                         "mt-metrics-eval KendallWithTiesOpt; acc23's default) or exact (epsilon 0; 23's default)")
    ap.add_argument("--combined", action="store_true",
                    help="also all_<task>_quality: every dataset's columns side by side and their mean, per task "
                         "(on with --paper contrastscore)")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples (0: no CIs)")
    ap.add_argument("--resample", default=None,
                    help="bootstrap unit: groups (documents / source segments, all their rows come along; the "
                         "default) or items (rows: summaries, translations)")
    ap.add_argument("--accuracy", default="summac",
                    help="quantized accuracy: summac (threshold on the dev cut, balanced accuracy on the test "
                         "cut; the default) or topk (cscore's earlier top-share rule, plain accuracy)")
    ap.add_argument("--permutations", type=int, default=1000, help="permutations per test (0: no clusters)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alpha", type=float, default=0.05, help="CI level 1 - alpha and significance level, in (0, 1)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: <path>/report; several paths: report/ in the folder holding them)")
    ap.add_argument("--select-by", default="spearman", choices=list(judge.KINDS),
                    help="judge runs: the dev correlation that picks (lambda, t) per pair and score range")
    args = ap.parse_args(argv)
    from cscore.cli.exits import one_line_errors

    roots = [Path(p) for p in (args.path if isinstance(args.path, (list, tuple)) else [args.path])]
    with one_line_errors(), writing("the report", args.out or default_out(roots)):  # a full disk: one line
        combined = args.combined or bool(PAPERS.get(args.paper or "", {}).get("combined"))
        report(args.path, spec_from_args(args), args.out, select_by=args.select_by, combined=combined,
               paper=args.paper)
