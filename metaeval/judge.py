"""Meta-evaluation of LLM-as-a-judge runs (``cd_judge``, ``cd_judge_released``): the tables of the
CD-judge paper ("Contrastive Decoding Mitigates Score Range Bias in LLM-as-a-Judge", Sec. 4,
Tables 1-7, Appendix B) from a sweep of judge run directories.

A judge run (``cscore.rundir``; written by the judge kinds, ``cli/pipeline/kinds/judge.py``) is one grid point: one
model pair, one aspect, one score range [lo, hi], one (λ, t). Its scores.parquet holds ``score.<variant>`` (the
contrastive judge's parsed score; variant = ``method.variant``, default the method name),
``score.expert`` / ``score.amateur`` (the main / assistant model judging alone, greedy),
``score.<row>_expected`` (the expected score, NaN where undefined), ``parse.<row>`` (ok / No Pred /
Below / Above), ``human.<aspect>`` and, when ``split.dev_ids`` was given, ``split`` (dev / test).

What is computed (pure pandas / numpy; nothing here loads a model):

* Selection (paper Sec. 4.1, App. B): for every (pair, range) the grid point whose DEV value of the
  criterion (default: Spearman of the score against ``human.<aspect>``) is highest. Ties: for the
  paper's method the score of a value v is log p_main(v) − λ·log p_asst,t(v) with
  log p_asst,t(v) = z_v/t − logsumexp(z/t); the logsumexp is the same for every v and drops out of
  the argmax, so the judge's choice depends on (λ, t) only through c = λ/t and grid points with
  equal c give identical scores (λ ∈ {0.01, 0.1, 0.5, 1}, t ∈ {0.5, ..., 5} has several: 0.5/1 =
  1/2 ...). Points whose criterion is within ``TIE_TOL`` of the best tie; the tie goes to the
  smallest λ, then the smallest t. The expected score is selected on its own (its own dev
  criterion). Without a dev split (no ``split`` column, or no dev rows) the point is selected on
  all rows and reported on the same rows, which the tables say loudly (optimistic numbers).
* Tables 1-2: per range the main model alone, the assistant alone and the contrast at the chosen
  point, Pearson / Spearman / Kendall on the TEST rows with 95 % percentile bootstrap intervals
  (``uncertainty.bootstrap_ci``; ``cscore report --resample groups``, the default: documents are
  drawn with replacement and all their summaries come along, as in every report table;
  ``--resample items``: summaries drawn one by one, as the released evaluation), printed as
  value ± half the interval's width (the paper's .344_{.038}); then the mean over ranges.
* Tables 3-5: the chosen λ and t per (pair, range).
* Range bias: mean, std (population, ddof=0) and max − min of each row's correlation over ranges.
* Tables 6-7: invalid outputs per model row and range on the reported rows, from the ``parse.<row>``
  columns through ``bias.invalid_rate`` (not from metrics.json, so filtered rows count right).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.metaeval import render
from cscore.metaeval.bias import invalid_rate
from cscore.metaeval.kendall import normalize_variant
from cscore.metaeval.signature import Signature
from cscore.metaeval.uncertainty import LevelStat, bootstrap_ci
from cscore.rundir import Run

KINDS = ("pearson", "spearman", "kendall")
SHORT = {"pearson": "Pear.", "spearman": "Spear.", "kendall": "Kend."}
PARSE = rundir.PARSE  # parse.<row>: ok / No Pred / Below / Above
SPLIT = rundir.SPLIT  # dev / test (split.dev_ids)
STATUSES = ("No Pred", "Below", "Above")
LIST = "List"  # the released parse read list numbering as the score (valid there, shown on its own)
ECHO = "Echo"  # the prompt's range ("1-5") read as its minimum (valid for both parse rules, shown on its own)
OK = "ok"
TIE_TOL = 1e-12  # criterion values this close (relative to max(1, |best|)) tie
ROLES = ("main", "asst", "contrast")
ROW_OF_ROLE = {"main": "expert", "asst": "amateur"}  # score.<row> of the single-model rows
AVERAGE_HEADER = "Average across all score ranges"
NO_DEV = ("NO DEV SPLIT: lambda and t were selected and are reported on the same items "
          "(optimistic; give split.dev_ids to select on dev documents)")


# ----------------------------------------------------------------------------------------------
# collecting runs


def is_judge_run(run: Run, judge_methods: Iterable[str] = ()) -> bool:
    """A run of a judge method: the judge kinds' ``judge`` section in its metrics.json, or, for a
    run without one (not finished), a method in ``judge_methods`` (the CLI asks the kinds:
    ``cscore.cli.pipeline.kinds.methods_of("judge")``)."""
    method = run.config.get("method") or {}
    return bool(run.metrics and "judge" in run.metrics) or method.get("name") in tuple(judge_methods)


@dataclass
class Point:
    """One grid point of a study: pair, method row, range, (λ, t), and the rows its run(s) scored
    (runs of the same point, e.g. split.use=dev and =test, are merged; a repeated id counts once)."""

    pair: str
    variant: str  # the method's score column: score.<variant>
    method: str
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
        """(rows, what they are): part="dev" -> the dev rows, or all rows when there are none;
        part="test" -> the test rows, or all rows when there are none."""
        f = self.frame
        if SPLIT in f.columns and (f[SPLIT] == part).any():
            return f[f[SPLIT] == part], part
        return f, "all"


@dataclass
class Study:
    """Judge runs on one data set, judge prompt, dev split and aspect: the grid points of every
    pair, method row and range."""

    key: str
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

    def grid_points(self, setting: tuple) -> list[Point]:
        return sorted((p for p in self.points if p.setting == setting), key=lambda p: (p.lam, p.t))


def _model_name(path) -> str | None:
    if not path:
        return None
    return str(path).removeprefix("gguf:").rstrip("/").split("/")[-1]


def model_names(pair: dict) -> tuple[str, str]:
    """(main, assistant) names from a pair config: the last part of the model path; an early-exit
    assistant is '<main> exit <k>'."""
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


def _read_scores(run: Run) -> pd.DataFrame:
    path = run.path / rundir.SCORES
    return pd.read_parquet(path, columns=_columns_needed(path))


def _study_key(cfg: dict, aspect: str | None) -> str:
    data = {k: v for k, v in (cfg.get("data") or {}).items() if k != "template"}
    return json.dumps({"data": data, "judge_prompt": (cfg.get("judge_prompt") or {}).get("name"),
                       "dev_ids": (cfg.get("split") or {}).get("dev_ids"), "aspect": aspect},
                      sort_keys=True, default=str)


POINT_KEYS = ("lam", "t", "score_range", "aspect", "name", "variant")  # what places a run in a study's grid


def run_settings(cfg: dict) -> dict:
    """The method and judge-prompt settings of a judge run other than its place in the grid
    (``method.decode``, ``method.alpha``, ``judge_prompt.closing``, ...): runs that differ in them
    are different points, never merged."""
    method = {f"method.{k}": v for k, v in (cfg.get("method") or {}).items() if k not in POINT_KEYS}
    prompt = {f"judge_prompt.{k}": v for k, v in (cfg.get("judge_prompt") or {}).items() if k != "name"}
    return {**method, **prompt}


def settings_labels(found: dict[tuple, set[str]]) -> dict[tuple[tuple, str], str]:
    """{((pair, variant), settings json): label suffix}: where one (pair, variant) of a study comes
    with different settings, each gets `` [k=v, ...]`` naming the settings that differ ('' else)."""
    out = {}
    for who, jsons in found.items():
        if len(jsons) < 2:
            out.update({(who, j): "" for j in jsons})
            continue
        parsed = {j: json.loads(j) for j in jsons}
        keys = sorted({k for d in parsed.values() for k in d if len({json.dumps(e.get(k), sort_keys=True)
                                                                       for e in parsed.values()}) > 1})
        for j, d in parsed.items():
            out[who, j] = " [" + ", ".join(f"{k}={_short(d.get(k))}" for k in keys) + "]"
    return out


def _short(value) -> str:
    """A setting's value for a label: as written when short, else a digest of it."""
    import hashlib

    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 24 else "#" + hashlib.sha1(text.encode()).hexdigest()[:8]


