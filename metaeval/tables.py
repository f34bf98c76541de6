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

from cscore import rundir
from cscore.errors import ConfigError, CscoreError
from cscore.metaeval import render
from cscore.metaeval.accuracy import PROTOCOLS, accuracy, label_rule
from cscore.metaeval.bias import bias_score
from cscore.metaeval.kendall import VARIANTS, normalize_variant
from cscore.metaeval.levels import KINDS, LEVELS
from cscore.metaeval.pairwise import TieCalibratedStat, acc_eq_at
from cscore.metaeval.uncertainty import LevelStat, MeanStat, bootstrap_ci, significance_clusters
from cscore.rundir import Run

# bootstrap units: groups = documents / source segments (all their rows come along), items = rows
RESAMPLE = {"groups": "group", "items": None}
KENDALL_LIKE_THRESHOLD = 25.0  # mt-metrics-eval's KendallLike default: WMT DA points on a 0-100 scale
AVERAGES = ("macro", "micro")  # over the groups of level item / system_grouped (levels.correlate_at)
TIES = ("calibrated", "exact")  # Kendall 23 / acc23: metric-tie epsilon searched (WMT23) or 0


@dataclass
class Spec:
    """The statistic of the quality tables and its uncertainty; a bad value is a ``ConfigError``
    (one line) when the spec is made. ``variant`` is stored by its canonical name (b, c, 23,
    acc23, like); ``threshold``: Kendall-like's gold-difference threshold (None: 25); ``average``:
    macro (plain mean over items / systems) or micro (weighted as mt-metrics-eval's ``macro=False``:
    for Kendall-like by counted pairs, i.e. pooled, its ``KendallLike`` default); ``ties`` (Kendall
    23 / acc23 only): calibrated (the metric-tie epsilon that maximises the value, mt-metrics-eval's
    ``KendallWithTiesOpt``; acc23's default) or exact (epsilon 0, ``KendallVariants``; 23's default)."""

    level: str = "segment"
    kind: str = "pearson"
    variant: str | None = None  # Kendall variant: b (default), c, 23, acc23, like
    bootstrap: int = 1000
    permutations: int = 1000
    seed: int = 0
    alpha: float = 0.05
    threshold: float | None = None  # Kendall-like only: count pairs whose human scores differ by >= this
    resample: str = "groups"  # bootstrap unit: groups (documents / source segments) or items (rows)
    accuracy: str = "summac"  # quantized accuracy protocol (metaeval.accuracy.PROTOCOLS)
    average: str = "macro"  # over the groups of level item / system_grouped: macro or micro (pooled for like)
    ties: str | None = None  # Kendall 23 / acc23: calibrated or exact (None: calibrated for acc23, exact for 23)

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ConfigError(f"unknown level {self.level!r}; use one of {', '.join(LEVELS)}")
        if self.kind not in KINDS:
            raise ConfigError(f"unknown correlation {self.kind!r}; use one of {', '.join(KINDS)}")
        if self.variant is not None:
            try:
                self.variant = normalize_variant(self.variant)
            except ValueError:
                raise ConfigError(f"unknown Kendall variant {self.variant!r}; use one of {', '.join(VARIANTS)} "
                                  f"(or tau_b, tau_c, tau_23, acc_23, kendall_like)") from None
            if self.kind != "kendall":
                raise ConfigError(f"--kendall {self.variant} applies to the Kendall correlation only, not "
                                  f"--correlation {self.kind}")
        if self.threshold is not None:
            if self.kind != "kendall" or self.variant != "like":
                raise ConfigError("--kendall-threshold applies to --kendall like only")
            if not (_is_number(self.threshold) and math.isfinite(self.threshold) and self.threshold > 0):
                raise ConfigError(f"--kendall-threshold must be a number > 0 (a difference of human scores), "
                                  f"got {self.threshold!r}")
        for name, value, what in (("bootstrap", self.bootstrap, "0: no confidence intervals"),
                                  ("permutations", self.permutations, "0: no significance clusters"),
                                  ("seed", self.seed, "a random seed")):
            if not _is_int(value) or value < 0:
                raise ConfigError(f"--{name} must be a whole number >= 0 ({what}), got {value!r}")
        if self.resample not in RESAMPLE:
            raise ConfigError(f"--resample must be one of {', '.join(RESAMPLE)}, got {self.resample!r}")
        if self.accuracy not in PROTOCOLS:
            raise ConfigError(f"--accuracy must be one of {', '.join(PROTOCOLS)}, got {self.accuracy!r}")
        if self.average not in AVERAGES:
            raise ConfigError(f"--average must be one of {', '.join(AVERAGES)}, got {self.average!r}")
        if self.average == "micro" and self.level not in ("item", "system_grouped"):
            raise ConfigError(f"--average micro applies to --level item or system_grouped (the levels that average "
                              f"over groups), not --level {self.level}")
        if self.ties is not None:
            if self.ties not in TIES:
                raise ConfigError(f"--ties must be one of {', '.join(TIES)}, got {self.ties!r}")
            if self.kind != "kendall" or self.variant not in ("23", "acc23"):
                raise ConfigError("--ties applies to --kendall acc23 or 23 only")
        if not (_is_number(self.alpha) and 0 < self.alpha < 1):
            raise ConfigError(f"--alpha must lie strictly between 0 and 1 (0.05: 95 % intervals and a 5 % "
                              f"significance level), got {self.alpha!r}")

    @property
    def like(self) -> bool:
        return self.kind == "kendall" and self.variant == "like"

    @property
    def like_threshold(self) -> float | None:
        """Kendall-like's threshold (25 unless given); None for every other statistic."""
        if not self.like:
            return None
        return KENDALL_LIKE_THRESHOLD if self.threshold is None else float(self.threshold)

    @property
    def calibrated(self) -> bool:
        """Kendall 23 / acc23 with the metric-tie epsilon searched (acc23 unless ``ties='exact'``)."""
        if self.kind != "kendall" or self.variant not in ("23", "acc23"):
            return False
        return (self.ties or ("calibrated" if self.variant == "acc23" else "exact")) == "calibrated"

    def kendall_kw(self) -> dict:
        """The options ``LevelStat`` / ``correlate_at`` take for this statistic."""
        return {"thresh": self.like_threshold} if self.like else {}

    def fields(self) -> dict:
        """The signature fields of this statistic (``cscore.metaeval.signature``)."""
        out = {"level": self.level, "correlation": self.kind}
        if self.kind == "kendall":
            out["kendall"] = self.variant or "b"
        if self.like:
            out["threshold"] = f"{self.like_threshold:g}"
        if self.variant == "acc23" or self.calibrated:
            out["ties"] = "calibrated" if self.calibrated else "exact"
        if self.average != "macro":
            out["average"] = self.average
        return {**out, "bootstrap": self.bootstrap, "resample": self.resample, "seed": self.seed,
                "permutations": self.permutations, "test": "perm-both", "alpha": self.alpha}

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.fields().items())


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


