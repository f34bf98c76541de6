"""The judge runs of a report as studies (``metaeval.judge``): a run is one grid point (pair, method
row, score range, (λ, t)); runs on one data set, judge prompt, dev split and aspect form a study."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import pandas as pd

from cscore import rundir
from cscore.metaeval.names import differing, numbered
from cscore.rundir import Run

PARSE = rundir.PARSE  # parse.<row>: ok / No Pred / Below / Above
SPLIT = rundir.SPLIT  # dev / test (split.dev_ids)


def is_judge_run(run: Run, judge_methods: Iterable[str] = ()) -> bool:
    """A run with a ``judge`` section in its metrics.json or, unfinished, of a method in ``judge_methods``."""
    method = run.config.get("method") or {}
    return bool(run.metrics and "judge" in run.metrics) or method.get("name") in tuple(judge_methods)


@dataclass
class Point:
    """One grid point of a study and the rows its runs scored (merged; a repeated id counts once)."""

    pair: str
    variant: str  # the method's score column: score.<variant>
    lo: int
    hi: int
    lam: float
    t: float
    main: str  # model names, for the table rows
    asst: str
    frame: pd.DataFrame
    runs: list[Path] = field(default_factory=list)
    parse: str = "paper"  # method.parse: the rule that read parse.<row> (paper | released)

    @property
    def c(self) -> float:
        return self.lam / self.t if self.t else math.nan

    @property
    def range(self) -> str:
        return f"{self.lo}-{self.hi}"

    @property
    def setting(self) -> tuple:
        return (self.pair, self.variant, self.lo, self.hi)

    def rows(self, part: str) -> tuple[pd.DataFrame, str]:
        """(rows, what they are): the ``part`` ("dev" / "test") rows, or ("all" rows) when there are none."""
        f = self.frame
        if SPLIT in f.columns and (f[SPLIT] == part).any():
            return f[f[SPLIT] == part], part
        return f, "all"


@dataclass
class Study:
    """Judge runs on one data set, judge prompt, dev split and aspect."""

    data: str
    aspect: str
    dev_ids: str | None
    points: list[Point]
    notes: list[str] = field(default_factory=list)

    @property
    def human(self) -> str:
        return f"{rundir.HUMAN}{self.aspect}"

    @property
    def has_dev_split(self) -> bool:
        """Every point has dev and test rows: selection and report use different items."""
        return all(p.rows("dev")[1] == "dev" and p.rows("test")[1] == "test" for p in self.points)

    def ranges(self) -> list[tuple[int, int]]:
        return sorted({(p.lo, p.hi) for p in self.points})

    def settings(self) -> list[tuple]:
        """(pair, variant, lo, hi) in the order pairs were found, ranges ascending."""
        pairs = list(dict.fromkeys((p.pair, p.variant) for p in self.points))
        have = {p.setting for p in self.points}
        return [(pr, v, lo, hi) for lo, hi in self.ranges() for pr, v in pairs if (pr, v, lo, hi) in have]


def _model_name(path) -> str | None:
    return str(path).removeprefix("gguf:").rstrip("/").split("/")[-1] if path else None


def model_names(pair: dict) -> tuple[str, str]:
    """(main, assistant) names: the last part of each model path; an early-exit assistant is '<main> exit <k>'."""
    name = pair.get("name", "?")
    expert, amateur = pair.get("expert") or {}, pair.get("amateur") or {}
    main = _model_name(expert.get("path")) or f"{name} main"
    exit_k = amateur.get("early_exit")
    asst = _model_name(amateur.get("path")) or main
    if exit_k is not None or not amateur.get("path"):
        asst += f" exit {exit_k if exit_k is not None else '?'}"
    return main, asst


def _columns_needed(path: Path) -> list[str] | None:
    try:
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    except Exception:  # noqa: BLE001 - fall back to reading every column
        return None
    keep = ("id", "group", "system", SPLIT)
    return [c for c in names if c in keep or c.startswith((rundir.SCORE, rundir.HUMAN, PARSE))]


def _study_key(cfg: dict, aspect: str | None) -> str:
    data = {k: v for k, v in (cfg.get("data") or {}).items() if k != "template"}
    return json.dumps({"data": data, "judge_prompt": (cfg.get("judge_prompt") or {}).get("name"),
                       "dev_ids": (cfg.get("split") or {}).get("dev_ids"), "aspect": aspect},
                      sort_keys=True, default=str)


POINT_KEYS = ("lam", "t", "score_range", "aspect", "name", "variant")  # what places a run in a study's grid


def run_settings(cfg: dict) -> dict:
    """A judge run's method and judge-prompt settings besides its place in the grid (never merged across)."""
    method = {f"method.{k}": v for k, v in (cfg.get("method") or {}).items() if k not in POINT_KEYS}
    prompt = {f"judge_prompt.{k}": v for k, v in (cfg.get("judge_prompt") or {}).items() if k != "name"}
    return {**method, **prompt}


