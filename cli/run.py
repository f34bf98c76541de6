"""``cscore run``: data -> statistics (one pass per model) -> methods -> meta-evaluation -> run dir."""

from __future__ import annotations

import json
import logging
import os
import platform
import resource
import sys
import time
from pathlib import Path

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf

import cscore
from cscore.data import load_examples
from cscore.data import prompts, splits
from cscore.data.schema import DataError, human_columns
from cscore.metaeval.correlation import correlation_table
from cscore.metaeval.report import markdown, rich_tables
from cscore.scorers.api import ModelPair
from cscore.scorers.tokenize import InputError
from cscore.scorers.variants import models_needed, plan

log = logging.getLogger("cscore")

DATA_KEYS = ("name", "path", "template", "split_by")  # the rest of cfg.data goes to the loader as options
USER_ERRORS = (DataError, InputError, FileNotFoundError, ValueError, OSError, KeyError)


def make_prompts(cfg: DictConfig, examples: pd.DataFrame, tokenizer) -> tuple[list[str], list[tuple[int, int]]]:
    p = cfg.prompt
    chat = None
    if p.chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("prompt.chat_template=true but the expert's tokenizer has no chat template")

        def chat(text):
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
    return prompts.build(examples, condition=p.condition, templates=OmegaConf.to_container(p.templates),
                         reference_templates=OmegaConf.to_container(p.reference_templates),
                         template=cfg.data.get("template"), chat=chat)


def load_pair(cfg: DictConfig, needed: list[str]) -> ModelPair:
    p, rt = cfg.pair, cfg.runtime
    early = p.amateur.get("early_exit")
    if "amateur" not in needed:
        return ModelPair.load(p.expert.path, device=rt.device, dtype=rt.dtype, revision=p.expert.revision)
    return ModelPair.load(p.expert.path, p.amateur.path, amateur_early_exit=early, device=rt.device,
                          dtype=rt.dtype, revision=p.expert.revision, amateur_revision=p.amateur.revision)


def progress_factory(console, enabled: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not enabled:
        return None, None
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=console)

    def factory(name: str, total: int):
        task = bar.add_task(f"scoring with {name}", total=total)
        return lambda n: bar.advance(task, n)

    return bar, factory


def stats_cache(cfg: DictConfig):
    """The statistics cache of this run (None when cache.enabled=false)."""
    from cscore.scorers.cache import StatsCache

    if not cfg.cache.enabled:
        return None
    root = cfg.cache.dir or os.environ.get("CSCORE_STATS_CACHE")
    return StatsCache(Path(root) if root else None)


def peak_memory() -> dict:
    import torch

    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.cuda.is_available():
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def completed(cfg: DictConfig, out_dir: Path) -> bool:
    """A run directory is complete when metrics.json exists (written last, atomically) and its
    config.yaml is this run's config: a re-run of a sweep skips it."""
    config, metrics = out_dir / "config.yaml", out_dir / "metrics.json"
    return metrics.is_file() and config.is_file() and config.read_text() == OmegaConf.to_yaml(cfg, resolve=True)