def parse_rule(settings: dict, method: str | None) -> str:
    """The rule that read a run's parse columns: ``method.parse``, or for a run made before the key
    existed its preset's rule (``cd_judge_released``: released; otherwise the paper's)."""
    return settings.get("method.parse") or ("released" if method == "cd_judge_released" else "paper")


def collect(runs: list[Run]) -> list[Study]:
    """Complete judge runs grouped into studies (data set, judge prompt, dev ids, aspect) and grid
    points (pair, method row, its other settings, range, λ, t); a pair whose runs differ in other
    settings (``run_settings``) is labelled with them. Runs that lack what a judge run has are skipped with a
    note in the study's ``notes`` (or, when nothing is left, a study-less note is lost: callers
    check ``is_judge_run`` first)."""
    parts: dict[str, dict[tuple, list]] = {}
    meta: dict[str, dict] = {}
    notes: dict[str, list[str]] = {}
    for run in runs:
        if not run.complete or not is_judge_run(run):
            continue
        cfg, info = run.config, (run.metrics or {}).get("judge") or {}
        method = cfg.get("method") or {}
        aspect = method.get("aspect") or info.get("aspect")
        rng = method.get("score_range") or info.get("score_range")
        key = _study_key(cfg, aspect)
        notes.setdefault(key, [])
        meta.setdefault(key, {"data": (cfg.get("data") or {}).get("name", "?"), "aspect": aspect,
                              "dev_ids": (cfg.get("split") or {}).get("dev_ids")})
        variant = method.get("variant") or method.get("name")
        lam, t = method.get("lam", info.get("lam")), method.get("t", info.get("t"))
        if rng is None or lam is None or t is None or aspect is None:
            notes[key].append(f"{run.path}: no method.score_range / lam / t / aspect; left out")
            continue
        frame = _read_scores(run)
        missing = [c for c in (f"{rundir.SCORE}{variant}", f"{rundir.HUMAN}{aspect}", "id") if c not in frame]
        if missing:
            notes[key].append(f"{run.path}: no column {', '.join(missing)}; left out")
            continue
        pair = cfg.get("pair") or {}
        for row, why in (info.get("expected_not_computed") or {}).items():
            notes[key].append(f"{pair.get('name', '?')} {rng[0]}-{rng[1]} lam={lam:g} t={t:g}: score.{row}_expected "
                              f"not computed: {why}")
        main, asst = model_names(pair)
        settings = json.dumps(run_settings(cfg), sort_keys=True, default=str)
        point = (pair.get("name", "?"), variant, method.get("name"), int(rng[0]), int(rng[1]), float(lam),
                 float(t), main, asst, settings)
        parts.setdefault(key, {}).setdefault(point, []).append((run.path, frame))
    out = []
    for key, points in parts.items():
        built = []
        found: dict[tuple, set[str]] = {}
        for point in points:
            found.setdefault(point[:2], set()).add(point[-1])
        labels = settings_labels(found)
        for (pair, variant, name, lo, hi, lam, t, main, asst, settings), frames in points.items():
            pair = pair + labels[(pair, variant), settings]
            merged = pd.concat([f for _, f in frames], ignore_index=True)
            dup = merged["id"].duplicated()
            if dup.any() and len(frames) > 1:
                notes[key].append(f"{pair} {variant} {lo}-{hi} lam={lam} t={t}: {len(frames)} runs, "
                                  f"{int(dup.sum())} repeated ids counted once")
            built.append(Point(pair, variant, name, lo, hi, lam, t, main, asst,
                               merged[~dup].reset_index(drop=True), [p for p, _ in frames],
                               parse_rule(json.loads(settings), name)))
        m = meta[key]
        out.append(Study(key, m["data"], m["aspect"], m["dev_ids"], built, notes[key]))
    return out


