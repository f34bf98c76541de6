"""The report's sections on one dataset (quality, bias, quantized, pairwise and soft pairwise
accuracy) and the all-datasets table, each writing its files and returning report.md's lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.markup import escape

from cscore.metaeval import render, side_tables, tables
from cscore.metaeval.names import numbered
from cscore.metaeval.resampling import few_units_warning
from cscore.metaeval.signature import Signature
from cscore.metaeval.spec import KENDALL_LIKE_THRESHOLD, Spec
from cscore.metaeval.tables import Dataset
from cscore.progress import Progress

BIAS_TITLE = "likelihood bias, BiasScore (closer to 0 is better)"
BIAS_NOTE = ("BiasScore = Spearman(LS, US) in [-1, 1]; 0 = the metric's errors do not follow the likelihood; "
             "> 0: texts the expert finds likely are overrated, < 0: they are underrated | "
             "LS = expert mean per-token log-lik, US = minmax(metric) - minmax(human)")
PAIRWISE_NOTE = ("acc_eq (Deutsch et al. 2023, WMT23 segment level): pairs of systems within each source "
                 "segment, correct when metric and human order them alike or both tie them; metric tie = "
                 "abs(difference) <= epsilon, epsilon chosen per cell to maximise the mean over segments")
COMBINED_STEM = "all"  # all_<task>_quality.{md,csv,tex}: every dataset's columns side by side, one AVG


def write(out: Path, stem: str, table: render.Table) -> list[str]:
    """``<stem>.{md,csv,tex}``; returns report.md's lines for the table."""
    render.save(table, out, stem)
    return ["", render.markdown(table)]


def config_of(ds: Dataset) -> dict:
    return next(iter(ds.rows.values()))["run"].config


def side_table(ds, out: Path, stem: str, frame, statistic: dict, note: str, title: str,
               long: bool = False) -> list[str]:
    """``frame`` as ``<stem>.{md,csv,tex}`` (and ``<stem>_long.csv`` with ``long``), signed with ``statistic``."""
    if long:
        frame.to_csv(out / f"{stem}_long.csv", index=False)
    data = config_of(ds)["data"]["name"]
    fields = {"data": data, "n": len(ds.frame), **statistic}
    return write(out, stem, tables.to_table(frame, f"{data}: {title}", f"{Signature(fields)} — {note}"))


def file_stem(text: str) -> str:
    """``text`` as a file-name part: no path separators, no leading dots."""
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", str(text)).strip("._") or "data"


def stems(datasets: list[Dataset]) -> list[str]:
    """File-name stem of each dataset: ``<data>`` or ``<data>_<split>`` (split.use), repeats numbered."""
    names = []
    for ds in datasets:
        cfg = config_of(ds)
        split = cfg.get("split", {}).get("use", "all")
        names.append(file_stem(cfg["data"]["name"] + ("" if split in (None, "all") else f"_{split}")))
    return numbered(names)


def _options(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()) if v is not None)


def describe_key(key: str) -> str:
    """A ``Dataset.key`` as text: ``data demo (judge_aspect=consistency), split all, prompt source``."""
    d = json.loads(key)
    data, split = dict(d.get("data") or {}), dict(d.get("split") or {})
    name, use = data.pop("name", "?"), split.pop("use", "all")
    parts = [f"data {name}" + (f" ({_options(data)})" if _options(data) else "")]
    parts.append(f"split {use}" + (f" ({_options(split)})" if use not in (None, "all") and _options(split) else ""))
    if d.get("prompt") is not None:
        parts.append(f"prompt {d['prompt']}")
    return ", ".join(parts)


def quality_section(ds, stem: str, spec: Spec, out: Path, console, progress: Progress):
    """Quality tables (long csv, wide md / csv / tex), printed unless ``console`` is None; (long, lines). The
    signature says the bootstrap unit and what the ``(1)``, ``(2)`` after a value mean."""
    data = config_of(ds)["data"]["name"]
    signature = str(Signature({"data": data, "n": len(ds.frame), **spec.fields()}))
    if spec.bootstrap:
        unit = ("documents / source segments (all rows of a drawn one come along)" if spec.resample == "groups"
                else "items (rows: summaries / translations, each drawn on its own)")
        signature += f" — {round(100 * (1 - spec.alpha), 1):g}% intervals: percentile bootstrap over {unit}"
    with progress.steps(f"{stem} quality") as update:
        long = tables.quality(ds, spec, update)
    long.to_csv(out / f"{stem}_quality_long.csv", index=False)
    if "rank" in long and long["rank"].notna().any():
        signature += (f" — (k) = significance cluster per column, 1 = best: a row opens the next cluster when a row "
                      f"of the current one beats it at alpha = {spec.alpha:g} (one-sided permutation test, "
                      f"PERM-BOTH, {spec.permutations} permutations; mt-metrics-eval's AssignRanks); rows of one "
                      "cluster are not told apart")
    table = tables.to_table(long, f"{data}: correlation with human judgements", signature)
    if console is not None:
        console.print(render.rich(table))
    return long, write(out, f"{stem}_quality", table)


def bias_section(ds, stem: str, out: Path) -> list[str]:
    bias = side_tables.bias(ds)
    if bias.empty:
        return []
    grouped = any(v is not None for _, v in tables.targets(ds))
    statistic = {"statistic": "biasscore", **({"split_by": ds.split_by} if grouped else {})}
    note = f"{BIAS_NOTE} | per {ds.split_by} (normalised and correlated within each), AVG = their mean" if grouped \
        else BIAS_NOTE
    return side_table(ds, out, f"{stem}_bias", bias, statistic, note, BIAS_TITLE)


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
    acc = side_tables.quantized(ds, protocol)  # its long csv with threshold and cut sizes
    title = f"quantized accuracy, {'SummaC protocol' if protocol == 'summac' else 'top-k rule'} " \
            f"(higher is better){approximate_labels(acc)}"
    return side_table(ds, out, f"{stem}_quantized_accuracy", acc,
                      {"statistic": "quantized-accuracy", "protocol": protocol}, ACCURACY_NOTES[protocol], title, True)


