"""Paper-style tables from one or more runs: quality (correlations with CIs and significance
clusters), likelihood bias, quantized accuracy, pairwise accuracy (translation) and speed.
Works on plain tables; knows nothing of models."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from cscore.metaeval import render
from cscore.metaeval.bias import bias_score, quantized_accuracy
from cscore.metaeval.pairwise import acc_eq_at
from cscore.metaeval.runs import Run
from cscore.metaeval.uncertainty import LevelStat, MeanStat, bootstrap_ci, significance_clusters
from cscore import rundir


@dataclass
class Spec:
    level: str = "segment"
    kind: str = "pearson"
    variant: str | None = None  # Kendall variant: b (default), c, 23, acc23, like
    bootstrap: int = 1000
    permutations: int = 1000
    seed: int = 0
    alpha: float = 0.05

    def fields(self) -> dict:
        """The signature fields of this statistic (``cscore.metaeval.signature``)."""
        out = {"level": self.level, "correlation": self.kind}
        if self.kind == "kendall":
            out["kendall"] = self.variant or "b"
        return {**out, "bootstrap": self.bootstrap, "resample": "items", "seed": self.seed,
                "permutations": self.permutations, "test": "perm-both", "alpha": self.alpha}

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.fields().items())


@dataclass
class Dataset:
    """The scored examples of one dataset/split, with every score column of every run on it."""

    key: str
    frame: pd.DataFrame
    humans: list[str]
    split_by: str | None
    rows: dict = field(default_factory=dict)  # label -> {"run": Run, "variant": str, "params": dict}


def _label(run: Run, variant: str, varying: list[str], main: bool, params: dict | None = None,
           row_varying: list[str] | None = None) -> str:
    """``<pair> <variant>``; the method row adds the method keys that vary across the runs, a
    comparison row the keys of its own parameters that vary (e.g. ``norm=max`` when the runs pool
    differently), so that rows computed differently never share a label."""
    pair = run.config["pair"].get("name", "?")
    label = variant if run.config["method"].get("name") == "baseline" else f"{pair} {variant}"  # reads no pair
    own = [k for k in varying if k in run.config["method"]]  # a key of another method is not this row's
    if main and own:
        label += " " + " ".join(f"{k}={run.config['method'].get(k)}" for k in own)
    elif not main and row_varying:
        label += " " + " ".join(f"{k}={(params or {}).get(k)}" for k in row_varying)
    return label


def _row_varying(group: list[Run]) -> dict[str, list[str]]:
    """Per comparison-row name, the parameter keys whose values differ across the runs."""
    values: dict[str, dict[str, set]] = {}
    for run in group:
        for v in run.metrics.get("variants", []):
            if v["name"] == run.config["method"].get("variant"):
                continue
            for k, x in v["params"].items():
                values.setdefault(v["name"], {}).setdefault(k, set()).add(json.dumps(x, default=str))
            for k in values.get(v["name"], {}):
                if k not in v["params"]:
                    values[v["name"]][k].add("null")
    return {name: sorted(k for k, xs in keys.items() if len(xs) > 1) for name, keys in values.items()}


def _data_key(run: Run) -> str:
    d, split = run.config["data"], run.config.get("split", {})
    extra = {k: v for k, v in d.items() if k not in ("template",)}
    return json.dumps({"data": extra, "split": split, "prompt": run.config.get("prompt", {}).get("condition")},
                      sort_keys=True, default=str)


def collect(runs: list[Run]) -> list[Dataset]:
    """Group complete runs by dataset and merge their score columns (one row per example).
    Comparison rows repeated across a sweep (same variant, same parameters) appear once."""
    by_data: dict[str, list[Run]] = {}
    for run in runs:
        if run.complete:
            by_data.setdefault(_data_key(run), []).append(run)
    out = []
    for key, group in by_data.items():
        methods = [r.config["method"] for r in group if r.config["method"].get("name") != "baseline"]  # no keys
        keys = sorted({k for m in methods for k in m} - {"name", "variant"})
        varying = [k for k in keys if len({json.dumps(m.get(k), default=str) for m in methods}) > 1]
        row_varying = _row_varying([r for r in group if r.complete])
        base = None
        ds = Dataset(key, pd.DataFrame(), [], None)
        seen = {}
        for run in group:
            scores = run.scores()
            if base is None:
                base = scores[[c for c in scores.columns if not c.startswith(rundir.SCORE)]].copy()
                ds.humans = [c for c in scores.columns if c.startswith(rundir.HUMAN)]
                cfg = run.config
                ds.split_by = cfg.get("meta", {}).get("split_by") or cfg["data"].get("split_by")
            scores = scores.set_index("id").reindex(base["id"])
            for v in run.metrics["variants"]:
                main = v["name"] == run.config["method"].get("variant")
                pair = None if v["method"] == "baseline" else run.config["pair"]  # a baseline reads no pair
                ident = json.dumps([pair, v["method"], v["params"]], sort_keys=True, default=str)
                if ident in seen:
                    continue
                label = _label(run, v["name"], varying, main, v["params"], row_varying.get(v["name"]))
                seen[ident] = label
                base[f"{rundir.SCORE}{label}"] = scores[f"{rundir.SCORE}{v['name']}"].to_numpy()
                ds.rows[label] = {"run": run, "variant": v["name"], "params": v["params"], "main": main}
        ds.frame = base
        out.append(ds)
    return out


def targets(ds: Dataset) -> list[tuple[str, str | None]]:
    """(human column, split value or None) for every column of the table."""
    if ds.split_by and ds.split_by in ds.frame.columns and ds.frame[ds.split_by].notna().any():
        values = sorted(ds.frame[ds.split_by].dropna().unique())
        return [(h, v) for h in ds.humans for v in values]
    return [(h, None) for h in ds.humans]


def _target_name(h: str, v, n_humans: int) -> str:
    name = h.removeprefix(rundir.HUMAN)
    if v is None:
        return name
    return str(v) if n_humans == 1 else f"{name}@{v}"


def columns(ds: Dataset, spec: Spec) -> list[tuple[str, LevelStat | MeanStat]]:
    """(name, statistic) of every column of the quality table: one per target, then AVG (their mean)."""
    tgts = targets(ds)
    stats = [LevelStat(h, spec.level, spec.kind, spec.variant, subset=None if v is None else (ds.split_by, v))
             for h, v in tgts]
    names = [_target_name(h, v, len(ds.humans)) for h, v in tgts]
    return list(zip(names, stats)) + [("AVG", MeanStat(stats, "AVG"))]


def quality(ds: Dataset, spec: Spec, progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Long table: label, target, value, low, high, rank (significance cluster, 1 = best).
    ``progress(done, total, what)`` is called after every step (clusters or one bootstrap)."""
    labels = list(ds.rows)
    cols = columns(ds, spec)
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
                point, low, high = bootstrap_ci(ds.frame, stat, col, resample="group", n=spec.bootstrap,
                                                seed=spec.seed, alpha=spec.alpha)
            else:
                point, low, high = stat(ds.frame, col), math.nan, math.nan
            rows.append({"label": lb, "target": name, "value": point, "low": low, "high": high,
                         "rank": ranks.get(lb)})
            done += 1
            if progress:
                progress(done, total, f"{name}: bootstrap {lb}, {spec.bootstrap} resamples")
    return pd.DataFrame(rows)


