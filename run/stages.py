"""The shared stages of ``cscore run`` around a kind's plan and score steps: load the data, evaluate (correlate
with the human scores), write the run directory; they ask the method's kind for what differs."""

from __future__ import annotations

import logging
import platform
import resource
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.run.kinds.base import Loaded, MethodKind, Plan, Scored
from cscore.scorers.engine import flops, threads
from cscore.scorers.store.runner import by_others, figures_of, run_figures
from cscore.version import __version__

if TYPE_CHECKING:
    from cscore.scorers.engine.report import EngineReport

log = logging.getLogger(__name__)
row_log = logging.getLogger("cscore.rows")  # per-row details: run.log only, never the console


def load_stage(run: RunConfig) -> Loaded:
    from cscore.data import splits
    from cscore.data.registry import load_data

    examples, report = load_data(run.data)  # its loader's options (the precheck refused any other)
    n_loaded = len(examples)
    sp = run.split
    if sp.dev_ids:  # the paper's dev documents by id; a split column labels every row
        examples = splits.select_labelled(splits.label_by_ids(examples, sp.dev_ids), sp.use)
    else:
        examples = splits.select(examples, sp.use, sp.dev_fraction, sp.seed)
    report.count_references(examples)  # the human-reference rows this run scores, said below
    log.info("data %s: %d rows (%d dropped while loading); split=%s keeps %d", run.data.name, n_loaded,
             len(report.dropped), sp.use, len(examples))
    for level, line in report.console_lines():  # one line per reason; the rows go to run.log
        log.log(level, line)
    for d in report.details():
        row_log.info("%s %s: %s %s", d["kind"], d["id"], d["reason"], d["where"])
    return Loaded(examples, report, n_loaded)


def evaluate_stage(run: RunConfig, kind: MethodKind, scored: Scored, plan: Plan) -> pd.DataFrame:
    from cscore.metaeval.correlation import correlate, correlation_table

    kind.evaluate(scored, correlate)  # what the kind measures itself (a pooler's folds)
    split_by = run.meta.split_by or run.data.split_by
    if split_by is None and rundir.SPLIT in scored.table.columns:  # split.dev_ids: dev and test apart
        split_by = rundir.SPLIT
    targets = plan.targets if plan.targets is not None else rundir.human_columns(scored.table.columns)
    corr = correlation_table(scored.table, plan.score_columns, targets, split_by=split_by)
    corr["metric"] = corr["metric"].str.removeprefix(rundir.SCORE)
    corr["target"] = corr["target"].str.removeprefix(rundir.HUMAN)
    return corr


def signature(run: RunConfig, kind: MethodKind, scored: Scored) -> str:
    from cscore.metaeval.signature import Signature

    models = {role: m.name for role, m in scored.models.items()}
    fields = kind.signature_fields(run)  # the pair and the prompt the kind's methods read
    return str(Signature({"data": run.data.name, "n": len(scored.table), "split": run.split.use,
                          "pair": fields["pair"], **models, "method": run.method.name,
                          "variant": run.method.variant, "params": method_params(run.method_plan.written),
                          "prompt": fields["prompt"], "level": "segment",
                          **({"units": scored.metrics["units"]} if scored.metrics.get("units") else {}),
                          "kendall": "b"}))


def method_params(method: dict) -> str:
    """The method's parameters as ``k=v,...`` in config order, values as written."""
    from cscore.metaeval.tables import shown

    return ",".join(f"{k}={shown(v)}" for k, v in method.items() if k not in ("name", "variant")) or "-"


def speed_figures(scored: Scored) -> dict:
    """metrics.json's ``speed``: per pass what this run spent and what computing took; the run's samples/s."""
    reports = scored.stats.reports
    device = next((m for m in scored.models.values()), None)
    peak = flops.peak_flops(device.device, device.dtype) if device is not None else None
    passes = {name: {"from_cache": rep.cached, "seconds_this_run": round(rep.fetch_seconds or 0.0, 4),
                     "score_seconds": round(rep.seconds, 3),
                     "tokens_per_second": rep.tokens / rep.seconds if rep.seconds else None,
                     "tokens": rep.tokens, "padded_tokens": rep.padded_tokens, "batches": rep.batches,
                     "token_budget": rep.token_budget, "oom_retries": rep.oom_retries,
                     "fetch_seconds": round(rep.fetch_seconds or 0.0, 4), "useful_flops": rep.flops,
                     "mfu": None if rep.cached else flops.mfu(rep.flops, rep.seconds, peak),
                     **figures_of(rep)}  # a pass split over processes: each part's figures
              for name, rep in reports.items()}
    own, cached, items = own_seconds(scored), any(r.cached for r in reports.values()), scored_items(scored)
    useful = [r.flops for r in once(reports, "shared")]
    known = [f for f in useful if f is not None]
    total_flops = float(sum(known)) if useful and len(known) == len(useful) else None
    return {"passes": passes, "score_seconds": own,  # this run's own time, also when the cache supplied passes
            "items_scored": items,  # by this command: not those an interrupted run or an earlier command kept
            "samples_per_second": items / own if own and not cached else None,  # a speed only of computed work
            "useful_flops": total_flops,  # MFU: only of passes on this run's device (a cache entry may be another's)
            "mfu": None if cached else flops.mfu(total_flops, own, peak),
            "from_cache": bool(reports) and all(r.cached for r in reports.values()),
            "statistics_seconds_this_run": sum(r.fetch_seconds or 0.0 for r in once(reports, "fetch_shared")),
            "load_seconds": {k: round(v.load_seconds if v.parent is None and v.status() == "loaded" else 0.0, 3)
                             for k, v in scored.models.items()},
            "weights": weights(scored), "threads": threads.in_use(),  # without torch: the count the job asked for
            **run_figures(reports),
            **peak_memory()}


