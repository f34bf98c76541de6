"""cdm_gen: Generative CDM (the CDM paper, Sec. 3.4.1, Algorithm 1): the score of a hypothesis is
what a discriminator trained on positives and their degraded negatives says about it
(``cscore cdm generate`` makes the negatives, ``cscore cdm train`` the discriminator:
``cscore.scorers.cdm.generate``, ``cscore.cli.cdm_cmd``).

``output``: ``probability`` = P(positive | hypothesis), or ``log_odds`` = log P(positive) − log P(negative)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cscore.errors import ConfigError
from cscore.scorers.methods.base import METHODS, Method, MethodParams
from cscore.scorers.methods.params import Param, setting

META_FILE = "cscore_discriminator.json"  # in every directory `cscore cdm train` writes
OUTPUTS = ("probability", "log_odds")


class DiscriminatorDir:
    """The ``discriminator`` parameter: a directory written by ``cscore cdm train``."""

    def describe(self) -> str:
        return "a directory written by `cscore cdm train`"

    def check(self, key: str, value) -> str:
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ConfigError("method=cdm_gen scores with a trained discriminator: give model=<directory written "
                              "by `cscore cdm train`>")
        if not isinstance(value, str):
            raise ConfigError(f"model (the cdm_gen discriminator) must be a directory, got {value!r}")
        path = Path(value).expanduser()
        if not path.is_dir():
            raise ConfigError(f"model={value}: no such directory (the cdm_gen discriminator is a directory "
                              "written by `cscore cdm train`)")
        if not (path / META_FILE).is_file():
            raise ConfigError(f"model={value} is not a trained cdm_gen discriminator: it has no {META_FILE} "
                              "(`cscore cdm train` writes one last, when training has finished)")
        read_meta(path)
        return str(path)


def read_meta(path) -> dict:
    """The discriminator's ``cscore_discriminator.json`` (kind ``pooler`` or ``classifier``)."""
    file = Path(path) / META_FILE
    try:
        meta = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {file}: {err}") from None
    if not isinstance(meta, dict) or meta.get("kind") not in ("pooler", "classifier"):
        raise ConfigError(f"{file}: not a cdm_gen discriminator record (kind must be pooler or classifier)")
    return meta


@dataclass
class CdmGenParams(MethodParams):
    name: str = setting("cdm_gen", doc="the method")
    variant: str = setting("cdm_gen", doc="the score column and label: score.<variant>")
    discriminator: str | None = setting("${oc.select:model,null}", DiscriminatorDir(),
                                        "the trained discriminator directory; set it with model=<dir>")
    output: str = setting("probability", Param(str, choices=OUTPUTS),
                          "probability: P(positive) in [0, 1] | log_odds: log P(positive) - log P(negative)")
    batch_size: int = setting(16, Param(int, lo=1), "items per batch when a transformers classifier scores them")


@METHODS
class CdmGen(Method):
    """Needs the pair's statistics: the comparison rows, and a pooler discriminator's momentum."""
    name = "cdm_gen"
    kind = "discriminator"
    aligned = False  # needs one tokenizer: a cross-family pair is refused
    Params = CdmGenParams
