"""The statistic of the report's quality tables and its uncertainty, as ``cscore report``'s options give it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cscore.errors import ConfigError
from cscore.metaeval.accuracy import PROTOCOLS
from cscore.metaeval.correlation import CORRELATIONS
from cscore.metaeval.kendall import VARIANTS, normalize_variant
from cscore.metaeval.levels import LEVELS

# bootstrap units: groups = documents / source segments (all their rows come along), items = rows
RESAMPLE = {"groups": "group", "items": None}
KENDALL_LIKE_THRESHOLD = 25.0  # mt-metrics-eval's KendallLike default: WMT DA points on a 0-100 scale
AVERAGES = ("macro", "micro")  # over the groups of level item / system_grouped (levels.correlate_at)
TIES = ("calibrated", "exact")  # Kendall 23 / acc23: metric-tie epsilon searched (WMT23) or 0


@dataclass
class Spec:
    """The statistic of the quality tables and its uncertainty, checked when made (a ``ConfigError``)."""

    level: str = "segment"
    kind: str = "pearson"
    variant: str | None = None  # Kendall variant: b (default), c, 23, acc23, like
    bootstrap: int = 1000
    permutations: int = 1000
    seed: int = 0
    alpha: float = 0.05
    threshold: float | None = None  # Kendall-like only: count pairs whose human scores differ by >= this (25)
    resample: str = "groups"  # bootstrap unit: groups (documents / source segments) or items (rows)
    accuracy: str = "summac"  # quantized accuracy protocol (metaeval.accuracy.PROTOCOLS)
    average: str = "macro"  # over the groups of level item / system_grouped: macro, or micro (weighted)
    ties: str | None = None  # Kendall 23 / acc23: calibrated or exact; None: calibrated for acc23, exact for 23

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ConfigError(f"unknown level {self.level!r}; use one of {', '.join(LEVELS)}")
        if self.kind not in CORRELATIONS:
            raise ConfigError(f"unknown correlation {self.kind!r}; use one of {', '.join(CORRELATIONS)}")
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
            if not self.like:
                raise ConfigError("--kendall-threshold applies to --kendall like only")
            if not (_is_number(self.threshold) and math.isfinite(self.threshold) and self.threshold > 0):
                raise ConfigError(f"--kendall-threshold must be a number > 0 (a difference of human scores), "
                                  f"got {self.threshold!r}")
        for name, value, what in (("bootstrap", self.bootstrap, "0: no confidence intervals"),
                                  ("permutations", self.permutations, "0: no significance clusters"),
                                  ("seed", self.seed, "a random seed")):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"--{name} must be a whole number >= 0 ({what}), got {value!r}")
        for name, given, choices in (("resample", self.resample, RESAMPLE), ("accuracy", self.accuracy, PROTOCOLS),
                                     ("average", self.average, AVERAGES)):
            _check_choice(name, given, choices)
        if self.average == "micro" and self.level not in ("item", "system_grouped"):
            raise ConfigError(f"--average micro applies to --level item or system_grouped (the levels that average "
                              f"over groups), not --level {self.level}")
        if self.ties is not None:
            _check_choice("ties", self.ties, TIES)
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


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ConfigError(f"--{name} must be one of {', '.join(choices)}, got {value!r}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


# --paper X: the statistic that paper's tables report (an option given on the command line wins)
PAPERS: dict[str, dict[str, Any]] = {
    "contrastscore": {"correlation": "pearson", "level": "segment", "combined": True, "spa": True,
                      "says": "ContrastScore Tables 1-2: Pearson over all rows per aspect / language pair; "
                              "all_<task>_quality: every dataset's columns and their mean (Tables 1-2's AVG); "
                              "translation data: also WMT24's system-level soft pairwise accuracy (not in the paper)"},
    "cdm": {"correlation": "spearman", "level": "segment",
            "says": "CDM Tables 2 and 7: Spearman over all rows; Table 5: quantized accuracy (SummaC protocol)"},
    "cdjudge": {"correlation": "spearman", "level": "segment", "resample": "items",
                "says": "CD-judge Tables 1-2: Pearson, Spearman and Kendall per score range, (lambda, t) chosen "
                        "on dev by --select-by (Spearman unless given), 95% intervals from a bootstrap over "
                        "summaries"},
    "t5score": {"kendall": "like", "level": "item", "average": "micro", "spa": True,
                "says": "T5Score segment level (seg-k): WMT20 DARR Kendall-like over pairs of translations of one "
                        "source whose human scores differ by >= the threshold, pooled over segments "
                        "(mt-metrics-eval KendallLike, average_by='item'); translation data: also WMT24's "
                        "system-level soft pairwise accuracy (not in the paper)"},
}