def weights(scored: Scored) -> dict[str, str]:
    """How this command had each model's weights (``status()``, or "loaded by workers")."""
    others = by_others(scored.stats.reports.values())
    status = {k: v.status() for k, v in scored.models.items()}
    return {k: "loaded by workers" if s == "not loaded" and others else s for k, s in status.items()}


def scored_items(scored: Scored) -> int:
    """The items this command scored: all but those its computed passes kept from before it (the fewest)."""
    kept = [getattr(r, "resumed", 0) or 0 for r in scored.stats.reports.values() if not r.cached]
    return len(scored.table) - min(kept, default=0)


def own_seconds(scored: Scored) -> float | None:
    """This run's score step's seconds (``Scored.seconds``, else its passes', shared work once), or None."""
    if scored.seconds is not None:
        return round(scored.seconds, 4)
    reports = scored.stats.reports
    if any(r.cached for r in reports.values()):
        total = sum(r.fetch_seconds or 0.0 for r in once(reports, "fetch_shared"))
    else:
        total = sum(r.seconds for r in once(reports, "shared"))
    return float(total) if reports and np.isfinite(total) else None


def once(reports: Mapping[str, EngineReport], label: str) -> list[EngineReport]:
    """The reports with each ``label`` value once (work done together counted once)."""
    out: dict = {}
    for name, rep in reports.items():
        out.setdefault(getattr(rep, label, None) or ("pass", name), rep)
    return list(out.values())


def peak_memory() -> dict:
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    torch = sys.modules.get("torch")  # never loaded (every statistic from the cache): no device memory used
    if torch is not None and torch.cuda.is_available():
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def write_stage(run: RunConfig, kind: MethodKind, out_dir: Path, loaded: Loaded, plan: Plan, scored: Scored,
                corr: pd.DataFrame) -> dict:
    from cscore.metaeval.report import markdown

    table = scored.table
    rundir.write_atomic(out_dir / rundir.SCORES, table.to_parquet(index=False))  # whole or not at all
    for name, text in scored.files.items():
        rundir.write_atomic(out_dir / name, text)
    corr.to_csv(out_dir / rundir.CORRELATIONS_CSV, index=False)
    sig = signature(run, kind, scored)
    (out_dir / rundir.CORRELATIONS_MD).write_text(markdown(corr, kind.title(run), sig) + "\n")
    extra = set(scored.metrics) - set(kind.sections)
    if extra:  # a kind writes only the metrics.json sections it declares
        raise RuntimeError(f"kind {kind.name!r} wrote undeclared metrics.json sections {sorted(extra)}")
    metrics = {
        "cscore_version": __version__,
        "signature": sig,
        "data": loaded.report.summary(details=True),
        "n_items": len(table),
        "split": {"use": run.split.use, "dev_fraction": run.split.dev_fraction, "seed": run.split.seed,
                  "rows_before_split": loaded.n_loaded},
        "n_truncated": scored.n_truncated,
        "truncated_ids": [i for i, t in zip(table["id"], table["truncated"]) if t],
        "temperatures": plan.temperatures,
        "variants": [{"name": v.name, "method": v.method, "params": v.record} for v in plan.variants],
        "models": {k: v.info for k, v in scored.models.items()},
        "correlations": corr.to_dict(orient="records"),
        "speed": speed_figures(scored),
        "nonfinite_scores": {c: int((~np.isfinite(table[c])).sum()) for c in plan.score_columns},
        **scored.metrics,
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
    }
    rundir.write_metrics(out_dir, metrics)  # written last: marks completion
    return metrics