def stems(studies: list[Study]) -> list[str]:
    """File-name stem of each study: ``<data>_judge_<aspect>``; a repeat gets ``_2``, ``_3``, ..."""
    out: list = []
    seen: dict = {}
    for s in studies:
        base = f"{s.data}_judge_{s.aspect}"
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return out


# ----------------------------------------------------------------------------------------------
# selection


@dataclass(frozen=True)
class Criterion:
    """The statistic that picks (λ, t) on dev and that the tables report: ``kind`` for the
    selection, ``level`` (``levels.LEVELS``) and the Kendall ``variant`` for every correlation."""

    kind: str = "spearman"
    level: str = "segment"
    variant: str | None = None
    thresh: float | None = None  # Kendall-like's gold-difference threshold (None: 25)

    @property
    def like_threshold(self) -> float | None:
        """Kendall-like's threshold (25 unless given) when the Kendall variant is ``like``, else None."""
        if self.variant is None or normalize_variant(self.variant) != "like":
            return None
        return 25.0 if self.thresh is None else float(self.thresh)

    def stat(self, human: str, kind: str | None = None) -> LevelStat:
        kind = kind or self.kind
        if kind != "kendall":
            return LevelStat(human, self.level, kind)
        thresh = self.like_threshold
        if thresh is None:
            return LevelStat(human, self.level, kind, self.variant)
        return LevelStat(human, self.level, kind, self.variant, thresh=thresh)


def score_column(row: str, score: str = "parsed") -> str:
    """score.<row> (the parsed score) or score.<row>_expected."""
    return f"{rundir.SCORE}{row}" + ("_expected" if score == "expected" else "")


def _value(stat, frame: pd.DataFrame, col: str) -> float:
    if col not in frame.columns or frame.empty or not np.isfinite(frame[col].to_numpy(dtype=float)).any():
        return math.nan
    return float(stat(frame, col))