def _cluster_ranks(ds: Dataset, spec: Spec, stat, labels: list[str]) -> dict:
    if not spec.permutations or len(labels) < 2:
        return {}
    clusters = significance_clusters(ds.frame, stat, [f"{rundir.SCORE}{lb}" for lb in labels], n=spec.permutations,
                                     seed=spec.seed, alpha=spec.alpha)
    return {c["metric"].removeprefix(rundir.SCORE): c["rank"] for c in clusters}


def _per_target(ds: Dataset, tgts, value: Callable) -> pd.DataFrame:
    """label, target, value (and whatever else ``value`` returns) for every row and target:
    ``value(frame, score column, human column)`` on the target's rows."""
    rows = []
    for lb in ds.rows:
        for h, v in tgts:
            part = ds.frame if v is None else ds.frame[ds.frame[ds.split_by] == v]
            rows.append({"label": lb, "target": _target_name(h, v, len(ds.humans)),
                         **value(part, f"{rundir.SCORE}{lb}", h)})
    return pd.DataFrame(rows)


def bias(ds: Dataset) -> pd.DataFrame:
    """BiasScore (ContrastScore Eq. 7) of every row against every aspect, with LS the
    expert's mean per-token log-likelihood."""
    ls = f"{rundir.MEAN_LOGP}expert"  # written by the run: no re-deriving of norm / skip_first
    if ls not in ds.frame.columns or not any(r["variant"] == "expert" for r in ds.rows.values()):
        return pd.DataFrame()
    return _per_target(ds, [(h, None) for h in ds.humans], lambda f, col, h: {
        "value": bias_score(f[ls].to_numpy(), f[col].to_numpy(), f[h].to_numpy())})


def quantized(ds: Dataset) -> pd.DataFrame:
    """Quantized accuracy (CDM Table 5) for every aspect: human label = the top score,
    prediction = the metric's top share of the same size (see metaeval.bias)."""
    return _per_target(ds, [(h, None) for h in ds.humans], lambda f, col, h: {
        "value": quantized_accuracy(f[col].to_numpy(), f[h].to_numpy())})