def run(cfg: DictConfig, out_dir: Path) -> dict:
    from rich.console import Console

    console = Console()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))

    options = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if k not in DATA_KEYS}
    examples, load_report = load_examples(cfg.data.name, cfg.data.get("path"), **options)
    n_loaded = len(examples)
    examples = splits.select(examples, cfg.split.use, cfg.split.dev_fraction, cfg.split.seed)
    log.info("data %s: %d rows (%d dropped while loading); split=%s keeps %d", cfg.data.name, n_loaded,
             len(load_report.dropped), cfg.split.use, len(examples))
    for d in load_report.dropped:
        log.warning("dropped %s: %s %s", d["id"], d["reason"], d["where"])
    for reason, n in load_report.summary()["ignored_by_reason"].items():
        log.warning("ignored %d value(s): %s", n, reason)

    method_cfg = OmegaConf.to_container(cfg.method, resolve=True)
    variants = plan(method_cfg, baseline_t=cfg.baselines.t, rows=list(cfg.baselines.rows))
    needed = models_needed(variants)
    temperatures = sorted({float(t) for t in cfg.stats.temperatures} | {t for v in variants for t in v.temperatures()})

    pair = load_pair(cfg, needed)
    log.info("models: %s", {k: v.info for k, v in pair.models.items()})
    prompt_texts, spans = make_prompts(cfg, examples, pair.tokenizer)
    inputs = pair.encode(prompt_texts, list(examples["hypothesis"]), max_length=cfg.runtime.max_length,
                         source_spans=spans)
    if inputs.n_truncated:
        log.warning("%d of %d items had their source truncated to fit max_length=%d", inputs.n_truncated,
                    len(examples), cfg.runtime.max_length)

    bar, factory = progress_factory(console, cfg.runtime.progress)
    if bar:
        bar.start()
    try:
        stats = pair.statistics(inputs=inputs, temperatures=temperatures, token_budget=cfg.runtime.token_budget,
                                padding_side=cfg.runtime.padding_side, models=needed, progress=factory,
                                cache=stats_cache(cfg))
    finally:
        if bar:
            bar.stop()

    table = examples.copy()
    table["prompt"] = [it.prompt for it in inputs.items]
    table["prompt_tokens"] = [len(it.prompt_ids) for it in inputs.items]
    table["hypothesis_tokens"] = [len(it.hyp_ids) for it in inputs.items]
    table["truncated"] = [it.truncated for it in inputs.items]
    for v in variants:
        table[f"score.{v.name}"] = stats.score(v.method, **v.params)
    table.to_parquet(out_dir / "scores.parquet", index=False)

    score_cols = [f"score.{v.name}" for v in variants]
    split_by = cfg.meta.get("split_by") or cfg.data.get("split_by")
    humans = human_columns(examples)
    corr = correlation_table(table, score_cols, humans, split_by=split_by)
    corr["metric"] = corr["metric"].str.removeprefix("score.")
    corr["target"] = corr["target"].str.removeprefix("human.")
    corr.to_csv(out_dir / "correlations.csv", index=False)
    signature = (f"cscore {cscore.__version__} | data={cfg.data.name} n={len(table)} | pair={cfg.pair.name} "
                 f"({', '.join(f'{k}={v.name}' for k, v in pair.models.items())}) | "
                 f"method={cfg.method.name} | prompt={cfg.prompt.name}/{cfg.prompt.condition} | split={cfg.split.use} | "
                 "level=segment (all rows) | kendall=tau-b")
    title = f"{cfg.data.name} / {cfg.pair.name} / {cfg.method.variant}"
    (out_dir / "correlations.md").write_text(markdown(corr, title, signature) + "\n")

    n_items = len(table)
    speed = {}
    for name, rep in stats.reports.items():
        speed[name] = {"score_seconds": round(rep.seconds, 3), "from_cache": rep.cached,
                       "fetch_seconds": round(rep.fetch_seconds, 4),
                       "samples_per_second": n_items / rep.seconds if rep.seconds else None,
                       "tokens_per_second": rep.tokens / rep.seconds if rep.seconds else None,
                       "tokens": rep.tokens, "padded_tokens": rep.padded_tokens, "batches": rep.batches}
    total_score = sum(r.seconds for r in stats.reports.values())
    metrics = {
        "cscore_version": cscore.__version__,
        "signature": signature,
        "data": load_report.summary(),
        "n_items": n_items,
        "split": {"use": cfg.split.use, "dev_fraction": cfg.split.dev_fraction, "seed": cfg.split.seed,
                  "rows_before_split": n_loaded},
        "n_truncated": inputs.n_truncated,
        "truncated_ids": [i for i, t in zip(table["id"], table["truncated"]) if t],
        "temperatures": temperatures,
        "variants": [{"name": v.name, "method": v.method, "params": v.params} for v in variants],
        "models": {k: v.info for k, v in pair.models.items()},
        "correlations": corr.to_dict(orient="records"),
        "speed": {"passes": speed, "score_seconds": total_score,
                  "load_seconds": {k: round(v.load_seconds, 3) for k, v in pair.models.items()},
                  "samples_per_second": n_items / total_score if total_score else None, **peak_memory()},
        "nonfinite_scores": {c: int((~np.isfinite(table[c])).sum()) for c in score_cols},
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
    }
    write_atomic(out_dir / "metrics.json", json.dumps(metrics, indent=2, default=float) + "\n")  # marks completion

    for t in rich_tables(corr, title):
        console.print(t)
    console.print(f"[dim]{signature}[/]")
    hits = [k for k, r in stats.reports.items() if r.cached]
    if hits:
        console.print(f"statistics of {', '.join(hits)} read from the cache in "
                      f"{sum(stats.reports[k].fetch_seconds for k in hits):.2f}s (no forward pass); "
                      "speed figures are those of the run that computed them")
    console.print(f"scored {n_items} items in {total_score:.1f}s ({n_items / max(total_score, 1e-9):.1f} samples/s); "
                  f"{inputs.n_truncated} truncated; {len(load_report.dropped)} dropped while loading")
    for c, n in metrics["nonfinite_scores"].items():
        if n:
            console.print(f"[yellow]{c}: {n} non-finite scores (left out of correlations)[/]")
    console.print(f"run directory: [bold]{out_dir}[/]")
    return metrics


@hydra.main(version_base="1.3", config_path="pkg://cscore.conf", config_name="config")
def hydra_entry(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    out_dir = Path(HydraConfig.get().runtime.output_dir)
    if cfg.get("resume", True) and completed(cfg, out_dir):
        log.info("%s is complete (same config, metrics.json present): skipped; resume=false re-runs it", out_dir)
        return
    start = time.perf_counter()
    try:
        run(cfg, out_dir)
    except USER_ERRORS as err:
        if os.environ.get("CSCORE_DEBUG"):
            raise
        log.error("%s: %s", type(err).__name__, err)
        print(f"cscore: error: {err}", file=sys.stderr)
        sys.exit(1)
    log.info("done in %.1fs", time.perf_counter() - start)
