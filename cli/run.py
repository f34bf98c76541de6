"""``cscore run``: load -> plan -> score -> evaluate -> write.

Each stage is a function with a typed input and output; the Hydra entry only composes them."""

from __future__ import annotations

import json
import logging
import os
import platform
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import hydra
import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf, open_dict

import cscore
from cscore import rundir
from cscore.cli import baseline_run, cdm_cmd, judge_run, names, pooler_run
from cscore.cli.progress import progress_bar  # noqa: F401 - the kinds' score steps use it from here
from cscore.errors import CscoreError
from cscore.scorers import threads

log = logging.getLogger("cscore")
row_log = logging.getLogger("cscore.rows")  # per-row details: run.log only, never the console
names.register()  # ${cscore.run_name:} in hydra.run.dir / hydra.sweep.dir (conf/config.yaml)



def user_errors() -> tuple:
    """Errors the user can fix: one line, no traceback (bugs keep theirs)."""
    return (CscoreError,)

HYDRA_FILES = {".hydra", "run.log", "config.yaml"}  # what a run dir holds before any work is done (rundir.LOG, .CONFIG)
CONSOLE_WIDTH_OFF_TERMINAL = 160  # log files and SLURM output: do not squeeze tables to 80 columns


def make_console():
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, CONSOLE_WIDTH_OFF_TERMINAL))
    return console


# ---------------------------------------------------------------------------------------------
# model pair: which models, which early exit, what to call them