def pairwise(ds: Dataset) -> pd.DataFrame:
    """Tie-calibrated pairwise accuracy (acc_eq, Deutsch et al. 2023; ContrastScore Table 10)
    of every row for translation data, as WMT23's segment level: pairs of systems within each
    source segment (group), averaged over segments, per target (language pair), then AVG (their
    mean). ``epsilon``: the metric-tie threshold chosen for the cell. Empty for other tasks."""
    if "task" not in ds.frame.columns or not (ds.frame["task"] == "translation").any():
        return pd.DataFrame()

    def value(f, col, h):
        acc, eps = acc_eq_at(f, col, h, level="item")
        return {"value": acc, "epsilon": eps}

    long = _per_target(ds, targets(ds), value)
    avg = long.groupby("label", sort=False)["value"].agg(lambda v: v.mean(skipna=False))
    return pd.concat([long, pd.DataFrame({"label": avg.index, "target": "AVG", "value": avg.to_numpy()})],
                     ignore_index=True)


def speed(runs: list[Run]) -> pd.DataFrame:
    rows = []
    for run in runs:
        if not run.complete:
            continue
        sp = run.metrics.get("speed", {})
        rows.append({"run": run.path.name, "data": run.config["data"]["name"], "pair": run.config["pair"].get("name"),
                     "method": run.config["method"].get("variant"), "items": run.metrics.get("n_items"),
                     "score_seconds": sp.get("score_seconds"), "samples_per_second": sp.get("samples_per_second"),
                     "tokens_per_second": _tokens_per_second(sp),
                     "from_cache": any(p.get("from_cache") for p in (sp.get("passes") or {}).values()),
                     "load_seconds": sum((sp.get("load_seconds") or {}).values()),
                     "peak_rss_mb": sp.get("peak_rss_mb"), "peak_gpu_mb": sp.get("peak_gpu_mb")})
    return pd.DataFrame(rows)


def speed_points(ds: Dataset, long: pd.DataFrame) -> pd.DataFrame:
    """One point per distinct forward pass (model pair) for the speed-vs-quality plot.

    Every row of a run (the method and its comparison rows) is scored from the same forward
    pass per model, and runs of one pair on the same data share it (or read it from the
    cache), so they share one speed. A point: label = the pair's best main row by AVG quality
    (the configured method; any row when there is none), value = its AVG, samples_per_second
    = the median over the pair's runs. Pairs without a speed figure are left out."""
    avg = long[long["target"] == "AVG"].set_index("label")["value"]
    by_pair: dict[str, list[str]] = {}
    for lb, r in ds.rows.items():
        by_pair.setdefault(json.dumps(r["run"].config["pair"], sort_keys=True, default=str), []).append(lb)
    rows = []
    for labels in by_pair.values():
        runs = {id(ds.rows[lb]["run"]): ds.rows[lb]["run"] for lb in labels}.values()
        speeds = [s for s in (r.metrics.get("speed", {}).get("samples_per_second") for r in runs) if s]
        if not speeds:
            continue
        mains = [lb for lb in labels if ds.rows[lb]["main"]] or labels
        best = max(mains, key=lambda lb: -math.inf if pd.isna(avg.get(lb)) else avg[lb])
        rows.append({"label": best, "value": avg.get(best), "samples_per_second": float(np.median(speeds)),
                     "rows": len(labels), "runs": len(speeds)})
    return pd.DataFrame(rows, columns=["label", "value", "samples_per_second", "rows", "runs"])


def _tokens_per_second(sp: dict) -> float | None:
    passes = (sp.get("passes") or {}).values()
    seconds = sum(p.get("score_seconds") or 0 for p in passes)
    tokens = max((p.get("tokens") or 0 for p in passes), default=0)
    return tokens / seconds if seconds else None


def to_table(long: pd.DataFrame, title: str, signature: str) -> render.Table:
    """label x target cells: 'value [low, high] (rank)', as far as the long table has them."""
    def cell(r):
        s = render.number(r["value"])
        if "low" in r and pd.notna(r.get("low")):
            s += f" [{r['low']:.3f}, {r['high']:.3f}]"
        if "rank" in r and pd.notna(r.get("rank")):
            s += f" ({int(r['rank'])})"
        return s

    long = long.assign(cell=long.apply(cell, axis=1))
    grid = long.pivot(index="label", columns="target", values="cell")
    grid = grid.reindex(index=list(dict.fromkeys(long["label"])), columns=list(dict.fromkeys(long["target"])))
    return render.from_frame(grid, title, signature)
