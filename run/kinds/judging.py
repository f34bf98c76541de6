"""What the judge kinds share: their setup, the counts of invalid outputs and parse changes (metrics.json),
their summary lines, and the λ / t points of a sweep that a decode may share."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from cscore import rundir
from cscore.config.run import RunConfig
from cscore.run.kinds.aspects import check_aspect
from cscore.run.kinds.base import Loaded, MethodKind, Plan
from cscore.run.kinds.pair import load_pair, model_line
from cscore.run.kinds.prompts import judge_prompt

log = logging.getLogger(__name__)

INVALID_KEYS = ("No Pred", "Below", "Above", "List", "Echo")  # judge_parse's statuses other than "ok"


def invalid_counts(status) -> dict[str, int]:
    """metrics.json → judge.invalid.<row>: how many outputs got each status other than "ok", and n."""
    status = np.asarray(status, dtype=object)
    return {**{s: int((status == s).sum()) for s in INVALID_KEYS}, "n": int(status.size)}


def parse_changes(texts, scores, statuses, lo: int, hi: int, rule: str, *, strip: bool = True) -> dict:
    """{"rule": the other parse rule, "outputs": how many outputs it reads otherwise}; ``strip``: decoded texts."""
    from cscore.scorers.judge.parse import PARSERS, read_score

    other = next(r for r in PARSERS if r != rule)
    changed = sum((read_score(text, lo, hi, other) if strip else PARSERS[other](text, lo, hi)) != (float(score), status)
                  for text, score, status in zip(texts, scores, statuses))
    return {"rule": other, "outputs": int(changed)}


class JudgeKind(MethodKind):
    """What the two judge kinds share: the judge prompt in the signature, invalid outputs in the summary."""

    sections: ClassVar[tuple[str, ...]] = ("judge",)
    judge_prompt = True  # conf/judge_prompt: the prompt the judge reads
    scoring_prompt = False  # it builds its own prompts (runtime.max_length checked as it does)

    def setup(self, run: RunConfig, loaded: Loaded, plan: Plan):
        """(the method's Params, examples, the loaded pair, the judge prompt config)."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        p: Any = run.method
        check_aspect(loaded.examples, p.aspect)
        pair = load_pair(run, plan.models)
        for role, m in pair.models.items():
            log.info(model_line(role, m))
        return p, loaded.examples, pair, asdict(judge_prompt(run))

    def plan(self, run: RunConfig) -> Plan:
        """The rows, read on both models, correlated with the human aspect the judge rates."""
        aspect = run.method.aspect  # type: ignore[attr-defined]  # a judge's Params
        return Plan(self.rows(run), ["expert", "amateur"], [], targets=[f"{rundir.HUMAN}{aspect}"])

    def signature_fields(self, run: RunConfig) -> dict[str, Any]:
        return {"pair": run.pair.name, "prompt": f"judge/{judge_prompt(run).name}"}

    def summary_lines(self, metrics: dict) -> list[tuple[str, str]]:
        out = []
        judge = metrics.get("judge") or {}
        for name, counts in judge.get("invalid", {}).items():
            bad = {s: k for s, k in counts.items() if s not in ("n", "List", "Echo") and k}
            if bad:
                what = ", ".join(f"{k} {s}" for s, k in bad.items())
                out.append(("yellow", f"{name}: {sum(bad.values())} of {counts['n']} judge outputs gave no score "
                                      f"in range ({what}; per row in {rundir.PARSE}{name})"))
            if counts.get("List"):
                out.append(("yellow", f"{name}: {counts['List']} of {counts['n']} judge outputs read as a score from "
                                      f"list numbering (\"1. The summary...\", as the released parse does; "
                                      f"{rundir.PARSE}{name} = List)"))
            if counts.get("Echo"):
                every = "every judge output" if counts["Echo"] == counts["n"] else \
                    f"{counts['Echo']} of {counts['n']} judge outputs"
                out.append(("yellow", f"{name}: {every} echoed the prompt's range (\"1-5\"), read as its minimum "
                                      f"as the parse rule does, not a judgement ({rundir.PARSE}{name} = Echo)"))
        for name, change in judge.get("parse_changes", {}).items():
            if change.get("outputs"):
                n = judge.get("invalid", {}).get(name, {}).get("n", "?")
                out.append(("dim", f"{name}: method.parse={change['rule']} would read {change['outputs']} of {n} "
                                   "outputs otherwise (score or status)"))
        return out


def grid_points(run: RunConfig) -> list[tuple[float, float]]:
    """The (λ, t) of the sweep's other jobs that differ only in ``method.lam`` / ``method.t`` (runtime.share_grid)."""
    if not run.runtime.share_grid:
        return []
    p = run.method
    own = {"method.lam": p.lam, "method.t": p.t}  # type: ignore[attr-defined]  # a judge's Params
    out = []
    for diff in run.sweep_others:
        if not diff or not set(diff) <= own.keys():
            continue
        try:
            point = {**own, **{k: float(v) for k, v in diff.items()}}
        except ValueError:  # an interpolation or another form: that job decodes for itself
            continue
        if point["method.lam"] >= 0 and point["method.t"] > 0:
            out.append((float(point["method.lam"]), float(point["method.t"])))
    return out