def resolve_pair(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """Apply the early-exit rule and name the pair after what runs (``cscore.cli.names.pair_name``:
    a model put in the amateur's place runs whole unless asked otherwise; the label names the
    models that run, the one model of a single-model method); returns lines to log."""
    name, early_exit, notes = names.pair_name(OmegaConf.to_container(cfg, resolve=True), overrides)
    with open_dict(cfg):
        if early_exit != cfg.pair.amateur.get("early_exit"):
            cfg.pair.amateur.early_exit = early_exit
        if name != cfg.pair.get("name"):
            cfg.pair.name = name
    return notes


def load_pair(cfg: DictConfig, needed: list[str]):
    from cscore.scorers.api import ModelPair

    p, rt = cfg.pair, cfg.runtime
    # reuse=True: the jobs of an in-process multirun share the models; weights load on first use,
    # so a job whose statistics are all cached loads none
    if "amateur" not in needed:
        return ModelPair.load(p.expert.path, device=rt.device, dtype=rt.dtype, revision=p.expert.revision, reuse=True)
    pair = ModelPair.load(p.expert.path, p.amateur.get("path"), amateur_early_exit=p.amateur.get("early_exit"),
                          device=rt.device, dtype=rt.dtype, revision=p.expert.revision,
                          amateur_revision=p.amateur.revision, reuse=True)
    if pair.aligned:  # a cross-family pair: only the methods computed on aligned units
        from cscore.scorers.methods import check_aligned

        check_aligned(OmegaConf.select(cfg, "method.name") or "cdm_gen")  # `cscore cdm` has no method: token momenta
    return pair


def model_line(role: str, m) -> str:
    """What a model is and how this job has it (loaded, reused from an earlier job, or pending)."""
    info = m.info
    what = info.get("spec") or info.get("path")
    exit_ = f", early exit after {info['early_exit']} of its layers" if info.get("early_exit") else ""
    root = m.parent or m
    if not root.loaded:
        how = "weights load when first needed"
    elif root.reused:
        how = "in memory from an earlier job of this process"
    else:
        how = f"loaded in {root.load_seconds:.1f}s"
    return f"{role}: {what} ({info.get('class', '?')}, {info.get('layers')} layers{exit_}; {how})"


# ---------------------------------------------------------------------------------------------
# stages


@dataclass
class Loaded:
    examples: pd.DataFrame
    report: object  # cscore.data.schema.LoadReport
    n_loaded: int


@dataclass
class Plan:
    variants: list
    models: list[str]  # expert / amateur: the models the variants read
    temperatures: list[float]
    extra_scores: list[str] = field(default_factory=list)  # score.<name> columns beyond the variants'
    targets: list[str] | None = None  # human.<x> columns to correlate with (None: all of them)

    @property
    def score_columns(self) -> list[str]:
        return [f"{rundir.SCORE}{v.name}" for v in self.variants] + [f"{rundir.SCORE}{n}" for n in self.extra_scores]


@dataclass
class Scored:
    table: pd.DataFrame  # the examples + prompt, token counts, truncation and score.<variant> columns
    stats: object  # cscore.scorers.api.PairStatistics
    models: dict  # role -> LoadedModel
    n_truncated: int
    metrics: dict = field(default_factory=dict)  # kind-specific entries for metrics.json
    files: dict = field(default_factory=dict)  # kind-specific run-dir files: name -> text (cdm_folds.json)


def load_stage(cfg: DictConfig) -> Loaded:
    from cscore.data import splits
    from cscore.data.registry import load_config

    examples, report = load_config(OmegaConf.to_container(cfg.data, resolve=True))
    n_loaded = len(examples)
    if cfg.split.get("dev_ids"):  # the paper's dev documents by id; a split column labels every row
        examples = splits.select_labelled(splits.label_by_ids(examples, cfg.split.dev_ids), cfg.split.use)
    else:
        examples = splits.select(examples, cfg.split.use, cfg.split.dev_fraction, cfg.split.seed)
    log.info("data %s: %d rows (%d dropped while loading); split=%s keeps %d", cfg.data.name, n_loaded,
             len(report.dropped), cfg.split.use, len(examples))
    for level, line in report.console_lines():  # one line per reason; the rows go to run.log
        log.log(level, line)
    for d in report.details():
        row_log.info("%s %s: %s %s", d["kind"], d["id"], d["reason"], d["where"])
    return Loaded(examples, report, n_loaded)


def plan_stage(cfg: DictConfig) -> Plan:
    from cscore.scorers.variants import models_needed, plan

    method_cfg = OmegaConf.to_container(cfg.method, resolve=True)
    variants = plan(method_cfg, baseline_t=cfg.baselines.t, rows=list(cfg.baselines.rows))
    temps = sorted({float(t) for t in cfg.stats.temperatures} | {t for v in variants for t in v.temperatures()})
    return Plan(variants, models_needed(variants), temps)


def make_prompts(cfg: DictConfig, examples: pd.DataFrame, tokenizer,
                 role: str = "expert") -> tuple[list[str], list[tuple[int, int]]]:
    from cscore.data import prompts

    p = cfg.prompt
    chat = None
    if p.chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise cscore.errors.ConfigError(f"prompt.chat_template=true but the {role}'s tokenizer has no chat "
                                            "template")

        def chat(text):
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
    return prompts.build(examples, condition=p.condition, templates=OmegaConf.to_container(p.templates),
                         reference_templates=OmegaConf.to_container(p.reference_templates),
                         template=cfg.data.get("template"), chat=chat)


def stats_cache(cfg: DictConfig):
    """The statistics cache of this run (None when cache.enabled=false)."""
    from cscore.scorers.cache import StatsCache
    from cscore.scorers.checkpoint import CHECKPOINT_SECONDS

    every = cfg.cache.get("checkpoint_seconds", CHECKPOINT_SECONDS)
    return StatsCache(cfg.cache.dir, every) if cfg.cache.enabled else None


def score_stage(cfg: DictConfig, loaded: Loaded, plan: Plan, console, state: dict | None = None) -> Scored:
    from transformers.utils import logging as hf_logging

    from cscore.scorers import methods

    hf_logging.disable_progress_bar()  # per-model "Loading weights" bars: noise in logs
    pair = load_pair(cfg, plan.models)
    for role, m in pair.models.items():
        log.info(model_line(role, m))
    examples = loaded.examples
    prompt_texts, spans = make_prompts(cfg, examples, pair.tokenizer)
    # a cross-family amateur renders the prompts with its own tokenizer (its own chat template)
    own = make_prompts(cfg, examples, pair.amateur.tokenizer, "amateur") if pair.aligned else (None, None)
    inputs = pair.encode(prompt_texts, list(examples["hypothesis"]), max_length=cfg.runtime.max_length,
                         source_spans=spans, amateur_prompts=own[0], amateur_spans=own[1])
    if inputs.n_truncated:
        log.warning("%d of %d items had their source truncated to fit runtime.max_length=%d", inputs.n_truncated,
                    len(examples), cfg.runtime.max_length)
    if state is not None:
        state["stage"] = "score"
    bar, factory = progress_bar(console, cfg.runtime.progress)
    if bar:
        bar.start()
    try:
        stats = pair.statistics(inputs=inputs, temperatures=plan.temperatures, token_budget=cfg.runtime.token_budget,
                                padding_side=cfg.runtime.padding_side, models=plan.models, progress=factory,
                                cache=stats_cache(cfg), prefix_sharing=cfg.runtime.get("prefix_sharing", True))
    finally:
        if bar:
            bar.stop()
    table = examples.copy()
    table["prompt"] = [it.prompt for it in inputs.items]
    table["prompt_tokens"] = [len(it.prompt_ids) for it in inputs.items]
    table["hypothesis_tokens"] = [len(it.hyp_ids) for it in inputs.items]
    table["truncated"] = [it.truncated for it in inputs.items]
    skip_first = bool(plan.variants[-1].params.get("skip_first", False))  # the method's convention
    for model in plan.models:
        table[f"{rundir.N_SCORED}{model}"] = scored_tokens(stats, skip_first, model)
        table[f"{rundir.MEAN_LOGP}{model}"] = stats.score("single", model=model, t=1.0, norm="mean",
                                                          skip_first=skip_first, clamp=None)
    for v in plan.variants:
        if getattr(methods.get(v.method), "KIND", "token") != "token":
            continue  # its kind's score step adds that column after this one (a trained pooler)
        table[f"{rundir.SCORE}{v.name}"] = stats.score(v.method, **v.params)
    return Scored(table, stats, pair.models, inputs.n_truncated, {"units": "aligned"} if stats.aligned else {})


def scored_tokens(stats, skip_first: bool, model: str | None = None) -> np.ndarray:
    from cscore.scorers.methods.common import n_scored

    own = stats.stats.get(model) or next(iter(stats.stats.values()))  # a cross-family pair: each its own tokens
    return n_scored(own.offsets, skip_first)


def evaluate_stage(cfg: DictConfig, scored: Scored, plan: Plan) -> pd.DataFrame:
    from cscore.metaeval.correlation import correlation_table

    split_by = cfg.meta.get("split_by") or cfg.data.get("split_by")
    if split_by is None and "split" in scored.table.columns:  # split.dev_ids: dev and test apart
        split_by = "split"
    targets = plan.targets if plan.targets is not None else rundir.human_columns(scored.table.columns)
    corr = correlation_table(scored.table, plan.score_columns, targets, split_by=split_by)
    corr["metric"] = corr["metric"].str.removeprefix(rundir.SCORE)
    corr["target"] = corr["target"].str.removeprefix(rundir.HUMAN)
    return corr


def signature(cfg: DictConfig, scored: Scored) -> str:
    from cscore.metaeval.signature import Signature

    models = {role: m.name for role, m in scored.models.items()}
    pair = "none" if cfg.method.name == "baseline" else cfg.pair.name  # baselines read no model pair
    return str(Signature({"data": cfg.data.name, "n": len(scored.table), "split": cfg.split.use,
                          "pair": pair, **models, "method": cfg.method.name,
                          "variant": cfg.method.variant, "params": method_params(cfg.method),
                          "prompt": prompt_field(cfg), "level": "segment",
                          **({"units": "aligned"} if scored.metrics.get("units") else {}), "kendall": "b"}))


def run_title(cfg: DictConfig) -> str:
    """data / pair / variant; baselines read no pair: data / baseline / their names."""
    if cfg.method.name == "baseline":
        names = cfg.get("baseline") or {}
        return f"{cfg.data.name} / baseline / {','.join(str(k) for k in names) or '-'}"
    return f"{cfg.data.name} / {cfg.pair.name} / {cfg.method.variant}"


def prompt_field(cfg: DictConfig) -> str:
    """What the models read: the judge prompts for judge methods, else the scoring prompt."""
    if cfg.method.name in ("cd_judge", "cd_judge_released"):
        return f"judge/{cfg.judge_prompt.name}"
    return "none" if cfg.method.name == "baseline" else f"{cfg.prompt.name}/{cfg.prompt.condition}"


def method_params(method: DictConfig) -> str:
    """The method's parameters as ``k=v,...`` in config order (two presets of one method, e.g.
    contrast and contrast_released, differ here)."""
    def text(v):
        if isinstance(v, str):
            return v
        if isinstance(v, float):
            return repr(v)  # 1e-30, -inf: exact
        return json.dumps(v, separators=(",", ":"), default=str)  # true, null, [1,5]

    values = OmegaConf.to_container(method, resolve=True)
    return ",".join(f"{k}={text(v)}" for k, v in values.items() if k not in ("name", "variant")) or "-"


def speed_figures(scored: Scored) -> dict:
    """Per pass: what this run spent (computing, or reading the cache) and the figures of the
    pass that computed the statistics (this run, or an earlier one when read from the cache)."""
    n = len(scored.table)
    reports = scored.stats.reports
    passes = {}
    for name, rep in reports.items():
        passes[name] = {"from_cache": rep.cached, "seconds_this_run": round(rep.fetch_seconds, 4),
                        "score_seconds": round(rep.seconds, 3),
                        "samples_per_second": n / rep.seconds if rep.seconds else None,
                        "tokens_per_second": rep.tokens / rep.seconds if rep.seconds else None,
                        "tokens": rep.tokens, "padded_tokens": rep.padded_tokens, "batches": rep.batches,
                        "token_budget": rep.token_budget, "oom_retries": rep.oom_retries,
                        "fetch_seconds": round(rep.fetch_seconds, 4)}
    computed = sum(r.seconds for r in reports.values())
    return {"passes": passes, "score_seconds": computed,
            "samples_per_second": n / computed if computed else None,
            "from_cache": bool(reports) and all(r.cached for r in reports.values()),
            "statistics_seconds_this_run": sum(r.fetch_seconds for r in reports.values()),
            "load_seconds": {k: round(v.load_seconds if v.parent is None and v.status() == "loaded" else 0.0, 3)
                             for k, v in scored.models.items()},
            "weights": {k: v.status() for k, v in scored.models.items()}, "threads": torch_threads(),
            **peak_memory()}


def torch_threads() -> int:
    """The CPU threads torch used (runtime.threads, applied at the start of the job)."""
    import torch

    return torch.get_num_threads()


def peak_memory() -> dict:
    import torch

    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.cuda.is_available():
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def write_stage(cfg: DictConfig, out_dir: Path, loaded: Loaded, plan: Plan, scored: Scored, corr: pd.DataFrame) -> dict:
    from cscore.metaeval.report import markdown

    table = scored.table
    rundir.write_parquet_atomic(out_dir / rundir.SCORES, table)
    for name, text in scored.files.items():
        rundir.write_text_atomic(out_dir / name, text)
    corr.to_csv(out_dir / rundir.CORRELATIONS_CSV, index=False)
    sig = signature(cfg, scored)
    title = run_title(cfg)
    (out_dir / rundir.CORRELATIONS_MD).write_text(markdown(corr, title, sig) + "\n")
    score_cols = plan.score_columns
    metrics = {
        "cscore_version": cscore.__version__,
        "signature": sig,
        "data": loaded.report.summary(details=True),
        "n_items": len(table),
        "split": {"use": cfg.split.use, "dev_fraction": cfg.split.dev_fraction, "seed": cfg.split.seed,
                  "rows_before_split": loaded.n_loaded},
        "n_truncated": scored.n_truncated,
        "truncated_ids": [i for i, t in zip(table["id"], table["truncated"]) if t],
        "temperatures": plan.temperatures,
        "variants": [{"name": v.name, "method": v.method, "params": v.params} for v in plan.variants],
        "models": {k: v.info for k, v in scored.models.items()},
        "correlations": corr.to_dict(orient="records"),
        "speed": speed_figures(scored),
        "nonfinite_scores": {c: int((~np.isfinite(table[c])).sum()) for c in score_cols},
        **scored.metrics,
        "environment": {"python": platform.python_version(), "platform": platform.platform()},
    }
    rundir.write_metrics(out_dir, metrics)  # written last: marks completion
    return metrics


def print_summary(console, cfg: DictConfig, out_dir: Path, loaded: Loaded, scored: Scored, corr, metrics) -> None:
    from rich.markup import escape

    from cscore.metaeval.report import rich_tables

    for t in rich_tables(corr, run_title(cfg)):
        console.print(t)
    console.print(f"[dim]{escape(metrics['signature'])}[/]", soft_wrap=True)
    n = len(scored.table)
    for name, rep in scored.stats.reports.items():
        if rep.cached:
            was = (f"computed earlier in {rep.seconds:.1f}s, {n / rep.seconds:.1f} samples/s"
                   if rep.seconds and np.isfinite(rep.seconds) else "computed earlier")
            console.print(f"{name}: statistics of {n} items read from the cache in {rep.fetch_seconds:.2f}s "
                          f"(no forward pass; {was})")
        else:
            kept = getattr(rep, "resumed", 0)
            resumed = f"; {kept} more resumed from a checkpoint" if kept else ""
            console.print(f"{name}: scored {n - kept} items in {rep.seconds:.1f}s "
                          f"({(n - kept) / max(rep.seconds, 1e-9):.1f} samples/s, "
                          f"{rep.tokens / max(rep.seconds, 1e-9):,.0f} tokens/s{resumed})")
    weights = {role: m.status() for role, m in scored.models.items()}
    if any(w != "loaded" for w in weights.values()):
        console.print("weights: " + ", ".join(f"{role} {w}" for role, w in weights.items()))
    rep = loaded.report
    console.print(f"{scored.n_truncated} truncated; {len(rep.excluded)} excluded and {len(rep.dropped)} dropped "
                  "while loading (rows in run.log and metrics.json)")
    for c, k in metrics["nonfinite_scores"].items():
        if k:
            console.print(f"[yellow]{escape(c)}: {k} of {n} scores non-finite (left out of correlations)"
                          f"{escape(nonfinite_hint(cfg, c))}[/]")
    for name, counts in (metrics.get("judge") or {}).get("invalid", {}).items():
        bad = {s: k for s, k in counts.items() if s != "n" and k}
        if bad:
            what = ", ".join(f"{k} {s}" for s, k in bad.items())
            console.print(f"[yellow]{escape(name)}: {sum(bad.values())} of {counts['n']} judge outputs gave no score "
                          f"in range ({escape(what)}; per row in parse.{escape(name)})[/]")
    for c in [c for c in scored.table.columns if c.startswith(rundir.SCORE)]:
        values = pd.to_numeric(scored.table[c], errors="coerce")
        finite = values[np.isfinite(values)]
        if len(finite) > 1 and finite.nunique() == 1:
            console.print(f"[yellow]{escape(c)}: the same value for every item, so its correlations are "
                          "undefined (NaN)[/]")
    console.print(f"run directory: [bold]{escape(str(out_dir))}[/]")


def nonfinite_hint(cfg: DictConfig, column: str) -> str:
    """Why a method's scores may be non-finite by design, and what to set instead."""
    m = cfg.method
    own = column.removeprefix(rundir.SCORE) == m.variant
    if m.name == "cd_score" and own and float(m.get("outside", 0.0)) == float("-inf"):
        return ("; method.outside=-inf (the paper's CD-score) makes a hypothesis -inf as soon as one of its tokens "
                "falls outside the expert's plausibility head: a finite method.outside (e.g. -50) penalises instead")
    return ""


@dataclass(frozen=True)
class MethodKind:
    """The plan and score steps of one kind of method; load, evaluate and write are shared.
    A new kind (a judge, a trained pooler) is one more entry in KINDS, named by its method
    module's ``KIND`` (default "token"); the stage order in ``run`` does not change."""

    plan: Callable[[DictConfig], Plan]
    score: Callable[..., Scored]  # (cfg, Loaded, Plan, console, state) -> Scored


KINDS = {"token": MethodKind(plan_stage, score_stage),
         "judge": MethodKind(judge_run.plan_judge, judge_run.score_judge),
         "judge_released": MethodKind(judge_run.plan_released, judge_run.score_released),
         "pooler": MethodKind(plan_stage, pooler_run.score_pooler),
         "discriminator": MethodKind(cdm_cmd.plan_discriminator, cdm_cmd.score_discriminator),
         "baseline": MethodKind(baseline_run.plan_baseline, baseline_run.score_baseline)}


def method_kind(cfg: DictConfig) -> MethodKind:
    from cscore.scorers import methods

    return KINDS[getattr(methods.get(cfg.method.name), "KIND", "token")]


def run(cfg: DictConfig, out_dir: Path, state: dict | None = None) -> dict:
    """The whole run; raises CscoreError for anything the user can fix. ``state["stage"]`` says
    how far it got (a failure before "score" leaves nothing worth keeping)."""
    from cscore.cli.validate import validate

    state = {} if state is None else state
    state["stage"] = "validate"
    validate(cfg)
    threads.apply(cfg.runtime.get("threads"))
    console = make_console()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / rundir.CONFIG).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    kind = method_kind(cfg)
    state["stage"] = "load"
    loaded = load_stage(cfg)
    plan = kind.plan(cfg)
    state["stage"] = "models"
    scored = kind.score(cfg, loaded, plan, console, state)
    state["stage"] = "write"
    corr = evaluate_stage(cfg, scored, plan)
    metrics = write_stage(cfg, out_dir, loaded, plan, scored, corr)
    print_summary(console, cfg, out_dir, loaded, scored, corr, metrics)
    return metrics


