"""Meta-evaluation of LLM-as-a-judge runs (``cd_judge``, ``cd_judge_released``): the CD-judge paper's
Tables 1-7 from a sweep of judge runs, (λ, t) chosen per (pair, range) on dev (docs/methods/cd-judge.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from cscore import rundir
from cscore.metaeval import judge_tables
from cscore.metaeval.bias import invalid_rate
from cscore.metaeval.correlation import CORRELATIONS
from cscore.metaeval.judge_runs import PARSE, Point, Study
from cscore.metaeval.judge_tables import ECHO, LIST, STATUSES
from cscore.metaeval.kendall import normalize_variant
from cscore.metaeval.levels import KendallOptions
from cscore.metaeval.resampling import bootstrap_ci
from cscore.metaeval.signature import Signature
from cscore.metaeval.statistic import LevelStat

OK = "ok"
TIE_TOL = 1e-12  # criterion values this close (relative to max(1, |best|)) tie
ROLES = ("main", "asst", "contrast")
ROW_OF_ROLE = {"main": "expert", "asst": "amateur"}  # score.<row> of the single-model rows
NO_DEV = ("NO DEV SPLIT: lambda and t were selected and are reported on the same items "
          "(optimistic; give split.dev_ids to select on dev documents)")


@dataclass(frozen=True)
class Criterion:
    """The statistic that picks (λ, t) on dev (``kind``) and the level and Kendall variant of every correlation."""

    kind: str = "spearman"
    level: str = "segment"
    variant: str | None = None
    thresh: float | None = None  # Kendall-like's gold-difference threshold (None: 25)

    @property
    def like_threshold(self) -> float | None:
        """Kendall-like's threshold (25 unless given); None for other variants."""
        if self.variant is None or normalize_variant(self.variant) != "like":
            return None
        return 25.0 if self.thresh is None else float(self.thresh)

    def stat(self, human: str, kind: str | None = None) -> LevelStat:
        kind = kind or self.kind
        if kind != "kendall":
            return LevelStat(human, self.level, kind)
        return LevelStat(human, self.level, kind, self.variant, options=KendallOptions(thresh=self.like_threshold))


def score_column(row: str, score: str = "parsed") -> str:
    """score.<row> (the parsed score) or score.<row>_expected."""
    return f"{rundir.SCORE}{row}" + ("_expected" if score == "expected" else "")


def _value(stat, frame: pd.DataFrame, col: str) -> float:
    if col not in frame.columns or frame.empty or not np.isfinite(frame[col].to_numpy(dtype=float)).any():
        return math.nan
    return float(stat(frame, col))


def grid(study: Study, criterion: Criterion = Criterion(), score: str = "parsed") -> pd.DataFrame:
    """The dev criterion at every grid point (``value``; ``n``: dev rows with a finite score)."""
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
    """(chosen index, tied indices): the highest value (ties within tol * max(1, |best|), or all rows when
    none is finite) to the smallest lam, then t."""
    finite = candidates[np.isfinite(candidates["value"].to_numpy(dtype=float))]
    if finite.empty:
        tied = candidates
    else:
        best = finite["value"].max()
        tied = finite[finite["value"] >= best - tol * max(1.0, abs(best))]
    order = tied.sort_values(["lam", "t"], kind="stable")
    return order.index[0], list(order.index)


def select(study: Study, criterion: Criterion = Criterion(), score: str = "parsed") -> pd.DataFrame:
    """One row per (pair, variant, range): the chosen point, its dev value and the points tied with it."""
    g = grid(study, criterion, score)
    rows = []
    for setting in study.settings():
        pair, variant, lo, hi = setting
        cand = at_setting(g, setting)
        if score == "expected" and not np.isfinite(cand["value"].to_numpy(dtype=float)).any():
            continue  # no expected score (a multi-token range off the kept c grid: a study note) or none that varies
        best, tied = choose(cand)
        point = chosen_point(study, g.loc[best])
        rows.append({"pair": pair, "variant": variant, "range": f"{lo}-{hi}", "lo": lo, "hi": hi,
                     "main": point.main, "asst": point.asst, "score": score,
                     "lam": point.lam, "t": point.t, "c": point.c, "value": g.at[best, "value"],
                     "n_dev": int(g.at[best, "n"]), "points": len(cand), "n_tied": len(tied),
                     "tied": "; ".join(f"({g.at[i, 'lam']:g}, {g.at[i, 't']:g})" for i in tied),
                     "selected_on": g.at[best, "selected_on"], "reported_on": point.rows("test")[1]})
    cols = ["pair", "variant", "range", "lo", "hi", "main", "asst", "score", "lam", "t", "c", "value", "n_dev",
            "points", "n_tied", "tied", "selected_on", "reported_on"]
    return pd.DataFrame(rows, columns=cols)