@dataclass
class Dataset:
    """The scored examples of one dataset/split, with every score column of every run on it."""

    key: str
    frame: pd.DataFrame
    humans: list[str]
    split_by: str | None
    rows: dict = field(default_factory=dict)  # label -> {"run": Run, "variant": str, "params": dict}


def _effective(method: str, params: dict, defaults: Callable[[str, dict], dict] | None) -> dict:
    """The parameters a row was computed with: the recorded ones over the method's defaults
    (``defaults(method, params)``: the caller's method registry, e.g. ``scorers.methods.with_defaults``,
    as the scorer fills them in). A comparison row records only what
    its run set (an ensemble row of a run without ``floor`` leaves it out; ``method=ensemble``
    writes it), so two records of one computation compare equal only this way. A method this
    cscore does not know (or no ``defaults``) keeps its recorded parameters."""
    if defaults is None:
        return dict(params)
    try:
        return defaults(method, params)
    except (CscoreError, ImportError, OSError):
        return dict(params)


def _flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (config or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _differing(dicts: list[dict]) -> list[str]:
    """The keys whose values are not the same in all of ``dicts`` (a missing key counts as None)."""
    keys = sorted({k for d in dicts for k in d})
    return [k for k in keys if len({json.dumps(d.get(k), sort_keys=True, default=str) for d in dicts}) > 1]


def _shown(value) -> str:
    """A parameter value as a label shows it, as the config writes it: null, true, [1,5]."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _labels(entries: list[dict]) -> list[str]:
    """One label per distinct row: ``<pair> <variant>`` (a baseline row, which reads no pair:
    ``<variant>``); rows that would share it add the parameters that tell them apart
    (``contrast gamma=0.1``, ``expert norm=max``), then the pair settings that differ (pairs of
    one name); rows alike in all of that are numbered (``#2``, ...). Rows computed differently
    never share a label, and a row's label names no parameter that does not vary."""
    def name(e):
        if e["method"] == "baseline":
            return e["variant"]
        return f"{e['run'].config['pair'].get('name', '?')} {e['variant']}"

    labels = [name(e) for e in entries]
    for with_keys in (lambda e: e["params"], lambda e: _flat(e["run"].config["pair"])):
        groups: dict[str, list[int]] = {}
        for i, lb in enumerate(labels):
            groups.setdefault(lb, []).append(i)
        for idx in (g for g in groups.values() if len(g) > 1):
            values = [with_keys(entries[i]) for i in idx]
            keys = _differing(values)
            for i, v in zip(idx, values):
                labels[i] = " ".join([labels[i]] + [f"{k}={_shown(v.get(k))}" for k in keys])
    seen: dict[str, int] = {}
    for i, lb in enumerate(labels):
        seen[lb] = seen.get(lb, 0) + 1
        if seen[lb] > 1:
            labels[i] = f"{lb} #{seen[lb]}"
    return labels


def _data_key(run: Run, prompt: bool = True) -> str:
    d, split = run.config["data"], run.config.get("split", {})
    extra = {k: v for k, v in d.items() if k not in ("template",)}
    key = {"data": extra, "split": split}
    if prompt:
        key["prompt"] = run.config.get("prompt", {}).get("condition")
    return json.dumps(key, sort_keys=True, default=str)


def _is_baseline(run: Run) -> bool:
    return run.config.get("method", {}).get("name") == "baseline"


def _group(runs: list[Run]) -> dict[str, list[Run]]:
    """Complete runs by dataset (data options, split and prompt condition). A baseline reads no
    prompt: its rows join every group of its data and split (a group of their own if none)."""
    by_data: dict[str, list[Run]] = {}
    done = [r for r in runs if r.complete]
    for run in done:
        if not _is_baseline(run):
            by_data.setdefault(_data_key(run), []).append(run)
    for run in done:
        if _is_baseline(run):
            same = [k for k, g in by_data.items() if _data_key(g[0], prompt=False) == _data_key(run, prompt=False)
                    and not _is_baseline(g[0])]
            for k in same or [_data_key(run)]:
                by_data.setdefault(k, []).append(run)
    return by_data


def collect(runs: list[Run], defaults: Callable[[str, dict], dict] | None = None) -> list[Dataset]:
    """Group complete runs by dataset and merge their score columns (one row per example).
    A row repeated across the runs (same pair, method and parameters, defaults filled in:
    ``_effective``) appears once, labelled as ``_labels`` says; ``params`` are its effective
    parameters; ``main``: some run's configured method. ``defaults``: see ``_effective``."""
    by_data = _group(runs)
    out = []
    for key, group in by_data.items():
        base = None
        ds = Dataset(key, pd.DataFrame(), [], None)
        entries: dict[str, dict] = {}
        for run in group:
            scores = run.scores()
            if base is None:
                base = scores[[c for c in scores.columns if not c.startswith(rundir.SCORE)]].copy()
                ds.humans = [c for c in scores.columns if c.startswith(rundir.HUMAN)]
                cfg = run.config
                ds.split_by = cfg.get("meta", {}).get("split_by") or cfg["data"].get("split_by")
            scores = scores.set_index("id").reindex(base["id"])
            for v in run.done_metrics()["variants"]:
                main = v["name"] == run.config["method"].get("variant")
                pair = None if v["method"] == "baseline" else run.config["pair"]  # a baseline reads no pair
                params = _effective(v["method"], v["params"], defaults)
                ident = json.dumps([pair, v["method"], params], sort_keys=True, default=str)
                if ident in entries:
                    entries[ident]["main"] |= main
                    continue
                entries[ident] = {"run": run, "variant": v["name"], "method": v["method"], "params": params,
                                  "main": main, "values": scores[f"{rundir.SCORE}{v['name']}"].to_numpy()}
        if base is None:  # a group holds one run at least
            continue
        rows = list(entries.values())
        for label, e in zip(_labels(rows), rows):
            base[f"{rundir.SCORE}{label}"] = e["values"]
            ds.rows[label] = {"run": e["run"], "variant": e["variant"], "params": e["params"], "main": e["main"]}
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


def statistic(spec: Spec, human: str, subset: tuple | None = None) -> LevelStat | TieCalibratedStat:
    """The statistic ``spec`` names, against ``human``, on the rows of ``subset`` (column, value)."""
    if spec.calibrated:
        return TieCalibratedStat(human, spec.level, spec.variant or "acc23", subset=subset)
    return LevelStat(human, spec.level, spec.kind, spec.variant, subset=subset, average=spec.average,
                     **spec.kendall_kw())


def columns(ds: Dataset, spec: Spec) -> list[tuple[str, LevelStat | TieCalibratedStat | MeanStat]]:
    """(name, statistic) of every column of the quality table: one per target, then AVG (their mean)."""
    tgts = targets(ds)
    stats = [statistic(spec, h, None if v is None else (ds.split_by, v)) for h, v in tgts]
    names = [_target_name(h, v, len(ds.humans)) for h, v in tgts]
    return list(zip(names, stats)) + [("AVG", MeanStat(stats, "AVG"))]


MAX_CALIBRATED_PAIRS = 5_000_000  # pairs a tie-calibrated cell may search (all held in memory, ~40 bytes each)


def _check_pairs(ds: Dataset, spec: Spec, cols) -> None:
    """Tie calibration holds every pair of a cell in memory: refuse a table with too many."""
    for name, stat in cols:
        if not isinstance(stat, TieCalibratedStat):
            continue
        for lb in ds.rows:
            n = stat.pairs_needed(ds.frame, f"{rundir.SCORE}{lb}")
            if n > MAX_CALIBRATED_PAIRS:
                raise ConfigError(f"tie-calibrated {spec.variant} at --level {spec.level} searches all {n:,} pairs of "
                                  f"column {name} at once, more than {MAX_CALIBRATED_PAIRS:,}: use --level item "
                                  f"(WMT23's segment level: pairs within each source segment) or --ties exact")


def quality(ds: Dataset, spec: Spec, progress: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Long table: label, target, value, low, high, rank (significance cluster, 1 = best); and
    ``epsilon`` (the metric-tie threshold of each cell) for a tie-calibrated statistic.
    ``progress(done, total, what)`` is called after every step (clusters or one bootstrap)."""
    labels = list(ds.rows)
    cols = columns(ds, spec)
    _check_pairs(ds, spec, cols)
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
                point, low, high = bootstrap_ci(ds.frame, stat, col, resample=RESAMPLE[spec.resample], n=spec.bootstrap,
                                                seed=spec.seed, alpha=spec.alpha)
            else:
                point, low, high = stat(ds.frame, col), math.nan, math.nan
            rows.append({"label": lb, "target": name, "value": point, "low": low, "high": high,
                         "rank": ranks.get(lb)})
            if spec.calibrated:  # the metric-tie threshold chosen for the cell (none for AVG)
                rows[-1]["epsilon"] = stat.calibration(ds.frame, col).epsilon \
                    if isinstance(stat, TieCalibratedStat) else math.nan
            done += 1
            if progress:
                progress(done, total, f"{name}: bootstrap {lb}, {spec.bootstrap} resamples")
    return pd.DataFrame(rows)


def combined(longs: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """The quality tables of several datasets (``(stem, quality long table)``) as one long table:
    label, target = ``<stem>:<column>`` for every column but AVG, value; then AVG = the mean over
    all those columns (NaN where a row lacks one), as ContrastScore Table 1 averages the five
    columns of QAGS-XSum and SummEval. Rows in the order first found."""
    parts = [long.loc[long["target"] != "AVG", ["label", "target", "value"]].assign(
        target=lambda f, stem=stem: stem + ":" + f["target"].astype(str)) for stem, long in longs]
    cells = pd.concat(parts, ignore_index=True)
    grid = cells.pivot(index="label", columns="target", values="value")
    grid = grid.reindex(index=list(dict.fromkeys(cells["label"])), columns=list(dict.fromkeys(cells["target"])))
    avg = grid.mean(axis=1, skipna=False)
    full = grid.stack(future_stack=True).rename("value").reset_index()
    return pd.concat([full, pd.DataFrame({"label": avg.index, "target": "AVG", "value": avg.to_numpy()})],
                     ignore_index=True)


def _cluster_ranks(ds: Dataset, spec: Spec, stat, labels: list[str]) -> dict:
    if not spec.permutations or len(labels) < 2:
        return {}
    clusters = significance_clusters(ds.frame, stat, [f"{rundir.SCORE}{lb}" for lb in labels], n=spec.permutations,
                                     seed=spec.seed, alpha=spec.alpha)
    return {c["metric"].removeprefix(rundir.SCORE): c["rank"] for c in clusters}


def largest_human_difference(frame: pd.DataFrame, human: str, level: str, subset: tuple | None = None,
                             group_col: str = "group", system_col: str = "system") -> float:
    """The largest |difference| between two human scores that a correlation at ``level`` compares:
    any two rows (segment), two rows of one item (item) or of one system (system_grouped), two
    systems' mean scores (system); on the rows where ``frame[subset[0]] == subset[1]``. NaN when
    there is no such pair. Kendall-like counts only pairs that differ by at least its threshold."""
    f = frame if subset is None else frame[frame[subset[0]] == subset[1]]
    h = pd.to_numeric(f[human], errors="coerce")
    ok = np.isfinite(h.to_numpy(dtype=np.float64))
    if level == "segment":
        spans = [h[ok].max() - h[ok].min()] if ok.sum() >= 2 else []
    else:
        key = group_col if level == "item" else system_col
        if key not in f.columns:
            return math.nan
        if level == "system":
            means = h[ok].groupby(f[key][ok]).mean()
            spans = [means.max() - means.min()] if len(means) >= 2 else []
        else:
            by = h[ok].groupby(f[key][ok])
            spans = list((by.max() - by.min())[by.size() >= 2])
    return float(max(spans)) if spans else math.nan


def unreachable_like_threshold(ds: Dataset, spec: Spec) -> dict[str, float]:
    """Kendall-like only: the columns (name -> the largest human difference) in which no pair of
    human scores differs by the threshold, so every row's value there is NaN."""
    if not spec.like:
        return {}
    out = {}
    for h, v in targets(ds):
        d = largest_human_difference(ds.frame, h, spec.level, None if v is None else (ds.split_by, v))
        threshold = spec.like_threshold  # set: spec.like
        if threshold is not None and d < threshold:  # NaN (no pair at all) is no matter of the threshold
            out[_target_name(h, v, len(ds.humans))] = d
    return out


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
    expert's mean per-token log-likelihood. With ``meta.split_by`` groups (language pairs) it is
    computed within each group (min-max normalisation and Spearman over that group's rows), then
    AVG = the mean over the columns, as ContrastScore Table 8 scores each language pair and averages."""
    ls = f"{rundir.MEAN_LOGP}expert"  # written by the run: no re-deriving of norm / skip_first
    if ls not in ds.frame.columns or not any(r["variant"] == "expert" for r in ds.rows.values()):
        return pd.DataFrame()
    tgts = targets(ds)
    long = _per_target(ds, tgts, lambda f, col, h: {
        "value": bias_score(f[ls].to_numpy(), f[col].to_numpy(), f[h].to_numpy())})
    if all(v is None for _, v in tgts):
        return long
    avg = long.groupby("label", sort=False)["value"].agg(lambda v: v.mean(skipna=False))
    return pd.concat([long, pd.DataFrame({"label": avg.index, "target": "AVG", "value": avg.to_numpy()})],
                     ignore_index=True)


def quantized(ds: Dataset, protocol: str = "summac") -> pd.DataFrame:
    """Quantized accuracy (CDM Table 5) for every aspect: ``summac`` (human label by SummaC's rule,
    ``label_rule``; threshold chosen on the alternate dev cut, balanced accuracy on the test cut;
    also ``threshold``, ``n_dev``, ``n_test``, ``labels``) or ``topk`` (human label = the top score;
    see metaeval.accuracy)."""
    data_name = next(iter(ds.rows.values()))["run"].config.get("data", {}).get("name") if ds.rows else None

    def value(f, col, h):
        if protocol != "summac":
            return accuracy(f[col].to_numpy(), f[h].to_numpy(), protocol)
        labels, rule = label_rule(f, h, data_name)
        return {**accuracy(f[col].to_numpy(), f[h].to_numpy(), protocol, labels=labels), **rule}

    return _per_target(ds, [(h, None) for h in ds.humans], value)


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
        metrics = run.done_metrics()
        sp = metrics.get("speed", {})
        rows.append({"run": run.path.name, "data": run.config["data"]["name"], "pair": run.config["pair"].get("name"),
                     "method": run.config["method"].get("variant"), "items": metrics.get("n_items"),
                     "score_seconds": sp.get("score_seconds"), "samples_per_second": sp.get("samples_per_second"),
                     "tokens_per_second": _tokens_per_second(sp),
                     "useful_tflop_per_s": _tflop_per_second(sp), "mfu": sp.get("mfu"),
                     "from_cache": any(p.get("from_cache") for p in (sp.get("passes") or {}).values()),
                     "load_seconds": sum((sp.get("load_seconds") or {}).values()),
                     "peak_rss_mb": sp.get("peak_rss_mb"), "peak_gpu_mb": sp.get("peak_gpu_mb")})
    return pd.DataFrame(rows)


def _tflop_per_second(sp: dict) -> float | None:
    """Useful TFLOP/s of a run's computation (metrics.json speed.useful_flops over score_seconds)."""
    f, s = sp.get("useful_flops"), sp.get("score_seconds")
    return f / s / 1e12 if f and s else None


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
    # the run's total counts work its passes did together once (cli/pipeline/stages.py::speed_figures)
    seconds = sp.get("score_seconds") or sum(p.get("score_seconds") or 0 for p in passes)
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