def grid(study: Study, criterion: Criterion = Criterion(), score: str = "parsed") -> pd.DataFrame:
    """The dev criterion at every grid point: pair, variant, range, lo, hi, lam, t, c, value,
    n (dev rows with a finite score), selected_on ("dev", or "all" without dev rows)."""
    stat = criterion.stat(study.human)
    rows = []
    for p in study.points:
        dev, where = p.rows("dev")
        col = score_column(p.variant, score)
        n = int(np.isfinite(dev[col].to_numpy(dtype=float)).sum()) if col in dev.columns else 0
        rows.append({"pair": p.pair, "variant": p.variant, "range": p.range, "lo": p.lo, "hi": p.hi,
                     "lam": p.lam, "t": p.t, "c": p.c, "value": _value(stat, dev, col), "n": n,
                     "selected_on": where})
    cols = ["pair", "variant", "range", "lo", "hi", "lam", "t", "c", "value", "n", "selected_on"]
    return pd.DataFrame(rows, columns=cols)


def choose(candidates: pd.DataFrame, tol: float = TIE_TOL) -> tuple[int, list[int]]:
    """(index of the chosen row, indices of the rows tied with it) of a frame with columns lam, t,
    value: the highest value; among values within tol * max(1, |best|) of it the smallest lam,
    then the smallest t. With no finite value every row ties."""
    finite = candidates[np.isfinite(candidates["value"].to_numpy(dtype=float))]
    if finite.empty:
        tied = candidates
    else:
        best = finite["value"].max()
        tied = finite[finite["value"] >= best - tol * max(1.0, abs(best))]
    order = tied.sort_values(["lam", "t"], kind="stable")
    return order.index[0], list(order.index)


def select(study: Study, criterion: Criterion = Criterion(), score: str = "parsed") -> pd.DataFrame:
    """One row per (pair, variant, range): the chosen lam, t, c, its dev value, the tied points,
    the number of grid points, selected_on / reported_on ("dev" / "test", "all" without a split)."""
    g = grid(study, criterion, score)
    rows = []
    for setting in study.settings():
        pair, variant, lo, hi = setting
        cand = g[(g["pair"] == pair) & (g["variant"] == variant) & (g["lo"] == lo) & (g["hi"] == hi)]
        if score == "expected" and not np.isfinite(cand["value"].to_numpy(dtype=float)).any():
            continue  # no expected score (a multi-token range off the kept c grid: a study note) or none that varies
        best, tied = choose(cand)
        point = next(p for p in study.grid_points(setting) if p.lam == g.at[best, "lam"] and p.t == g.at[best, "t"])
        rows.append({"pair": pair, "variant": variant, "range": f"{lo}-{hi}", "lo": lo, "hi": hi,
                     "main": point.main, "asst": point.asst, "score": score,
                     "lam": point.lam, "t": point.t, "c": point.c, "value": g.at[best, "value"],
                     "n_dev": int(g.at[best, "n"]), "points": len(cand), "n_tied": len(tied),
                     "tied": "; ".join(f"({g.at[i, 'lam']:g}, {g.at[i, 't']:g})" for i in tied),
                     "selected_on": g.at[best, "selected_on"], "reported_on": point.rows("test")[1]})
    cols = ["pair", "variant", "range", "lo", "hi", "main", "asst", "score", "lam", "t", "c", "value", "n_dev",
            "points", "n_tied", "tied", "selected_on", "reported_on"]
    return pd.DataFrame(rows, columns=cols)


def chosen_point(study: Study, sel_row) -> Point:
    setting = (sel_row["pair"], sel_row["variant"], sel_row["lo"], sel_row["hi"])
    return next(p for p in study.grid_points(setting) if p.lam == sel_row["lam"] and p.t == sel_row["t"])


# ----------------------------------------------------------------------------------------------
# the reported rows (paper Tables 1-2, 6-7)


def contrast_label(pair: str, variant: str) -> str:
    return f"Contra. ({pair})" if variant == "cd_judge" else f"{variant} ({pair})"


def reported_rows(study: Study, selections: list[pd.DataFrame]) -> list[dict]:
    """The rows of the correlation table, range by range: the main model alone, the assistant
    alone and the contrast at the chosen point of each pair (parsed score), then the same with the
    expected score (the contrast at its own chosen point). Each: range, lo, hi, label, role, pair,
    score, lam, t, column, frame (the reported rows), parse (parse column or None).
    A single-model row that two pairs share (same name, same scores) appears once; same name with
    other scores gets the pair's name added."""
    out: list = []
    seen: dict = {}
    for sel in selections:
        for _, s in sel.iterrows():
            point = chosen_point(study, s)
            frame, _ = point.rows("test")
            score = s["score"]
            suffix = " [expected]" if score == "expected" else ""
            for role in ROLES:
                row = point.variant if role == "contrast" else ROW_OF_ROLE[role]
                col = score_column(row, score)
                if col not in frame.columns or not np.isfinite(frame[col].to_numpy(dtype=float)).any():
                    continue
                name = {"main": point.main, "asst": point.asst}.get(role) or contrast_label(point.pair, point.variant)
                label = name + suffix
                key = (label, score, point.lo, point.hi)
                values = frame[col].to_numpy(dtype=float)
                if role != "contrast" and key in seen:
                    if np.array_equal(seen[key], values, equal_nan=True):
                        continue
                    label = f"{name} [{point.pair}]{suffix}"
                    key = (label, score, point.lo, point.hi)
                seen[key] = values
                parse = f"{PARSE}{row}" if score == "parsed" and f"{PARSE}{row}" in frame.columns else None
                out.append({"range": point.range, "lo": point.lo, "hi": point.hi, "label": label, "role": role,
                            "pair": point.pair, "score": score, "lam": point.lam if role == "contrast" else 0.0,
                            "t": point.t if role == "contrast" else math.nan, "column": col, "frame": frame,
                            "parse": parse, "rule": point.parse})
    order = {r: i for i, r in enumerate(ROLES)}
    return sorted(out, key=lambda r: (r["lo"], r["hi"], r["score"] != "parsed", order[r["role"]]))