def at_setting(frame: pd.DataFrame, setting: tuple) -> pd.DataFrame:
    """The rows of a grid or a selection of one (pair, variant, lo, hi)."""
    pair, variant, lo, hi = setting
    return frame[(frame["pair"] == pair) & (frame["variant"] == variant) & (frame["lo"] == lo) & (frame["hi"] == hi)]


def chosen_point(study: Study, sel_row) -> Point:
    setting = (sel_row["pair"], sel_row["variant"], sel_row["lo"], sel_row["hi"])
    return next(p for p in study.points if p.setting == setting and p.lam == sel_row["lam"] and p.t == sel_row["t"])


def contrast_label(pair: str, variant: str) -> str:
    return f"Contra. ({pair})" if variant == "cd_judge" else f"{variant} ({pair})"


def reported_rows(study: Study, selections: list[pd.DataFrame]) -> list[dict]:
    """The correlation table's rows: main, assistant and contrast at each pair's chosen point, per range and score."""
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
    return sorted(out, key=lambda r: (r["lo"], r["hi"], r["score"] != "parsed", ROLES.index(r["role"])))


def correlations(study: Study, rows: list[dict], criterion: Criterion = Criterion(), *, bootstrap: int = 1000,
                 seed: int = 0, alpha: float = 0.05, resample: str = "groups",
                 progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Long table of every row's correlations with bootstrap intervals over documents or summaries."""
    unit = "group" if resample == "groups" else None
    out, total, done = [], len(rows) * len(CORRELATIONS), 0
    for r in rows:
        frame, col = r["frame"], r["column"]
        finite = np.isfinite(frame[col].to_numpy(dtype=float)) & np.isfinite(frame[study.human].to_numpy(dtype=float))
        groups = int(frame.loc[finite, "group"].nunique()) if "group" in frame.columns else int(finite.sum())
        units = groups if unit in frame.columns else int(finite.sum())  # what the bootstrap would redraw
        for kind in CORRELATIONS:
            stat = criterion.stat(study.human, kind)
            if bootstrap and units >= 2:  # one unit redrawn is the same table every time: no interval
                value, low, high = bootstrap_ci(frame, stat, col, resample=unit if unit in frame.columns else None,
                                                n=bootstrap, seed=seed, alpha=alpha)
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


def invalid(rows: list[dict]) -> pd.DataFrame:
    """Invalid outputs (paper Tables 6-7) of every row with a parse column; List and Echo are valid, counted apart."""
    out = []
    for r in rows:
        if r["parse"] is None:
            continue
        status = r["frame"][r["parse"]]
        rate = invalid_rate(status.isin([OK, LIST, ECHO]).to_numpy(dtype=bool))
        counts = {s: int((status == s).sum()) for s in (*STATUSES, LIST, ECHO)}
        out.append({"label": r["label"], "role": r["role"], "pair": r["pair"], "range": r["range"], "lo": r["lo"],
                    "hi": r["hi"], "invalid": float(rate), "count": rate.count, **counts, "n": rate.n,
                    "other": rate.count - sum(counts[s] for s in STATUSES), "rule": r.get("rule", "paper")})
    cols = ["label", "role", "pair", "range", "lo", "hi", "invalid", "count", *STATUSES, "other", LIST, ECHO, "n",
            "rule"]
    frame = pd.DataFrame(out, columns=cols)
    order = {lb: i for i, lb in enumerate(dict.fromkeys(frame["label"]))}
    return frame.sort_values(["lo", "hi"]).sort_values("label", key=lambda s: s.map(order), kind="stable") \
        .reset_index(drop=True)


@dataclass
class JudgeReport:
    """The tables of one study (``tables``: file suffix -> render.Table) and their data."""

    study: Study
    selection: pd.DataFrame  # parsed, then expected
    grid: pd.DataFrame  # dev criterion of every point (parsed score)
    long: pd.DataFrame  # correlations on the reported rows
    across: pd.DataFrame
    invalid: pd.DataFrame
    notes: list[str]
    tables: dict = field(default_factory=dict)


def degenerate_note(long: pd.DataFrame, bootstrap: int, resample: str) -> str:
    """The rows printed without ± although a bootstrap ran (fewer than two units to redraw), or ''."""
    if not bootstrap or long.empty:
        return ""
    none = long[np.isfinite(long["value"].to_numpy(dtype=float)) & ~np.isfinite(long["low"].to_numpy(dtype=float))]
    if none.empty:
        return ""
    unit = "documents" if resample == "groups" else "summaries"
    labels = ", ".join(dict.fromkeys(f"{r['label']} {r['range']}" for _, r in none.iterrows()))
    return (f"no interval (no ±) for {labels}: fewer than two {unit} with a score to resample, so every "
            "resample is the same table")


def notes_of(study: Study, criterion: Criterion, bootstrap: int, alpha: float, seed: int,
             resample: str = "groups") -> list[str]:
    same = not study.has_dev_split
    out = [NO_DEV] if same else []
    where = "all rows" if same else f"dev rows (split=dev: documents of {study.dev_ids})"
    out.append(f"lambda, t chosen per (pair, range) by the best {criterion.kind} against human.{study.aspect} "
               f"on {where}; ties broken by the smallest lambda, then the smallest t (cd_judge scores depend on "
               f"(lambda, t) only through c = lambda/t, so grid points with equal c tie exactly)")
    reported = f"reported on {'the same rows' if same else 'the test rows'}"
    if bootstrap:
        unit = ("documents (all summaries of a drawn document come along" if resample == "groups"
                else "summaries (each drawn on its own, as the released evaluation")
        out.append(f"{reported}; ± = half the width of the {round(100 * (1 - alpha), 1):g}% percentile bootstrap "
                   f"interval over {unit}; {bootstrap} resamples, seed {seed})")
    else:
        out.append(f"{reported}; no bootstrap intervals")
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
    across = judge_tables.across_ranges(long)
    bad = invalid(rows)
    notes = notes_of(study, criterion, bootstrap, alpha, seed, resample)
    notes += [n for n in (degenerate_note(long, bootstrap, resample), judge_tables.fallback_note(bad)) if n]
    rep = JudgeReport(study, selection, grid(study, criterion, "parsed"), long, across, bad, notes)
    n_test = max((len(r["frame"]) for r in rows), default=0)
    fields = {"data": study.data, "aspect": study.aspect, "n": n_test,
              "selection": "same-items" if not study.has_dev_split else "dev", "criterion": criterion.kind,
              "level": criterion.level, "kendall": criterion.variant or "b",
              **({} if criterion.like_threshold is None else {"threshold": f"{criterion.like_threshold:g}"}),
              "bootstrap": bootstrap, "resample": resample, "seed": seed, "alpha": alpha}
    sig = str(Signature(fields))
    warn = f"{NO_DEV} — " if not study.has_dev_split else ""
    head = f"{study.data} {study.aspect}"
    loud = " [SELECTED AND REPORTED ON THE SAME ITEMS]" if not study.has_dev_split else ""
    rep.tables["correlation"] = judge_tables.correlation_table(
        long, f"{head}: judge correlation with human judgements by score range{loud}", f"{sig} — {'; '.join(notes)}")
    rep.tables["hyperparameters"] = judge_tables.hyperparameter_table(
        selection, f"{head}: lambda and t chosen on {'all rows' if loud else 'dev'}{loud}",
        f"{sig} — {warn}{notes[1 if warn else 0]}", criterion.kind)
    rep.tables["range_bias"] = judge_tables.range_bias_table(
        across, f"{head}: score range bias, correlation across score ranges{loud}",
        f"{sig} — {warn}mean, std (population, ddof=0) and max-min of each row's correlation over the score "
        "ranges (smaller std and max-min: less range bias); ranges = finite values / ranges")
    if not bad.empty:
        rep.tables["invalid"] = judge_tables.invalid_table(
            bad, f"{head}: invalid judge outputs by score range",
            f"{Signature({'data': study.data, 'aspect': study.aspect, 'n': n_test, 'statistic': 'invalid-rate'})} — "
            "from the parse.<row> columns on the reported rows (contrast at the chosen lambda, t): No Pred = no "
            "number (set to the range minimum), Below = under the minimum (set to it), Above = over the maximum "
            "(clamped); Invalid = all three / n; read with " + judge_tables.parse_rules_note(bad) + (
                "; List = a list number read as the score (\"Coherence: 1. The summary...\" -> 1, as the released "
                "parse reads it; not in Invalid)" if bad[LIST].any() else "") + (
                "; Echo = the prompt's range read as its minimum (\"Coherence: 1-5\" -> 1, as both parse rules read "
                "it; not in Invalid, its share printed next to it: no judgement)" if bad[ECHO].any() else ""))
    return rep
