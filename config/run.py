"""The run's config schema: one dataclass per section, each setting with its default, what it may be and its
meaning; and ``RunConfig``, the composed config as typed objects that the stages and the kinds read."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cscore.config.groups import TEXT, Data, JudgePrompt, Prompt, Tracking
from cscore.errors import ConfigError
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.runtime_defaults import MAX_LENGTH, TEMPERATURES, TOKEN_BUDGET
from cscore.scorers.methods.base import MethodParams
from cscore.scorers.methods.params import Param, setting

DTYPES = ("auto", "float32", "fp32", "float64", "bfloat16", "bf16", "float16", "fp16")
DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
BASELINE_ROWS = ("expert", "amateur", "ensemble")


@dataclass(frozen=True)
class Rule:
    """A setting checked by a function of its value (which raises the one-line ConfigError)."""
    text: str
    rule: Callable[[Any], Any]

    def describe(self) -> str:
        return self.text

    def check(self, key: str, value):
        self.rule(value)
        return value


def check_device(value) -> str:
    if not isinstance(value, str) or not DEVICE_RE.match(value):
        raise ConfigError(f"runtime.device must be auto | cpu | cuda | cuda:N | mps, got {value!r}")
    if value.startswith(("cuda", "mps")):
        import torch

        if value.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"runtime.device={value} but torch sees no CUDA device here "
                              f"(torch {torch.__version__}); use runtime.device=auto or cpu")
        if value.startswith("cuda:") and int(value[5:]) >= torch.cuda.device_count():
            raise ConfigError(f"runtime.device={value} but torch sees {torch.cuda.device_count()} CUDA device(s)")
        if value == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ConfigError("runtime.device=mps but torch has no MPS backend here; use runtime.device=auto or cpu")
    return value


def check_budget(value) -> None:
    if value != "auto" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ConfigError(f"runtime.token_budget must be an integer >= 1 or auto, got {value!r}")


def check_progress(value) -> None:
    if not (isinstance(value, bool) or (isinstance(value, (int, float)) and value > 0)):
        raise ConfigError(f"runtime.progress must be true | false | seconds > 0 between progress lines off a "
                          f"terminal, got {value!r}")


def check_threads(value) -> None:
    if value not in (None, "auto") and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        raise ConfigError(f"runtime.threads must be an integer >= 1, auto or null, got {value!r}")


def check_devices(value) -> None:
    """runtime.devices: null, all (every CUDA device) or a list of devices, one shard each."""
    if value is None or value == "all":
        return
    if not isinstance(value, list) or not value:
        raise ConfigError(f"runtime.devices must be null, all or a non-empty list of devices such as [cuda:0,cuda:1] "
                          f"or [cpu,cpu], got {value!r}")
    for d in value:
        if d == "auto":
            raise ConfigError("runtime.devices lists each worker's device: cpu, cuda, cuda:N or mps, not auto")
        check_device(d)


def check_temperatures(values) -> None:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"stats.temperatures must be a non-empty list of numbers > 0, got {values!r}")
    for t in values:
        Param(float, lo=0.0, lo_open=True).check("stats.temperatures[]", t)


def check_rows(rows) -> None:
    if not isinstance(rows, list) or any(r not in BASELINE_ROWS for r in rows):
        raise ConfigError(f"baselines.rows must be a list of {', '.join(BASELINE_ROWS)}, got {rows!r}")


def check_early_exit(value) -> None:
    if value is not None and value != "auto":
        Param(int, lo=1).check("pair.amateur.early_exit", value)


@dataclass
class Runtime:
    device: str = setting("auto", Rule("auto | cpu | cuda | cuda:N | mps", check_device),
                          "auto = cuda, else mps, else cpu")
    dtype: str = setting("auto", Param(str, choices=DTYPES),
                         "auto = bfloat16 on CUDA, float32 elsewhere; or float32 | bfloat16 | float16 | float64")
    token_budget: int | str = setting(TOKEN_BUDGET, Rule("an integer >= 1 or auto", check_budget),
                                      "padded tokens per batch (batch size x longest item); auto = the largest that "
                                      "fits, halved on out-of-memory")
    max_length: int = setting(MAX_LENGTH, Param(int, lo=2),
                              "prompt + hypothesis tokens; the source is cut to fit, never the hypothesis")
    padding_side: str = setting("right", Param(str, choices=("left", "right")),
                                "left or right: scores are the same either way")
    prefix_sharing: bool = setting(True, Param(bool), "items with the same prompt run it once (packed rows); "
                                   "scores are the same either way")
    threads: int | str | None = setting("auto", Rule("an integer >= 1, auto or null", check_threads),
                                        "CPU threads of torch: auto = the cores this process may use that the machine "
                                        "has free (1 on 2 cores), null = torch's default, or an integer")
    progress: bool | float = setting(True, Rule("true | false | seconds > 0", check_progress),
                                     "a live bar on a terminal; elsewhere a line every 10 s (progress=N: every N s); "
                                     "false: none")
    shards: int = setting(1, Param(int, lo=1), "a statistics pass's batches dealt to this many shards that meet in "
                          "the statistics cache (a SLURM job array, runtime.devices' workers); scores are the same "
                          "either way (docs/scaling.md)")
    shard: int | None = setting(None, Param(int, lo=0, nullable=True), "the one shard this process computes "
                                "(0 .. runtime.shards-1; a job array's task); null: every shard not done yet; the "
                                "last shard to finish merges")
    devices: list | str | None = setting(None, Rule("null, all or a list of devices", check_devices),
                                         "one shard per device (runtime.shards = their number): this process "
                                         "computes shard 0 on the first, one worker process each of the others, "
                                         "then this process merges: [cuda:0,cuda:1], all (every CUDA device) or "
                                         "[cpu,cpu]")
    share_grid: bool = setting(True, Param(bool), "in a multirun on Hydra's basic launcher, a decoding judge job "
                               "(cd_judge greedy, cd_judge_released) also decodes the points that differ from it "
                               "only in lam / t (one tree; the cache keeps them for their jobs); scores are the "
                               "same either way")

    @property
    def split(self) -> bool:
        """Whether the passes are split over processes (runtime.shards > 1, or runtime.devices)."""
        return self.shards > 1


@dataclass
class Stats:
    temperatures: list = setting(list(TEMPERATURES), Rule("a non-empty list of numbers > 0", check_temperatures),
                                 "temperatures computed in the one forward pass per model; methods may use any of "
                                 "them without a re-run; temperatures a method asks for are added automatically")


@dataclass
class Cache:
    enabled: bool = setting(True, Param(bool), "read / store per-token statistics in the content-addressed cache")
    dir: str | None = setting(None, doc="default $CSCORE_STATS_CACHE, else $CSCORE_CACHE/stats, else "
                                        "~/.cache/cscore/stats")
    checkpoint_seconds: float | None = setting(10, Param(float, lo=0.0, nullable=True),
                                               "a pass keeps its completed batches this often: a killed pass "
                                               "resumes; null: off")


@dataclass
class Baselines:
    t: float = setting(1.0, Param(float, lo=0.0, lo_open=True), "temperature of the comparison rows")
    rows: list = setting(list(BASELINE_ROWS), Rule(f"a list of {', '.join(BASELINE_ROWS)}", check_rows),
                         "comparison rows computed from the same statistics")


@dataclass
class Split:
    use: str = setting("all", Param(str, choices=("all", "dev", "test")),
                       "all | dev | test: a deterministic split by group (document / source segment)")
    dev_fraction: float = setting(0.1, Param(float, lo=0.0, hi=1.0, lo_open=True),
                                  "share of groups in dev (the CD-judge paper: 10 % of documents)")
    seed: int = setting(0, Param(int), "seed of the split")
    dev_ids: str | None = setting(None, doc="a file of group ids (one per line) that form dev; the rest is test")


@dataclass
class Meta:
    split_by: str | None = setting(None, doc="e.g. lang_pair: correlations per value of this column")


@dataclass
class RunSettings:
    """The settings of every run (``schema/run``); the groups (data, pair, method, ...) come from presets."""
    runtime: Runtime = setting(Runtime(), doc="how the models run")
    stats: Stats = setting(Stats(), doc="the per-token statistics")
    cache: Cache = setting(Cache(), doc="the statistics cache")
    baselines: Baselines = setting(Baselines(), doc="the comparison rows")
    split: Split = setting(Split(), doc="the dev / test split")
    meta: Meta = setting(Meta(), doc="meta-evaluation")
    resume: bool = setting(True, doc="skip a run whose directory already holds its complete outputs (same config)")
    out: str | None = setting(None, doc="cscore data export: the output file (.parquet or .jsonl)")
    tokenizer: str | None = setting(None, doc="cscore data check: tokenizer for length statistics "
                                               "(default: pair.expert.path)")
    model: str | None = setting(None, doc="method=cdm_gen: the trained discriminator directory "
                                          "(written by cscore cdm train)")


@dataclass
class ModelSpec:
    path: str | None = setting(None, TEXT, "hub id, local directory or gguf: spec; amateur null: an "
                                                    "early exit of the expert")
    revision: str | None = setting(None, TEXT, "hub revision (branch, tag or commit)")
    early_exit: int | str | None = setting(None, Rule("an integer >= 1, auto or null", check_early_exit),
                                           "amateur only: int k, or auto = a third of the expert's layers; "
                                           "decoder-only models")


@dataclass
class Pair:
    """``pair=<preset>`` (conf/pair/): the expert and the amateur."""
    name: str = setting("", doc="the preset's name")
    expert: ModelSpec = setting(ModelSpec(), doc="the expert model")
    amateur: ModelSpec = setting(ModelSpec(), doc="the amateur model")


@dataclass
class RunConfig(RunSettings):
    """A composed ``cscore run`` config as typed objects (``cscore.run.typed.typed`` builds it once)."""
    data: Data = field(default_factory=Data)
    pair: Pair = field(default_factory=Pair)
    method: MethodParams = None  # type: ignore[assignment]  # the method's Params: checked, every default in
    prompt: Prompt = field(default_factory=Prompt)
    judge_prompt: JudgePrompt | None = None  # composed for the judge methods only
    baseline: dict | None = None  # {baseline name: its settings} (checked by cscore.scorers.baselines)
    tracking: Tracking = field(default_factory=Tracking)
    method_plan: Any = None  # the method planned once where the config is typed (``run.variants.MethodPlan``)
    # how the forward passes go: built once from ``runtime`` (``typed``), handed to every pass
    passes: PassOptions = field(default_factory=PassOptions)
    # the other jobs of this multirun (Hydra's basic launcher), each as its overrides that differ from this one's
    sweep_others: tuple = ()
