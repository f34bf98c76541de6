"""The report's figures of one dataset: correlation against the swept parameters, score distributions,
speed against quality."""

from __future__ import annotations

from pathlib import Path

from cscore import rundir
from cscore.metaeval import plots, side_tables
from cscore.metaeval.sections import config_of, file_stem, units_warning
from cscore.metaeval.spec import Spec
from cscore.metaeval.tables import Dataset
from cscore.progress import Progress

NUMERIC = (int, float)
MAX_DISTRIBUTION_ROWS = 6  # metric panels in distributions.png
KENDALL_NAMES = {"b": "tau_b", "c": "tau_c", "23": "tau_23", "acc23": "acc_23", "like": "Kendall-like"}


def swept_params(ds: Dataset) -> list[str]:
    """The numeric parameters that every main row has and that differ among them."""
    mains = [r for r in ds.rows.values() if r["main"]]
    keys = sorted({k for r in mains for k, v in r["params"].items() if isinstance(v, NUMERIC)})
    keys = [k for k in keys if all(isinstance(r["params"].get(k), NUMERIC) for r in mains)]
    return [k for k in keys if len({r["params"][k] for r in mains}) > 1]


def plot_caption(ds, spec: Spec, items: int) -> str:
    """Which correlation, split and n a plot of the quality table shows, and what its bars are."""
    cfg = config_of(ds)
    kind = spec.kind.capitalize() + (f" ({KENDALL_NAMES.get(spec.variant, spec.variant)})" if spec.variant else "")
    split = (cfg.get("split") or {}).get("use") or "all"
    unit = "documents" if "group" in ds.frame and spec.resample == "groups" else "rows"
    caption = f"{kind}, {spec.level} level, split {split}, n = {len(ds.frame)} rows"
    caption += f" of {items} documents" if unit == "documents" else ""
    if spec.bootstrap:
        caption += f"; bars: {round(100 * (1 - spec.alpha), 1):g}% bootstrap intervals over {unit}"
    return caption


def sweep_plot(ds, long, stem: str, folder: Path, title: str, caption: str = "", warning: str = "") -> None:
    params = swept_params(ds)
    mains = {lb for lb, r in ds.rows.items() if r["main"]}
    # one parameter: a line per column; two: a heatmap of AVG
    sub = long[long["label"].isin(mains) & ((long["target"] == "AVG") | (len(params) == 1))].copy()
    for p in params:
        sub[p] = sub["label"].map(lambda lb, p=p: ds.rows[lb]["params"][p])
    if len(params) == 1:
        fig = plots.correlation_vs_param_figure(sub.assign(series=sub["target"]), params[0], title, caption, warning)
        plots.save(fig, folder / f"{stem}_corr_vs_{file_stem(params[0])}.png")
    elif len(params) == 2:
        fig = plots.heatmap_figure(sub, params[0], params[1], f"{title} ({caption.split(';')[0]}), AVG")
        plots.save(fig, folder / f"{stem}_{file_stem(params[0])}_x_{file_stem(params[1])}.png")


def plot_section(ds, long, stem: str, out: Path, progress: Progress, spec: Spec, items: int) -> None:
    """The PNGs; ``items``: the units the bootstrap resamples (documents, or rows)."""
    folder = out / "plots"
    progress.say(f"{stem}: plots")
    title = f"{config_of(ds)['data']['name']}: correlation with human judgements"
    caption = plot_caption(ds, spec, items)
    sweep_plot(ds, long, stem, folder, title, caption, units_warning(items, spec) if spec.bootstrap else "")
    score_cols = [f"{rundir.SCORE}{lb}" for lb in list(ds.rows)[:MAX_DISTRIBUTION_ROWS]]
    plots.save(plots.distribution_figure(ds.frame, score_cols, ds.humans), folder / f"{stem}_distributions.png")
    points = side_tables.speed_points(ds, long)
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
