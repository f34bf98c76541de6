"""The run directory: the one contract between `cscore run` (writes) and `cscore report` (reads).

    config.yaml       the resolved config (Hydra's own copies are in .hydra/)
    scores.parquet    one row per example: the example columns, human.<aspect>, score.<variant>,
                      and per model n_scored.<model> / mean_logp.<model> (scored tokens, mean log p)
    metrics.json      written last and atomically: its presence (with the keys below) marks completion
    correlations.md / correlations.csv, run.log
    failed.json       only after a failure once scoring had started (error, stage, time)

A run is complete when metrics.json holds every key of METRICS_KEYS, scores.parquet exists (with
the SHA-256 metrics.json recorded for it, ``scores_sha256``) and, when a config is given,
config.yaml is that config. Nothing else decides it."""

from __future__ import annotations

import errno
import json
from pathlib import Path

CONFIG = "config.yaml"
SCORES = "scores.parquet"
METRICS = "metrics.json"
CORRELATIONS_MD = "correlations.md"
CORRELATIONS_CSV = "correlations.csv"
LOG = "run.log"
FAILED = "failed.json"

SCORE = "score."  # score.<variant>: one column per row of the tables
HUMAN = "human."  # human.<aspect>: one column per human rating
N_SCORED = "n_scored."  # n_scored.<model>: hypothesis tokens that count (skip_first applied)
MEAN_LOGP = "mean_logp."  # mean_logp.<model>: mean log p_1(token) over those tokens

# metrics.json (schema 2): what every complete run writes
METRICS_SCHEMA = 2
METRICS_KEYS = ("schema", "cscore_version", "signature", "data", "n_items", "split", "n_truncated", "truncated_ids",
                "temperatures", "variants", "models", "correlations", "speed", "nonfinite_scores", "environment")


# a run directory that cannot be written: full disk or quota, a file-size limit, a read-only file system
NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)


def write_parquet_atomic(path: Path, table) -> None:
    """scores.parquet whole or not at all (two jobs writing the same run directory never tear it)."""
    from cscore.scorers.files import atomic_file

    with atomic_file(Path(path), "wb") as f:
        table.to_parquet(f, index=False)


def write_text_atomic(path: Path, text: str) -> None:
    from cscore.scorers.files import write_atomic  # the package's one atomic writer (no torch)

    write_atomic(Path(path), text)


def write_metrics(run_dir: Path, metrics: dict) -> None:
    """Write metrics.json last: from this moment the run is complete."""
    metrics = {"schema": METRICS_SCHEMA, **metrics}
    if (Path(run_dir) / SCORES).is_file():  # a scores.parquet damaged later is not read as this run's
        metrics["scores_sha256"] = _sha256(Path(run_dir) / SCORES)
    missing = [k for k in METRICS_KEYS if k not in metrics]
    if missing:
        raise ValueError(f"metrics.json lacks {missing}")  # a bug in the writer, not a user error
    write_text_atomic(Path(run_dir) / METRICS, json.dumps(metrics, indent=2, default=float) + "\n")


def read_metrics(run_dir: Path) -> dict | None:
    """The run's metrics, or None when it has none that a complete run would have written."""
    try:
        metrics = json.loads((Path(run_dir) / METRICS).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(metrics, dict) or any(k not in metrics for k in METRICS_KEYS if k != "schema"):
        return None
    return metrics


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
    from cscore.scorers.files import sha256_file  # no torch

    try:
        return sha256_file(path)
    except OSError:
        return None


def read_failure(run_dir: Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / FAILED).read_text())
    except (OSError, ValueError, RecursionError):
        return None


def score_columns(columns) -> list[str]:
    return [c for c in columns if c.startswith(SCORE)]


def human_columns(columns) -> list[str]:
    return [c for c in columns if c.startswith(HUMAN)]
