"""The report's tables beside quality, one row per score row and a column per target: likelihood
bias (BiasScore), quantized accuracy, pairwise accuracy (translation), and the runs' speed."""

from __future__ import annotations

import json
import math
from typing import Callable

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.metaeval import spa as soft
from cscore.metaeval.accuracy import accuracy, label_rule
from cscore.metaeval.bias import bias_score
from cscore.metaeval.pairwise import acc_eq_at
from cscore.metaeval.run_labels import run_labels
from cscore.metaeval.tables import Dataset, target_name, targets
from cscore.rundir import Run


def _per_target(ds: Dataset, tgts, value: Callable) -> pd.DataFrame:
    """``value(frame, score column, human column)`` on each target's rows, for every row and target."""
    rows = []
    for lb in ds.rows:
        for h, v in tgts:
            part = ds.frame if v is None else ds.frame[ds.frame[ds.split_by] == v]
            rows.append({"label": lb, "target": target_name(h, v, len(ds.humans)),
                         **value(part, f"{rundir.SCORE}{lb}", h)})
    return pd.DataFrame(rows)


def _with_avg(long: pd.DataFrame) -> pd.DataFrame:
    """``long`` and, per label, an AVG row: the mean of its values (NaN if one is)."""
    avg = long.groupby("label", sort=False)["value"].agg(lambda v: v.mean(skipna=False))
    return pd.concat([long, pd.DataFrame({"label": avg.index, "target": "AVG", "value": avg.to_numpy()})],
                     ignore_index=True)


def _translation(ds: Dataset) -> bool:
    return "task" in ds.frame.columns and bool((ds.frame["task"] == "translation").any())


def bias(ds: Dataset) -> pd.DataFrame:
    """BiasScore of every row against every aspect, within each ``meta.split_by`` group with AVG over them."""
    ls = f"{rundir.MEAN_LOGP}expert"  # written by the run: no re-deriving of norm / skip_first
    if ls not in ds.frame.columns or not any(r["variant"] == "expert" for r in ds.rows.values()):
        return pd.DataFrame()
    tgts = targets(ds)
    long = _per_target(ds, tgts, lambda f, col, h: {
        "value": bias_score(f[ls].to_numpy(), f[col].to_numpy(), f[h].to_numpy())})
    return long if all(v is None for _, v in tgts) else _with_avg(long)


def quantized(ds: Dataset, protocol: str = "summac") -> pd.DataFrame:
    """Quantized accuracy (CDM Table 5, ``metaeval.accuracy``) of every row for every aspect."""
    data_name = next(iter(ds.rows.values()))["run"].config.get("data", {}).get("name") if ds.rows else None

    def value(f, col, h):
        if protocol != "summac":
            return accuracy(f[col].to_numpy(), f[h].to_numpy(), protocol)
        labels, rule = label_rule(f, h, data_name)
        return {**accuracy(f[col].to_numpy(), f[h].to_numpy(), protocol, labels=labels), **rule}

    return _per_target(ds, [(h, None) for h in ds.humans], value)


def pairwise(ds: Dataset) -> pd.DataFrame:
    """acc_eq (ContrastScore Table 10) of every row per target, then AVG (translation data only)."""
    if not _translation(ds):
        return pd.DataFrame()

    def value(f, col, h):
        acc, eps = acc_eq_at(f, col, h, level="item")
        return {"value": acc, "epsilon": eps}

    return _with_avg(_per_target(ds, targets(ds), value))


def spa(ds: Dataset, permutations: int = soft.PERMUTATIONS,
        seed: int = soft.SEED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SPA of every row per target, then AVG, and the p-values of every pair of systems (translation data only)."""
    if not _translation(ds):
        return pd.DataFrame(), pd.DataFrame()
    pvalues: list[pd.DataFrame] = []
    tgts = targets(ds)
    split = any(v is not None for _, v in tgts)

    def value(f, col, h):
        try:
            mat = soft.matrices(f, col, h)
        except ValueError as e:
            return {"value": np.nan, "pce": np.nan, "note": str(e)}
        out = {"n_systems": len(mat.systems), "n_segments": len(mat.segments), "n_dropped": mat.n_dropped}
        if len(mat.systems) < 2 or not mat.segments:
            return {"value": np.nan, "pce": np.nan, **out, "note": "fewer than 2 systems or no complete segment"}
        res = soft.spa(mat.human, mat.metric, permutations, seed)
        target = target_name(h, f[ds.split_by].iloc[0] if split else None, len(ds.humans))
        pvalues.append(soft.pairs_table(mat, res).assign(label=col.removeprefix(rundir.SCORE), target=target)
                       [["label", "target", "system_a", "system_b", "p_human", "p_metric"]])
        return {"value": res.value, "pce": res.pce, **out}

    return _with_avg(_per_target(ds, tgts, value)), pd.concat(pvalues, ignore_index=True) if pvalues else pd.DataFrame()


def speed(runs: list[Run]) -> pd.DataFrame:
    """One row per complete run, named by its sweep point; a run that read passes from the cache has no speed."""
    done = [r for r in runs if r.complete]
    rows = []
    for run, name in zip(done, run_labels([r.config for r in done], [r.path.name for r in done])):
        metrics = run.done_metrics()
        sp = metrics.get("speed", {})
        cached = any(p.get("from_cache") for p in (sp.get("passes") or {}).values())
        rows.append({"run": name, "data": run.config["data"]["name"], "pair": pair_of(run),
                     "method": run.config["method"].get("variant"), "items": metrics.get("n_items"),
                     "score_seconds": sp.get("score_seconds"),
                     "samples_per_second": None if cached else sp.get("samples_per_second"),
                     "tokens_per_second": None if cached else _tokens_per_second(sp),
                     "useful_tflop_per_s": None if cached else _tflop_per_second(sp), "mfu": sp.get("mfu"),
                     "from_cache": cached, "load_seconds": sum((sp.get("load_seconds") or {}).values()),
                     "peak_rss_mb": sp.get("peak_rss_mb"), "peak_gpu_mb": sp.get("peak_gpu_mb")})
    return pd.DataFrame(rows)


def _tflop_per_second(sp: dict) -> float | None:
    """Useful TFLOP/s of a run's computation (metrics.json speed.useful_flops over score_seconds)."""
    f, s = sp.get("useful_flops"), sp.get("score_seconds")
    return f / s / 1e12 if f and s else None


def pair_of(run: Run) -> str | None:
    """The pair the run's signature names (``none`` for a baseline), else the config's."""
    sig = str((run.metrics or {}).get("signature") or "")
    named = dict(part.split(":", 1) for part in sig.split("|") if ":" in part)
    return named.get("pair") or run.config.get("pair", {}).get("name")


def speed_points(ds: Dataset, long: pd.DataFrame) -> pd.DataFrame:
    """Per model pair for the speed-vs-quality plot: its best main row by AVG, that AVG, its median samples/s."""
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
    # the run's total counts work its passes did together once (run/stages.py::speed_figures)
    seconds = sp.get("score_seconds") or sum(p.get("score_seconds") or 0 for p in passes)
    tokens = max((p.get("tokens") or 0 for p in passes), default=0)
    return tokens / seconds if seconds else None
