"""Check the whole composed run config before anything expensive (data, models) runs.

Each setting says what it may be; the first bad one is a ConfigError naming the key, what was
given and what is allowed. Method parameters are checked by ``cscore.scorers.methods``."""

from __future__ import annotations

import re

from omegaconf import DictConfig, OmegaConf

from cscore.errors import ConfigError
from cscore.scorers.methods.params import Param, suggest

DTYPES = ("auto", "float32", "fp32", "float64", "bfloat16", "bf16", "float16", "fp16")
DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
BASELINE_ROWS = ("expert", "amateur", "ensemble")

SECTIONS = {
    "runtime": {
        "dtype": Param(str, choices=DTYPES),
        "max_length": Param(int, lo=2),
        "padding_side": Param(str, choices=("left", "right")),
        "prefix_sharing": Param(bool),
    },
    "cache": {"enabled": Param(bool), "checkpoint_seconds": Param(float, lo=0.0, nullable=True)},
    "baselines": {"t": Param(float, lo=0.0, lo_open=True)},
    "split": {
        "use": Param(str, choices=("all", "dev", "test")),
        "dev_fraction": Param(float, lo=0.0, hi=1.0, lo_open=True),
        "seed": Param(int),
    },
    "prompt": {"condition": Param(str, choices=("source", "reference")), "chat_template": Param(bool)},
}
OTHER_KEYS = {"runtime": {"device", "token_budget", "progress", "threads"}, "cache": {"dir"},
              "baselines": {"rows"},
              "meta": {"split_by"},
              "stats": {"temperatures"}, "split": {"dev_ids"},
              "judge_prompt": {"name", "style", "role", "generation_prompt", "templates", "files", "closing",
                               "dialogue_template", "dialogue_aspects"},
              "prompt": {"name", "templates", "reference_templates"}}


def check_keys(section: str, given: dict, known: set[str]) -> None:
    for key in given:
        if key not in known:
            raise ConfigError(f"unknown setting {section}.{key}{suggest(key, known)}; "
                              f"{section} has {', '.join(sorted(known))}")


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


def check_early_exit(value):
    if value is None or value == "auto":
        return value
    return Param(int, lo=1).check("pair.amateur.early_exit", value)


def check_pair(pair: dict) -> None:
    for role in ("expert", "amateur"):
        spec = (pair.get(role) or {}).get("path")
        if role == "expert" and not (isinstance(spec, str) and spec.strip()):
            raise ConfigError(f"pair.expert.path must name a model (hub id, local dir or gguf: spec), got {spec!r}")
        if role == "amateur" and spec is not None and not (isinstance(spec, str) and spec.strip()):
            raise ConfigError(f"pair.amateur.path must name a model or be null, got {spec!r}")
    check_early_exit((pair.get("amateur") or {}).get("early_exit"))


def check_budget(value) -> None:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise ConfigError(f"runtime.token_budget must be an integer >= 1 or auto, got {value!r}")


def check_progress(value) -> None:
    if isinstance(value, bool) or (isinstance(value, (int, float)) and value > 0):
        return
    raise ConfigError(f"runtime.progress must be true | false | seconds > 0 between progress lines off a "
                      f"terminal, got {value!r}")


def check_threads(value) -> None:
    if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise ConfigError(f"runtime.threads must be an integer >= 1, auto or null, got {value!r}")


def check_temperatures(values) -> None:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"stats.temperatures must be a non-empty list of numbers > 0, got {values!r}")
    for t in values:
        Param(float, lo=0.0, lo_open=True).check("stats.temperatures[]", t)


def check_rows(rows) -> None:
    if not isinstance(rows, list) or any(r not in BASELINE_ROWS for r in rows):
        raise ConfigError(f"baselines.rows must be a list of {', '.join(BASELINE_ROWS)}, got {rows!r}")


def check_amateur(c: dict) -> None:
    """A method that reads the amateur needs one: a model path or an early exit of the expert."""
    from cscore.scorers.variants import models_needed, plan

    method = dict(c["method"])
    variants = plan(method, baseline_t=c["baselines"]["t"], rows=list(c["baselines"]["rows"]))
    ama = c["pair"].get("amateur") or {}
    if "amateur" in models_needed(variants) and ama.get("path") is None and ama.get("early_exit") is None:
        raise ConfigError(f"method {method['name']} needs an amateur: set pair.amateur.path or "
                          "pair.amateur.early_exit (an early exit of the expert)")


def check_method(method: dict) -> None:
    from cscore.scorers import methods

    params = {k: v for k, v in method.items() if k not in ("name", "variant")}
    methods.check_params(method.get("name"), params)
    variant = method.get("variant")
    if variant is not None and not (isinstance(variant, str) and re.match(r"^[\w.\-]+$", variant)):
        raise ConfigError(f"method.variant must be a plain name (letters, digits, _ . -), got {variant!r}")


def check_baseline(c: dict) -> None:
    """method=baseline and the ``baseline`` group go together; each baseline's settings are checked."""
    from cscore.scorers.baselines import check_config

    check_config(c["method"].get("name"), c.get("baseline"))


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first setting that is not allowed."""
    try:
        c = OmegaConf.to_container(cfg, resolve=True)
    except Exception as err:  # an interpolation that does not resolve
        raise ConfigError(f"the config does not resolve: {err}") from None
    for section in set(SECTIONS) | set(OTHER_KEYS):
        given = c.get(section) or {}
        specs = SECTIONS.get(section, {})
        check_keys(section, given, set(specs) | OTHER_KEYS.get(section, set()))
        for key, spec in specs.items():
            if key in given:
                spec.check(f"{section}.{key}", given[key])
    check_device(c["runtime"].get("device", "auto"))
    check_budget(c["runtime"].get("token_budget", 4096))
    check_progress(c["runtime"].get("progress", True))
    check_threads(c["runtime"].get("threads"))
    check_temperatures(c["stats"].get("temperatures"))
    check_rows(c["baselines"].get("rows"))
    check_pair(c["pair"])
    check_method(c["method"])
    check_amateur(c)
    check_baseline(c)
    from cscore.cli.tracking import check_config as check_tracking

    check_tracking(c.get("tracking"))
    check_judge_prompt(c)


def check_judge_prompt(c: dict) -> None:
    """The judge_prompt group goes with the judge methods only (they compose it; others carry none)."""
    from cscore.scorers import methods

    jp = c.get("judge_prompt")
    if not jp:
        return
    name = c["method"].get("name")
    if not getattr(methods.get(name), "KIND", "token").startswith("judge"):
        raise ConfigError(f"judge_prompt={jp.get('name')} is for the judge methods (method=cd_judge | "
                          f"cd_judge_released); this run has method={name}")
    from cscore.data.judge_prompts import check_config

    check_config(jp)