# ---------------------------------------------------------------------------------------------
# run directory bookkeeping


def completed(cfg: DictConfig, out_dir: Path) -> bool:
    """Complete (``cscore.rundir``) with this very config: a re-run of a sweep skips it."""
    return rundir.is_complete(out_dir, OmegaConf.to_yaml(cfg, resolve=True))


def untouched(out_dir: Path) -> bool:
    """Nothing but what Hydra and the first lines of a run write: safe to remove after a failure."""
    return out_dir.is_dir() and {p.name for p in out_dir.iterdir()} <= HYDRA_FILES


def mark_failed(out_dir: Path, err: BaseException, stage: str) -> None:
    """Leave a failed.json that `cscore report` lists; removed when the run is started again."""
    record = {"error": f"{type(err).__name__}: {err}".strip(), "stage": stage,
              "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        rundir.write_text_atomic(out_dir / rundir.FAILED, json.dumps(record, indent=2) + "\n")
    except OSError:
        pass


def attach_row_log(out_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(out_dir / rundir.LOG)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    row_log.addHandler(handler)
    row_log.setLevel(logging.INFO)
    row_log.propagate = False
    return handler


@hydra.main(version_base="1.3", config_path="pkg://cscore.conf", config_name="config")
def hydra_entry(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    fresh = untouched(out_dir)  # a new directory: a run that fails before any work removes it
    for note in resolve_pair(cfg, list(hc.overrides.task)):
        log.info(note)
    if cfg.get("resume", True) and completed(cfg, out_dir):
        log.info("%s is complete (same config, metrics.json present): skipped; resume=false re-runs it", out_dir)
        return
    (out_dir / rundir.FAILED).unlink(missing_ok=True)
    (out_dir / rundir.METRICS).unlink(missing_ok=True)  # an older config's: a kill must not leave it marking completion
    handler = attach_row_log(out_dir)
    start, state = time.perf_counter(), {}
    try:
        run(cfg, out_dir, state)
    except user_errors() as err:
        if os.environ.get("CSCORE_DEBUG"):
            raise
        log.debug("error", exc_info=True)
        fail_dir(out_dir, fresh and state.get("stage") in ("validate", "load", "models"), err, state)
        print(f"cscore: error: {err}", file=sys.stderr)
        sys.exit(1)
    except OSError as err:
        fail_dir(out_dir, False, err, state)
        if err.errno not in rundir.NO_ROOM:
            raise
        print(f"cscore: error: cannot write to {err.filename or out_dir}: {err.strerror}", file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, Exception) as err:
        fail_dir(out_dir, False, err, state)
        raise
    finally:
        row_log.removeHandler(handler)
        handler.close()
    log.info("done in %.1fs", time.perf_counter() - start)


def fail_dir(out_dir: Path, remove: bool, err: BaseException, state: dict) -> None:
    """A new run directory that failed before scoring holds nothing worth keeping: removed.
    Any other failed directory gets a failed.json that `cscore report` lists."""
    if remove:
        shutil.rmtree(out_dir, ignore_errors=True)  # run.log stays open; harmless on POSIX
        outputs = Path.cwd().resolve() / "outputs"  # the default layout's; folders elsewhere are the user's
        for parent in list(out_dir.resolve().parents)[:2]:  # outputs/<date>/ left empty by it
            if parent.is_relative_to(outputs) and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
    else:
        mark_failed(out_dir, err, state.get("stage", "?"))