def _short(value) -> str:
    """A setting's value for a label: as written when short, else a digest of it."""
    import hashlib

    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 24 else "#" + hashlib.sha1(text.encode()).hexdigest()[:8]


def collect(runs: list[Run]) -> list[Study]:
    """Complete judge runs grouped into studies and grid points; a run lacking what a judge run has gets a note."""
    parts: dict[str, dict[tuple, list]] = {}
    studies: dict[str, Study] = {}
    for run in runs:
        if not run.complete or not is_judge_run(run):
            continue
        cfg, info = run.config, (run.metrics or {}).get("judge") or {}
        method = cfg.get("method") or {}
        aspect = method.get("aspect") or info.get("aspect")
        rng = method.get("score_range") or info.get("score_range")
        key = _study_key(cfg, aspect)
        # no aspect: its runs are left out below, so the study has no point and is not returned
        study = studies.setdefault(key, Study((cfg.get("data") or {}).get("name", "?"), aspect or "",
                                              (cfg.get("split") or {}).get("dev_ids"), []))
        variant = method.get("variant") or method.get("name")
        lam, t = method.get("lam", info.get("lam")), method.get("t", info.get("t"))
        if rng is None or lam is None or t is None or aspect is None:
            study.notes.append(f"{run.path}: no method.score_range / lam / t / aspect; left out")
            continue
        path = run.path / rundir.SCORES
        frame = pd.read_parquet(path, columns=_columns_needed(path))
        missing = [c for c in (f"{rundir.SCORE}{variant}", f"{rundir.HUMAN}{aspect}", "id") if c not in frame]
        if missing:
            study.notes.append(f"{run.path}: no column {', '.join(missing)}; left out")
            continue
        pair = cfg.get("pair") or {}
        for row, why in (info.get("expected_not_computed") or {}).items():
            study.notes.append(f"{pair.get('name', '?')} {rng[0]}-{rng[1]} lam={lam:g} t={t:g}: "
                               f"score.{row}_expected not computed: {why}")
        main, asst = model_names(pair)
        settings = json.dumps(run_settings(cfg), sort_keys=True, default=str)
        point = (pair.get("name", "?"), variant, method.get("name"), int(rng[0]), int(rng[1]), float(lam),
                 float(t), main, asst, settings)
        parts.setdefault(key, {}).setdefault(point, []).append((run.path, frame))
    out = []
    for key, points in parts.items():
        study = studies[key]
        alike: dict[tuple, set[str]] = {}  # runs of one pair and row in other settings: the settings that differ
        for point in points:
            alike.setdefault(point[:2], set()).add(point[-1])
        differ = {who: differing([json.loads(j) for j in js]) for who, js in alike.items() if len(js) > 1}
        for (pair, variant, name, lo, hi, lam, t, main, asst, settings), frames in points.items():
            mine = json.loads(settings)
            if (pair, variant) in differ:  # named in the label
                pair += " [" + ", ".join(f"{k}={_short(mine.get(k))}" for k in differ[pair, variant]) + "]"
            # the rule that read its parse columns: method.parse, else its preset's
            rule = mine.get("method.parse") or ("released" if name == "cd_judge_released" else "paper")
            merged = pd.concat([f for _, f in frames], ignore_index=True)
            dup = merged["id"].duplicated()
            if dup.any() and len(frames) > 1:
                study.notes.append(f"{pair} {variant} {lo}-{hi} lam={lam} t={t}: {len(frames)} runs, "
                                   f"{int(dup.sum())} repeated ids counted once")
            study.points.append(Point(pair, variant, lo, hi, lam, t, main, asst,
                                      merged[~dup].reset_index(drop=True), [p for p, _ in frames], rule))
        out.append(study)
    return out


def stems(studies: list[Study]) -> list[str]:
    """File-name stem of each study: ``<data>_judge_<aspect>``, repeats numbered."""
    return numbered([f"{s.data}_judge_{s.aspect}" for s in studies])