def approximate_labels(acc) -> str:
    """The title's words when SummaC's labels came from the experts' mean, not their ratings ('' otherwise)."""
    if "n_undecided" not in acc.columns or acc["n_undecided"].isna().all():
        return ""
    per = acc.dropna(subset=["n_undecided"]).drop_duplicates("target")
    counts = ", ".join(f"{t} {int(n)}" for t, n in zip(per["target"], per["n_undecided"]))
    return (f"; labels approximated from the mean of the experts' ratings (SummaC reads each expert's): "
            f"summaries the mean cannot decide, counted negative: {counts}; data.annotations=<SummEval's "
            "model_annotations.aligned.jsonl> gives SummaC's own labels")


def pairwise_section(ds, stem: str, out: Path) -> list[str]:
    acc = side_tables.pairwise(ds)
    if acc.empty:
        return []
    statistic = {"statistic": "acc-eq", "level": "item", "ties": "calibrated"}  # long csv: each cell's epsilon
    return side_table(ds, out, f"{stem}_pairwise_accuracy", acc, statistic, PAIRWISE_NOTE,
                      "pairwise accuracy with tie calibration (higher is better)", long=True)


SPA_NOTE = ("SPA (Thompson et al. 2024, WMT24 system level) = 1 - mean over system pairs of |p_human - p_metric|, "
            "p = one-sided paired permutation p-value that one system is better (sign flips over segments, shared "
            "by human and metric, float32 sums as mt-metrics-eval pce.py); PCE = 1 - SPA; segments where every "
            "system has human and metric scores")


def spa_section(ds, stem: str, out: Path, permutations: int, seed: int, console) -> list[str]:
    """``<stem>_spa.{md,csv,tex}``, ``<stem>_spa_long.csv`` and ``<stem>_spa_pvalues.csv`` (translation data),
    their settings said once on the console."""
    long, pvalues = side_tables.spa(ds, permutations, seed)
    if long.empty:
        return []
    pvalues.to_csv(out / f"{stem}_spa_pvalues.csv", index=False)
    console.print(escape(f"{stem}: soft pairwise accuracy (WMT24, system level; {permutations} sign-flip permutations, "
                         f"seed {seed}) in {stem}_spa.md"), highlight=False, soft_wrap=True)
    statistic = {"statistic": "spa", "level": "system", "permutations": permutations, "seed": seed,
                 "test": "sign-flip-one-sided"}
    return side_table(ds, out, f"{stem}_spa", long, statistic, SPA_NOTE,
                      "soft pairwise accuracy, WMT24 (higher is better)", long=True)


def task_of(ds) -> str:
    """The dataset's task (summarization, translation, ...), for the all-datasets tables."""
    if "task" in ds.frame.columns and ds.frame["task"].notna().any():
        return file_stem(ds.frame["task"].dropna().iloc[0])
    return "datasets"


def combined_section(longs: list[tuple[str, str, object]], spec: Spec, out: Path, console) -> list[str]:
    """``all_<task>_quality.*`` (``tables.combined``) per task of two datasets or more (``(stem, task, long)``)."""
    lines = []
    for task in dict.fromkeys(t for _, t, _ in longs):
        part = [(stem, long) for stem, t, long in longs if t == task]
        if len(part) < 2:
            lines += warn(part[0][0], single_note(task), console)
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


def single_note(task: str) -> str:
    """Why a task with one dataset gets no all-datasets table (``--paper contrastscore``'s AVG)."""
    return (f"the only {task} dataset here: no all_{task}_quality table (its AVG averages two datasets or more; "
            "ContrastScore Table 1: QAGS-XSum and SummEval, Table 2: the MQM language pairs); give cscore report "
            "the runs of every dataset, e.g. the folders of one run per dataset, in one command")


def like_note(unreachable: dict[str, float], spec: Spec) -> str:
    """One line on the Kendall-like columns no pair reaches (``tables.unreachable_like_threshold``), or ''."""
    if not unreachable:
        return ""
    cols = ", ".join(f"{name} {d:g}" for name, d in unreachable.items())
    return (f"Kendall-like counts only pairs whose human scores differ by >= {spec.like_threshold:g}, and no pair "
            f"at level {spec.level} does (largest difference: {cols}): every Kendall-like value there is nan; "
            f"set --kendall-threshold on the scale of the human scores ({KENDALL_LIKE_THRESHOLD:g} is WMT DA's, "
            "on 0-100)")


def warn(stem: str, text: str, console) -> list[str]:
    """``text`` (if any) as one yellow console line and as report.md's bold line under the files."""
    if not text:
        return []
    console.print(f"[yellow]{escape(stem)}: {escape(text)}[/]", soft_wrap=True)  # one line in a log too
    return ["", f"**{text}**"]


def units_warning(items: int, spec: Spec) -> str:
    """``few_units_warning`` for a quality table over ``items`` units."""
    what = " and ".join(w for w, n in (("the bootstrap intervals", spec.bootstrap),
                                       ("the significance clusters", spec.permutations)) if n)
    unit = "items (documents / source segments)" if spec.resample == "groups" else "rows"
    return few_units_warning(items, unit, what) if what else ""
