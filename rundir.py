"""The run directory: the contract between `cscore run` (writes) and `cscore report` (reads). A run is
complete once metrics.json, written last, holds METRICS_KEYS and scores.parquet matches its checksum."""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from cscore.files import sha256_file, write_atomic

CONFIG = "config.yaml"
SCORES = "scores.parquet"
METRICS = "metrics.json"
CORRELATIONS_MD = "correlations.md"
CORRELATIONS_CSV = "correlations.csv"
LOG = "run.log"
FAILED = "failed.json"
SHARDS = ".shards"  # a split run's own folder: workers' run directories and logs, sweep points, CDM parts

CDM_FOLDS = "cdm_folds.json"

# the columns of scores.parquet beyond the example's own
SCORE = "score."  # score.<variant>: one column per row of the tables
HUMAN = "human."  # human.<aspect>: one column per human rating
N_SCORED = "n_scored."  # n_scored.<model>: hypothesis tokens that count (skip_first applied)
MEAN_LOGP = "mean_logp."  # mean_logp.<model>: mean log p_1(token) over those tokens
PARSE = "parse."  # parse.<row>: a judge row's parse of its output (ok / No Pred / Below / Above)
OUTPUT = "output."  # output.<row>: a judge row's output text
SPLIT = "split"  # dev / test of each row when split.dev_ids names the dev groups

# metrics.json (schema 2): what every complete run writes
METRICS_SCHEMA = 2
METRICS_KEYS = ("schema", "cscore_version", "signature", "data", "n_items", "split", "n_truncated", "truncated_ids",
                "temperatures", "variants", "models", "correlations", "speed", "nonfinite_scores", "environment")


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)  # a run directory that cannot be written


# metrics.json: the sections a method's kind adds, each with its schema
class JudgeSection(TypedDict):
    """``judge`` (cd_judge, cd_judge_released); each kind adds its decoding settings."""
    score_range: list[int]
    aspect: str
    lam: float
    t: float
    invalid: dict[str, dict[str, int]]  # row -> {No Pred, Below, Above, n}


class PoolerSection(TypedDict):
    """``pooler`` (cdm_classifier): the cross-validation; the folds themselves in cdm_folds.json."""
    file: str
    aspect: str
    k: int
    seed: int
    objective: str
    per_fold: dict[str, list[float]]  # spearman / pearson -> one value per fold
    n_test: list[int]


class DiscriminatorSection(TypedDict):
    """``discriminator`` (cdm_gen): the trained discriminator that scored the run."""
    path: str
    kind: str
    output: str
    accuracy: Any
    trained_on: Any
    generate_counts: Any


SECTIONS: dict[str, Any] = {
    "judge": JudgeSection,
    "pooler": PoolerSection,
    "discriminator": DiscriminatorSection,
    "baselines": dict,  # baseline name -> {columns, params, seconds, and what it counted}
    "units": str,  # "aligned": a cross-family pair scored on aligned units
}


def check_section(name: str, value) -> None:
    """A kind's metrics.json section against its schema (a ValueError: a bug in the writer)."""
    if name not in SECTIONS:
        raise ValueError(f"metrics.json has no section {name!r}; known: {', '.join(SECTIONS)}")
    schema = SECTIONS[name]
    if schema in (dict, str):
        if not isinstance(value, schema):
            raise ValueError(f"metrics.json {name} must be a {schema.__name__}, got {type(value).__name__}")
        return
    missing = [k for k in schema.__annotations__ if not isinstance(value, dict) or k not in value]
    if missing:
        raise ValueError(f"metrics.json {name} lacks {missing}")


def write_metrics(run_dir: Path, metrics: dict) -> None:
    """Write metrics.json last: from this moment the run is complete."""
    metrics = {"schema": METRICS_SCHEMA, **metrics}
    if (Path(run_dir) / SCORES).is_file():  # a scores.parquet damaged later is not read as this run's
        metrics["scores_sha256"] = _sha256(Path(run_dir) / SCORES)
    missing = [k for k in METRICS_KEYS if k not in metrics]
    if missing:
        raise ValueError(f"metrics.json lacks {missing}")  # a bug in the writer, not a user error
    for name in set(metrics) - set(METRICS_KEYS) - {"scores_sha256"}:
        check_section(name, metrics[name])
    write_atomic(Path(run_dir) / METRICS, json.dumps(metrics, indent=2, default=float) + "\n")


def _read_json(path: Path):
    """The JSON value in ``path``, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None


def read_metrics(run_dir: Path) -> dict | None:
    """The run's metrics, or None when it has none that a complete run would have written."""
    metrics = _read_json(Path(run_dir) / METRICS)
    return metrics if isinstance(metrics, dict) and all(k in metrics for k in METRICS_KEYS if k != "schema") else None


def is_complete(run_dir: Path, config_yaml: str | None = None) -> bool:
    run_dir = Path(run_dir)
    metrics = read_metrics(run_dir)
    if metrics is None or not (run_dir / SCORES).is_file():
        return False
    if "scores_sha256" in metrics and _sha256(run_dir / SCORES) != metrics["scores_sha256"]:
        return False
    if config_yaml is None:
        return True
    try:
        return (run_dir / CONFIG).read_text() == config_yaml
    except (OSError, ValueError):  # missing, or not text
        return False


def _sha256(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except OSError:
        return None


def score_columns(columns) -> list[str]:
    return [c for c in columns if c.startswith(SCORE)]


def human_columns(columns) -> list[str]:
    return [c for c in columns if c.startswith(HUMAN)]


@dataclass
class Run:
    """One run directory as ``cscore report`` reads it."""
    path: Path
    config: dict
    metrics: dict | None
    failure: dict | None = None  # failed.json of a run that failed once scoring had started

    @property
    def complete(self) -> bool:
        return self.metrics is not None and (self.path / SCORES).is_file()

    def scores(self):
        import pandas as pd

        return pd.read_parquet(self.path / SCORES)

    def done_metrics(self) -> dict:
        """metrics.json of a run that wrote it (check ``complete`` first)."""
        if self.metrics is None:
            raise ValueError(f"{self.path}: the run wrote no {METRICS}")
        return self.metrics


def find_runs(root: Path) -> list[Run]:
    """Every directory under ``root`` (itself included) that holds a cscore config.yaml."""
    import yaml

    runs = []
    for config in sorted(Path(root).rglob(CONFIG)):
        if config.parent.name == ".hydra":
            continue
        try:
            cfg = yaml.safe_load(config.read_text())
        except yaml.YAMLError:
            continue
        if not isinstance(cfg, dict) or not {"data", "pair", "method"} <= set(cfg):
            continue
        run_dir = config.parent
        metrics = read_metrics(run_dir) if is_complete(run_dir) else None
        runs.append(Run(run_dir, cfg, metrics, _read_json(run_dir / FAILED)))
    return runs
