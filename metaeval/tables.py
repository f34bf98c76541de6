"""The quality tables: runs grouped by dataset (``collect``), then the correlation of every score
row with intervals and significance clusters (``quality``). Works on plain tables."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.errors import ConfigError, CscoreError
from cscore.metaeval import render
from cscore.metaeval.clusters import significance_clusters
from cscore.metaeval.correlation import grid
from cscore.metaeval.levels import Grouping, KendallOptions
from cscore.metaeval.names import differing, numbered
from cscore.metaeval.pairwise import TieCalibratedStat
from cscore.metaeval.resampling import bootstrap_ci
from cscore.metaeval.run_labels import flat
from cscore.metaeval.spec import RESAMPLE, Spec
from cscore.metaeval.statistic import LevelStat, MeanStat
from cscore.rundir import Run


@dataclass
class Dataset:
    """The scored examples of one dataset/split, with every score column of every run on it."""

    key: str
    frame: pd.DataFrame
    humans: list[str]
    split_by: str | None
    rows: dict = field(default_factory=dict)  # label -> {"run": Run, "variant": str, "params": dict}


def _effective(method: str, params: dict, defaults: Callable[[str, dict], dict] | None) -> dict:
    """The recorded parameters over the method's defaults (``defaults(method, params)``), so that two
    records of one computation compare equal; unchanged for a method ``defaults`` does not know."""
    if defaults is None:
        return dict(params)
    try:
        return defaults(method, params)
    except (CscoreError, ImportError, OSError):
        return dict(params)


def shown(value) -> str:
    """A parameter value as a label (and a run's signature) shows it, as the config writes it: null, true, [1,5];
    a float exactly (1e-30, -inf)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _labels(entries: list[dict]) -> list[str]:
    """One label per row: ``<pair> <variant>`` (a baseline: ``<variant>``), plus the parameters, then the
    pair settings, that tell rows of one label apart; rows alike in all of that numbered (``#2``)."""
    labels = [e["variant"] if e["method"] == "baseline"  # a baseline reads no pair
              else f"{e['run'].config['pair'].get('name', '?')} {e['variant']}" for e in entries]
    for with_keys in (lambda e: e["params"], lambda e: flat(e["run"].config["pair"], lists_as_json=False)):
        groups: dict[str, list[int]] = {}
        for i, lb in enumerate(labels):
            groups.setdefault(lb, []).append(i)
        for idx in (g for g in groups.values() if len(g) > 1):
            values = [with_keys(entries[i]) for i in idx]
            keys = differing(values)
            for i, v in zip(idx, values):
                labels[i] = " ".join([labels[i]] + [f"{k}={shown(v.get(k))}" for k in keys])
    return numbered(labels, " #")


def _data_key(run: Run, prompt: bool = True) -> str:
    d, split = run.config["data"], run.config.get("split", {})
    key = {"data": {k: v for k, v in d.items() if k != "template"}, "split": split}
    if prompt:
        key["prompt"] = run.config.get("prompt", {}).get("condition")
    return json.dumps(key, sort_keys=True, default=str)


def _is_baseline(run: Run) -> bool:
    return run.config.get("method", {}).get("name") == "baseline"


def _group(runs: list[Run]) -> dict[str, list[Run]]:
    """Complete runs by dataset (data options, split and prompt condition). A baseline reads no
    prompt: its rows join every group of its data and split (a group of their own if none)."""
    by_data: dict[str, list[Run]] = {}
    done = [r for r in runs if r.complete]
    for run in done:
        if not _is_baseline(run):
            by_data.setdefault(_data_key(run), []).append(run)
    for run in done:
        if _is_baseline(run):
            same = [k for k, g in by_data.items() if _data_key(g[0], prompt=False) == _data_key(run, prompt=False)
                    and not _is_baseline(g[0])]
            for k in same or [_data_key(run)]:
                by_data.setdefault(k, []).append(run)
    return by_data


def collect(runs: list[Run], defaults: Callable[[str, dict], dict] | None = None) -> list[Dataset]:
    """Complete runs grouped by dataset, their score columns merged; a row repeated across runs appears once."""
    out = []
    for key, group in _group(runs).items():  # a group holds one run at least
        first, cfg = group[0].scores(), group[0].config
        base = first[[c for c in first.columns if not c.startswith(rundir.SCORE)]].copy()
        ds = Dataset(key, base, [c for c in first.columns if c.startswith(rundir.HUMAN)],
                     cfg.get("meta", {}).get("split_by") or cfg["data"].get("split_by"))
        entries: dict[str, dict] = {}
        for run in group:
            scores = (first if run is group[0] else run.scores()).set_index("id").reindex(base["id"])
            for v in run.done_metrics()["variants"]:
                main = v["name"] == run.config["method"].get("variant")
                pair = None if v["method"] == "baseline" else run.config["pair"]  # a baseline reads no pair
                params = _effective(v["method"], v["params"], defaults)
                ident = json.dumps([pair, v["method"], params], sort_keys=True, default=str)
                if ident in entries:
                    entries[ident]["main"] |= main
                    continue
                entries[ident] = {"run": run, "variant": v["name"], "method": v["method"], "params": params,
                                  "main": main, "values": scores[f"{rundir.SCORE}{v['name']}"].to_numpy()}
        rows = list(entries.values())
        for label, e in zip(_labels(rows), rows):
            base[f"{rundir.SCORE}{label}"] = e["values"]
            ds.rows[label] = {"run": e["run"], "variant": e["variant"], "params": e["params"], "main": e["main"]}
        out.append(ds)
    return out


def targets(ds: Dataset) -> list[tuple[str, str | None]]:
    """(human column, split value or None) for every column of the table."""
    if ds.split_by and ds.split_by in ds.frame.columns and ds.frame[ds.split_by].notna().any():
        values = sorted(ds.frame[ds.split_by].dropna().unique())
        return [(h, v) for h in ds.humans for v in values]
    return [(h, None) for h in ds.humans]


def target_name(h: str, v, n_humans: int) -> str:
    name = h.removeprefix(rundir.HUMAN)
    if v is None:
        return name
    return str(v) if n_humans == 1 else f"{name}@{v}"


def statistic(spec: Spec, human: str, subset: tuple | None = None) -> LevelStat | TieCalibratedStat:
    """The statistic ``spec`` names, against ``human``, on the rows of ``subset`` (column, value)."""
    if spec.calibrated:
        return TieCalibratedStat(human, spec.level, spec.variant or "acc23", subset=subset)
    return LevelStat(human, spec.level, spec.kind, spec.variant, subset=subset,
                     grouping=Grouping(average=spec.average), options=KendallOptions(thresh=spec.like_threshold))


def columns(ds: Dataset, spec: Spec) -> list[tuple[str, LevelStat | TieCalibratedStat | MeanStat]]:
    """(name, statistic) of every column of the quality table: one per target, then AVG (their mean)."""
    tgts = targets(ds)
    stats = [statistic(spec, h, None if v is None else (ds.split_by, v)) for h, v in tgts]
    names = [target_name(h, v, len(ds.humans)) for h, v in tgts]
    return list(zip(names, stats)) + [("AVG", MeanStat(stats, "AVG"))]


MAX_CALIBRATED_PAIRS = 5_000_000  # pairs a tie-calibrated cell may search (all held in memory, ~40 bytes each)


def _check_pairs(ds: Dataset, spec: Spec, cols) -> None:
    """Tie calibration holds every pair of a cell in memory: refuse a table with too many."""
    for name, stat in cols:
        if not isinstance(stat, TieCalibratedStat):
            continue
        for lb in ds.rows:
            n = stat.pairs_needed(ds.frame, f"{rundir.SCORE}{lb}")
            if n > MAX_CALIBRATED_PAIRS:
                raise ConfigError(f"tie-calibrated {spec.variant} at --level {spec.level} searches all {n:,} pairs of "
                                  f"column {name} at once, more than {MAX_CALIBRATED_PAIRS:,}: use --level item "
                                  f"(WMT23's segment level: pairs within each source segment) or --ties exact")


def quality(ds: Dataset, spec: Spec, progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Long table: label, target, value, low, high, rank (significance cluster, 1 = best), and each
    cell's ``epsilon`` for a tie-calibrated statistic; ``progress(done, total, what)`` after every step."""
    labels = list(ds.rows)
    cols = columns(ds, spec)
    _check_pairs(ds, spec, cols)
    total, done = len(cols) * (len(labels) + 1), 0
    rows = []
    for name, stat in cols:
        ranks = _cluster_ranks(ds, spec, stat, labels)
        done += 1
        if progress:
            progress(done, total, f"{name}: significance clusters, {spec.permutations} permutations per pair")
        for lb in labels:
            col = f"{rundir.SCORE}{lb}"
            if spec.bootstrap:
                point, low, high = bootstrap_ci(ds.frame, stat, col, resample=RESAMPLE[spec.resample], n=spec.bootstrap,
                                                seed=spec.seed, alpha=spec.alpha)
            else:
                point, low, high = stat(ds.frame, col), math.nan, math.nan
            rows.append({"label": lb, "target": name, "value": point, "low": low, "high": high,
                         "rank": ranks.get(lb)})
            if spec.calibrated:  # the metric-tie threshold chosen for the cell (none for AVG)
                rows[-1]["epsilon"] = stat.calibration(ds.frame, col).epsilon \
                    if isinstance(stat, TieCalibratedStat) else math.nan
            done += 1
            if progress:
                progress(done, total, f"{name}: bootstrap {lb}, {spec.bootstrap} resamples")
    return pd.DataFrame(rows)


def combined(longs: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """The quality tables of several datasets (``(stem, long)``) as one: ``<stem>:<column>`` for every
    column but AVG, then AVG over all of them (NaN where a row lacks one)."""
    parts = [long.loc[long["target"] != "AVG", ["label", "target", "value"]].assign(
        target=lambda f, stem=stem: stem + ":" + f["target"].astype(str)) for stem, long in longs]
    wide = grid(pd.concat(parts, ignore_index=True), "value")
    avg = wide.mean(axis=1, skipna=False)
    full = wide.stack(future_stack=True).rename("value").reset_index()
    return pd.concat([full, pd.DataFrame({"label": avg.index, "target": "AVG", "value": avg.to_numpy()})],
                     ignore_index=True)


def _cluster_ranks(ds: Dataset, spec: Spec, stat, labels: list[str]) -> dict:
    if not spec.permutations or len(labels) < 2:
        return {}
    clusters = significance_clusters(ds.frame, stat, [f"{rundir.SCORE}{lb}" for lb in labels], n=spec.permutations,
                                     seed=spec.seed, alpha=spec.alpha)
    return {c["metric"].removeprefix(rundir.SCORE): c["rank"] for c in clusters}


def largest_human_difference(frame: pd.DataFrame, human: str, level: str, subset: tuple | None = None) -> float:
    """The largest |difference| of two human scores a correlation at ``level`` compares; NaN without a pair."""
    f = frame if subset is None else frame[frame[subset[0]] == subset[1]]
    h = pd.to_numeric(f[human], errors="coerce")
    ok = np.isfinite(h.to_numpy(dtype=np.float64))
    key = "group" if level == "item" else "system"
    if level != "segment" and key not in f.columns:
        return math.nan
    if level in ("segment", "system"):  # one span: of the scores, or of the per-system means
        v = h[ok] if level == "segment" else h[ok].groupby(f[key][ok]).mean()
        spans = [v.max() - v.min()] if len(v) >= 2 else []
    else:
        by = h[ok].groupby(f[key][ok])
        spans = list((by.max() - by.min())[by.size() >= 2])
    return float(max(spans)) if spans else math.nan


def unreachable_like_threshold(ds: Dataset, spec: Spec) -> dict[str, float]:
    """Kendall-like only: the columns (name -> largest human difference) where no pair reaches the threshold."""
    threshold = spec.like_threshold  # None but for Kendall-like
    if threshold is None:
        return {}
    diffs = ((target_name(h, v, len(ds.humans)),
              largest_human_difference(ds.frame, h, spec.level, None if v is None else (ds.split_by, v)))
             for h, v in targets(ds))
    return {name: d for name, d in diffs if d < threshold}  # NaN (no pair at all) is no matter of the threshold


def to_table(long: pd.DataFrame, title: str, signature: str) -> render.Table:
    """label x target cells: 'value [low, high] (rank)', as far as the long table has them."""
    def cell(r):
        s = render.number(r["value"])
        if "low" in r and pd.notna(r.get("low")):
            s += f" [{r['low']:.3f}, {r['high']:.3f}]"
        if "rank" in r and pd.notna(r.get("rank")):
            s += f" ({int(r['rank'])})"
        return s

    return render.from_frame(grid(long.assign(cell=long.apply(cell, axis=1)), "cell"), title, signature)