def correlations(study: Study, rows: list[dict], criterion: Criterion = Criterion(), *, bootstrap: int = 1000,
                 seed: int = 0, alpha: float = 0.05, resample: str = "groups",
                 progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Long table: range, lo, hi, label, role, pair, score, lam, t, correlation, value, low, high,
    half_width ((high - low) / 2), n (rows with a finite score and human), n_groups (documents).
    Intervals: percentile bootstrap over documents (``resample="groups"``: ``bootstrap_ci(resample=
    "group")``, as every report table; rows when there is no group column) or over summaries
    (``resample="items"``: rows, as the released CD-judge evaluation), ``bootstrap`` resamples,
    none when 0."""
    unit = "group" if resample == "groups" else None
    out, total, done = [], len(rows) * len(KINDS), 0
    for r in rows:
        frame, col = r["frame"], r["column"]
        finite = np.isfinite(frame[col].to_numpy(dtype=float)) & np.isfinite(frame[study.human].to_numpy(dtype=float))
        groups = int(frame.loc[finite, "group"].nunique()) if "group" in frame.columns else int(finite.sum())
        for kind in KINDS:
            stat = criterion.stat(study.human, kind)
            if bootstrap:
                ci = bootstrap_ci(frame, stat, col, resample=unit if unit in frame.columns else None,
                                  n=bootstrap, seed=seed, alpha=alpha)
                value, low, high = ci
            else:
                value, low, high = _value(stat, frame, col), math.nan, math.nan
            out.append({**{k: r[k] for k in ("range", "lo", "hi", "label", "role", "pair", "score", "lam", "t")},
                        "correlation": kind, "value": value, "low": low, "high": high,
                        "half_width": (high - low) / 2, "n": int(finite.sum()), "n_groups": groups})
            done += 1
            if progress:
                progress(done, total, f"{r['range']} {r['label']} {kind}: bootstrap, {bootstrap} resamples")
    cols = ["range", "lo", "hi", "label", "role", "pair", "score", "lam", "t", "correlation", "value", "low", "high",
            "half_width", "n", "n_groups"]
    return pd.DataFrame(out, columns=cols)


def across_ranges(long: pd.DataFrame) -> pd.DataFrame:
    """Per row label and correlation: mean, std (population, ddof=0), spread (max - min) over the
    ranges where the value is finite, ranges (how many), of (how many ranges the study has)."""
    n_ranges = long[["lo", "hi"]].drop_duplicates().shape[0]
    out = []
    for (label, kind), part in long.groupby(["label", "correlation"], sort=False):
        v = part["value"].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        out.append({"label": label, "role": part["role"].iloc[0], "score": part["score"].iloc[0],
                    "correlation": kind, "mean": float(v.mean()) if v.size else math.nan,
                    "std": float(v.std(ddof=0)) if v.size else math.nan,
                    "spread": float(v.max() - v.min()) if v.size else math.nan, "ranges": int(v.size),
                    "of": n_ranges})
    return pd.DataFrame(out, columns=["label", "role", "score", "correlation", "mean", "std", "spread", "ranges",
                                      "of"])


def invalid(rows: list[dict]) -> pd.DataFrame:
    """Invalid outputs (paper Tables 6-7) of every row with a parse column, on its reported rows:
    label, role, pair, range, lo, hi, invalid (share, ``bias.invalid_rate`` of parse == "ok"),
    count, No Pred, Below, Above, other (any other status, e.g. missing), List, Echo (valid scores,
    counted on their own), n."""
    out = []
    for r in rows:
        if r["parse"] is None:
            continue
        status = r["frame"][r["parse"]]
        rate = invalid_rate(status.isin([OK, LIST, ECHO]).to_numpy(dtype=bool))
        counts = {s: int((status == s).sum()) for s in STATUSES}
        out.append({"label": r["label"], "role": r["role"], "pair": r["pair"], "range": r["range"], "lo": r["lo"],
                    "hi": r["hi"], "invalid": float(rate), "count": rate.count, **counts,
                    "other": rate.count - sum(counts.values()), LIST: int((status == LIST).sum()),
                    ECHO: int((status == ECHO).sum()), "n": rate.n, "rule": r.get("rule", "paper")})
    cols = ["label", "role", "pair", "range", "lo", "hi", "invalid", "count", *STATUSES, "other", LIST, ECHO, "n",
            "rule"]
    frame = pd.DataFrame(out, columns=cols)
    order = {lb: i for i, lb in enumerate(dict.fromkeys(frame["label"]))}
    return frame.sort_values(["lo", "hi"]).sort_values("label", key=lambda s: s.map(order), kind="stable") \
        .reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# rendering


def _cell(value: float, half: float) -> str:
    if value is None or not np.isfinite(value):
        return "nan"
    return f"{value:.4f} ± {half:.4f}" if np.isfinite(half) else f"{value:.4f}"


def correlation_table(long: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Paper Tables 1-2: per range the rows with Pear. / Spear. / Kend. as 'value ± half-width',
    the best of each range and column marked; then the average over ranges (best marked)."""
    columns = ["Range"] + [SHORT[k] for k in KINDS]
    rows: list = []
    best: set = set()
    cell = {(r.lo, r.hi, r.label, r.correlation): (r.value, r.half_width) for r in long.itertuples()}
    for (lo, hi), block in long.groupby(["lo", "hi"], sort=True):
        labels = list(dict.fromkeys(block["label"]))
        start = len(rows)
        for lb in labels:
            rows.append((lb, [f"{lo}-{hi}"] + [_cell(*cell.get((lo, hi, lb, k), (math.nan, math.nan))) for k in KINDS]))
        for j, k in enumerate(KINDS, start=1):
            vals = np.array([cell.get((lo, hi, lb, k), (math.nan,))[0] for lb in labels], dtype=float)
            if np.isfinite(vals).any():
                best |= {(start + i, j) for i, v in enumerate(vals) if v == np.nanmax(vals)}
    avg = across_ranges(long)
    rows.append((AVERAGE_HEADER, [""] * len(columns)))
    start = len(rows)
    labels = list(dict.fromkeys(avg["label"]))
    means = avg.pivot(index="label", columns="correlation", values="mean")
    for lb in labels:
        part = avg[avg["label"] == lb]
        n, of = int(part["ranges"].min()), int(part["of"].iloc[0])
        where = "mean" if n == of else f"mean of {n} of {of}"
        rows.append((lb, [where] + [_cell(means.at[lb, k], math.nan) for k in KINDS]))
    for j, k in enumerate(KINDS, start=1):
        vals = means.loc[labels, k].to_numpy(dtype=float)
        if np.isfinite(vals).any():
            best |= {(start + i, j) for i, v in enumerate(vals) if v == np.nanmax(vals)}
    return render.Table(title, columns, rows, signature, "Model", best)


def range_bias_table(avg: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Per row: mean, std and max - min of each correlation over the ranges; the highest mean and
    the smallest std / spread of each column marked."""
    columns, rows, best = [], [], set()
    for k in KINDS:
        columns += [f"{SHORT[k]} mean", f"{SHORT[k]} std", f"{SHORT[k]} max-min"]
    columns.append("ranges")
    labels = list(dict.fromkeys(avg["label"]))
    key = avg.set_index(["label", "correlation"])
    grid = np.full((len(labels), 3 * len(KINDS)), np.nan)
    for i, lb in enumerate(labels):
        cells = []
        for j, k in enumerate(KINDS):
            r = key.loc[(lb, k)]
            grid[i, 3 * j:3 * j + 3] = [r["mean"], r["std"], r["spread"]]
            cells += [render.number(r["mean"]), render.number(r["std"]), render.number(r["spread"])]
        part = avg[avg["label"] == lb]
        cells.append(f"{int(part['ranges'].min())}/{int(part['of'].iloc[0])}")
        rows.append((lb, cells))
    for j in range(grid.shape[1]):
        col = grid[:, j]
        if np.isfinite(col).any():
            top = np.nanmax(col) if j % 3 == 0 else np.nanmin(col)
            best |= {(i, j) for i, v in enumerate(col) if v == top}
    return render.Table(title, columns, rows, signature, "Model", best)


def hyperparameter_table(selections: pd.DataFrame, title: str, signature: str = "",
                         criterion: str = "spearman") -> render.Table:
    """Paper Tables 3-5: per (pair, range) the chosen λ and t (and c = λ/t, the dev value, the tied
    grid points), parsed score first, then the expected score."""
    columns = ["Main", "Asst", "Range", "score", "lambda", "t", "c = lambda/t", f"dev {criterion}", "n dev",
               "tied (lambda, t)", "selected on"]
    rows = []
    for _, s in selections.iterrows():
        rows.append((str(s["pair"]) + ("" if s["variant"] == "cd_judge" else f" {s['variant']}"),
                     [s["main"], s["asst"], s["range"], s["score"], f"{s['lam']:g}", f"{s['t']:g}", f"{s['c']:.4g}",
                      render.number(s["value"]), str(s["n_dev"]),
                      f"{s['n_tied']} of {s['points']}: {s['tied']}" if s["n_tied"] > 1 else f"1 of {s['points']}",
                      s["selected_on"]]))
    return render.Table(title, columns, rows, signature, "Pair")


def invalid_table(frame: pd.DataFrame, title: str, signature: str = "") -> render.Table:
    """Paper Tables 6-7: per model row and range the share of invalid outputs and their kinds."""
    columns = ["Range", "Invalid", *STATUSES] + (["other"] if frame["other"].any() else []) \
        + ([LIST] if frame[LIST].any() else []) + ([ECHO] if frame[ECHO].any() else []) + ["n"]
    rows = []
    for _, r in frame.iterrows():
        share = "nan" if not np.isfinite(r["invalid"]) else f"{100 * r['invalid']:.1f}%"
        if r[ECHO] and r["n"]:  # a valid share made of echoes is no "ok": say how much of it they are
            share += f" + {100 * r[ECHO] / r['n']:.1f}% Echo"
        cells = [r["range"], share, *(str(int(r[s])) for s in STATUSES)]
        cells += [str(int(r["other"]))] if "other" in columns else []
        cells += [str(int(r[LIST]))] if LIST in columns else []
        cells += [str(int(r[ECHO]))] if ECHO in columns else []
        rows.append((r["label"], cells + [str(int(r["n"]))]))
    return render.Table(title, columns, rows, signature, "Model")


def parse_rules_note(frame: pd.DataFrame) -> str:
    """Which rule read the table's rows: ``method.parse=paper`` (or ``released``; the paper's Tables
    6-7 used the released rule), or each rule with the rows it read when they differ."""
    rules = list(dict.fromkeys(frame["rule"]))
    if len(rules) == 1:
        return f"method.parse={rules[0]}" + (" (the rule of the paper's Tables 6-7)" if rules[0] == "released" else
                                             " (the paper's Tables 6-7 used method.parse=released)")
    return "; ".join(f"method.parse={r}: " + ", ".join(dict.fromkeys(frame.loc[frame["rule"] == r, "label"]))
                     for r in rules)


# ----------------------------------------------------------------------------------------------
# everything of one study


@dataclass
class JudgeReport:
    """The tables of one study (``tables``: file suffix -> render.Table) and their data."""

    study: Study
    selection: pd.DataFrame  # parsed, then expected
    grid: pd.DataFrame  # dev criterion of every point (parsed score)
    long: pd.DataFrame  # correlations on the reported rows
    across: pd.DataFrame
    invalid: pd.DataFrame
    rows: list[dict]
    notes: list[str]
    tables: dict = field(default_factory=dict)


def notes_of(study: Study, criterion: Criterion, bootstrap: int, alpha: float, seed: int,
             resample: str = "groups") -> list[str]:
    same = not study.has_dev_split
    out = [NO_DEV] if same else []
    where = "all rows" if same else f"dev rows (split=dev: documents of {study.dev_ids})"
    out.append(f"lambda, t chosen per (pair, range) by the best {criterion.kind} against human.{study.aspect} "
               f"on {where}; ties broken by the smallest lambda, then the smallest t (cd_judge scores depend on "
               f"(lambda, t) only through c = lambda/t, so grid points with equal c tie exactly)")
    pct = round(100 * (1 - alpha), 1)
    if bootstrap:
        unit = ("documents (all summaries of a drawn document come along" if resample == "groups"
                else "summaries (each drawn on its own, as the released evaluation")
        out.append(f"reported on {'the same rows' if same else 'the test rows'}; ± = half the width of the "
                   f"{pct:g}% percentile bootstrap interval over {unit}; {bootstrap} resamples, seed {seed})")
    else:
        out.append(f"reported on {'the same rows' if same else 'the test rows'}; no bootstrap intervals")
    out.append("single-model rows: greedy judging by the main / assistant model alone (lambda = 0); "
               "[expected]: the expected score, its contrast selected on its own dev criterion; "
               "a constant judge has no correlation (nan; the paper prints .000)")
    return out


def build(study: Study, criterion: Criterion = Criterion(), *, bootstrap: int = 1000, seed: int = 0,
          alpha: float = 0.05, resample: str = "groups",
          progress: Callable[[int, int, str], None] | None = None) -> JudgeReport:
    """Selection, correlations, across-range statistics, invalid outputs and the rendered tables."""
    parsed, expected = select(study, criterion, "parsed"), select(study, criterion, "expected")
    selection = pd.concat([parsed, expected], ignore_index=True) if not expected.empty else parsed
    rows = reported_rows(study, [parsed, expected])
    long = correlations(study, rows, criterion, bootstrap=bootstrap, seed=seed, alpha=alpha, resample=resample,
                        progress=progress)
    across = across_ranges(long)
    bad = invalid(rows)
    notes = notes_of(study, criterion, bootstrap, alpha, seed, resample)
    rep = JudgeReport(study, selection, grid(study, criterion, "parsed"), long, across, bad, rows, notes)
    n_test = max((len(r["frame"]) for r in rows), default=0)
    fields = {"data": study.data, "aspect": study.aspect, "n": n_test,
              "selection": "same-items" if not study.has_dev_split else "dev", "criterion": criterion.kind,
              "level": criterion.level, "kendall": criterion.variant or "b",
              **({} if criterion.like_threshold is None else {"threshold": f"{criterion.like_threshold:g}"}),
              "bootstrap": bootstrap,
              "resample": resample, "seed": seed, "alpha": alpha}
    sig = str(Signature(fields))
    warn = f"{NO_DEV} — " if not study.has_dev_split else ""
    head = f"{study.data} {study.aspect}"
    loud = " [SELECTED AND REPORTED ON THE SAME ITEMS]" if not study.has_dev_split else ""
    rep.tables["correlation"] = correlation_table(
        long, f"{head}: judge correlation with human judgements by score range{loud}", f"{sig} — {'; '.join(notes)}")
    rep.tables["hyperparameters"] = hyperparameter_table(
        selection, f"{head}: lambda and t chosen on {'all rows' if loud else 'dev'}{loud}",
        f"{sig} — {warn}{notes[1 if warn else 0]}", criterion.kind)
    rep.tables["range_bias"] = range_bias_table(
        across, f"{head}: score range bias, correlation across score ranges{loud}",
        f"{sig} — {warn}mean, std (population, ddof=0) and max-min of each row's correlation over the score "
        "ranges (smaller std and max-min: less range bias); ranges = finite values / ranges")
    if not bad.empty:
        rep.tables["invalid"] = invalid_table(
            bad, f"{head}: invalid judge outputs by score range",
            f"{Signature({'data': study.data, 'aspect': study.aspect, 'n': n_test, 'statistic': 'invalid-rate'})} — "
            "from the parse.<row> columns on the reported rows (contrast at the chosen lambda, t): No Pred = no "
            "number (set to the range minimum), Below = under the minimum (set to it), Above = over the maximum "
            "(clamped); Invalid = all three / n; read with " + parse_rules_note(bad) + (
                "; List = a list number read as the score (\"Coherence: 1. The summary...\" -> 1, as the released "
                "parse reads it; not in Invalid)" if bad[LIST].any() else "") + (
                "; Echo = the prompt's range read as its minimum (\"Coherence: 1-5\" -> 1, as both parse rules read "
                "it; not in Invalid, its share printed next to it: no judgement)" if bad[ECHO].any() else ""))
    return rep


# ----------------------------------------------------------------------------------------------
# plot data


def human_scale(values) -> tuple[int, int]:
    """The scale the human scores live on: (1, 5) when every finite value lies in [1, 5] (SummEval's
    aspects are means of 3 experts on 1-5, G-Eval's and the paper's 5-point scale), else
    (floor(min), ceil(max))."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0 or (v.min() >= 1 and v.max() <= 5):
        return 1, 5
    return int(math.floor(v.min())), int(math.ceil(v.max()))


def human_on_range(values, lo: int, hi: int, scale: tuple[int, int] = (1, 5)) -> np.ndarray:
    """Human scores mapped linearly from ``scale`` onto the judge's range [lo, hi], then rounded to
    the nearest score point (for SummEval a mean of 3 experts, k/3, is never halfway: the bins are
    exact). NaN stays NaN."""
    v = np.asarray(values, dtype=float)
    a, b = scale
    mapped = lo + (v - a) * (hi - lo) / (b - a) if b > a else np.full_like(v, lo)
    return np.clip(np.floor(mapped + 0.5), lo, hi)


def score_shares(values, lo: int, hi: int) -> np.ndarray:
    """Share of the finite values at each integer lo..hi (values rounded to the nearest integer)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.zeros(hi - lo + 1)
    k = np.clip(np.floor(v + 0.5), lo, hi).astype(int) - lo
    return np.bincount(k, minlength=hi - lo + 1) / v.size
