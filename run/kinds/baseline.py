"""The baseline kind (``kind = "baseline"``: ``method=baseline``): one row per score column of the chosen
baselines, with the baseline's settings as its parameters; rows a metric cannot score are NaN and counted."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.progress import Progress
from cscore.run.kinds.base import REGISTRY, Loaded, MethodKind, Passes, Plan, RunState, Scored
from cscore.run.kinds.pair import stats_cache
from cscore.scorers.engine.tokenize import InputError

if TYPE_CHECKING:
    from cscore.scorers.baselines import BaselineRun
    from cscore.scorers.store.runner import InProcess

log = logging.getLogger(__name__)
row_log = logging.getLogger("cscore.rows")


def chosen(run: RunConfig) -> dict:
    from cscore.scorers import baselines

    return baselines.check_config(run.method.name, run.baseline)


def texts_of(examples: pd.DataFrame):
    """The rows as plain strings; every reference a row has (``references`` list, else ``reference``)."""
    from cscore.scorers.baselines import Texts

    hyps = [h if isinstance(h, str) else "" for h in examples["hypothesis"]]
    empty = [str(i) for i, h in zip(examples["id"], hyps) if not h.strip()]
    if empty:
        raise InputError(
            f"{len(empty)} empty hypotheses (ids {', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''}); "
            "a metric cannot score an empty text"
        )
    none = [None] * len(examples)
    refs = [[str(r) for r in lst] if lst is not None and not isinstance(lst, str) and len(lst)
            else [ref] if isinstance(ref, str) else []
            for lst, ref in zip(examples.get("references", none), examples.get("reference", none))]
    langs = examples.get("lang_pair", none)
    target = [lp.split("-")[-1] if isinstance(lp, str) and "-" in lp else None for lp in langs]
    return Texts(hyps, [s if isinstance(s, str) else "" for s in examples["source"]], refs, target)


def counted(name: str, table: pd.DataFrame, rows: list[int], what: str) -> dict:
    """Rows a baseline left NaN: one console line, their ids in run.log, a record for metrics.json."""
    ids = [str(table["id"].iloc[i]) for i in rows]
    if ids:
        log.warning("baseline %s: %d rows %s: their scores are NaN (left out of correlations; ids in run.log)",
                    name, len(ids), what)
        for i in ids:
            row_log.info("baseline %s: %s: %s", name, i, what.replace("have", "has"))
    return {"count": len(ids), "ids": ids}


def score_all(picked: dict, table: pd.DataFrame, texts, runtime: BaselineRun):
    from cscore.scorers import baselines

    reports, models, record = {}, {}, {}
    truncated = np.zeros(len(table), dtype=bool)
    for name, params in picked.items():
        start = time.perf_counter()
        result = baselines.score(name, params, texts, runtime)
        seconds = time.perf_counter() - start
        for col, values in result.columns.items():
            table[f"{rundir.SCORE}{col}"] = values
        for key, what in (
            ("missing_reference", "have no reference"),
            ("missing_score", "have no score in the file"),
            ("untokenized", "have a text without a-z / 0-9 tokens (rouge-score's tokenizer keeps no other)"),
        ):
            if key in result.info:
                result.info[key] = counted(name, table, result.info[key], what)
        if result.truncated is not None:
            truncated |= result.truncated
        reports.update(result.reports)
        models.update(result.models)
        record[name] = {"columns": list(result.columns), "params": baselines.as_dict(params), **result.info,
                        "seconds": round(seconds, 3)}
        log.info("baseline %s: %s in %.1fs%s", name, ", ".join(f"score.{c}" for c in result.columns), seconds,
                 f" ({result.info['signature']})" if isinstance(result.info.get("signature"), str) else "")
    table["truncated"] = truncated
    return Scored(table, Passes(None, reports), models, int(truncated.sum()), metrics={"baselines": record},
                  seconds=sum(r["seconds"] for r in record.values()))


@REGISTRY
class Baseline(MethodKind):
    """Baselines read no model pair and no scoring prompt: both are "none" in the signature."""
    splits = False  # its passes are not split over processes (yet): refused up front

    name = "baseline"
    sections = ("baselines",)

    def plan(self, run: RunConfig) -> Plan:
        from cscore.run.variants import Variant
        from cscore.scorers import baselines

        variants = [Variant(col, "baseline", run.method, {"baseline": name, "metric": col, **baselines.as_dict(params)})
                    for name, params in chosen(run).items() for col in baselines.columns(name, params)]
        return Plan(variants, [], [])

    def score(self, run: RunConfig, loaded: Loaded, plan: Plan, progress: Progress, state: RunState,
              coordinator: InProcess) -> Scored:
        from transformers.utils import logging as hf_logging

        from cscore.scorers.baselines import BaselineRun

        hf_logging.disable_progress_bar()  # per-model "Loading weights" bars: noise in logs

        picked = chosen(run)
        table = loaded.examples.copy()
        texts = texts_of(table)
        # the cache: the forward passes of bartscore / t5score; the stage: set by the first family whose checks
        # pass (references, model)
        runtime = BaselineRun(run.passes, [str(i) for i in table["id"]], stats_cache(run), progress.factory,
                              started=lambda: state.__setitem__("stage", "score"))
        with progress.live():
            return score_all(picked, table, texts, runtime)

    def signature_fields(self, run: RunConfig) -> dict[str, Any]:
        return {"pair": "none", "prompt": "none"}

    def title(self, run: RunConfig) -> str:
        """data / baseline / their names."""
        names = run.baseline or {}
        return f"{run.data.name} / baseline / {','.join(str(k) for k in names) or '-'}"

    def dir_label(self, c: dict) -> tuple[str, str] | None:
        """A baseline run reads no model pair: its directory is named after its baselines."""
        return "baseline", "+".join(c.get("baseline") or {}) or "none"

    def other_models(self, c: dict) -> dict[str, tuple[str, str | None]]:
        """``baseline.<name>.model`` of each baseline that names one (the packaged BERTScore model is no spec)."""
        from cscore.scorers.baselines.bertscore import PACKAGED

        out = {}
        for name, params in (c.get("baseline") or {}).items():
            spec = (params or {}).get("model")
            if isinstance(spec, str) and spec and not (name == "bertscore" and spec == PACKAGED):
                out[f"baseline.{name}.model"] = (spec, params.get("revision"))
        return out
