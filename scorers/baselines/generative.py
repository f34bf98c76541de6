"""Generative baselines: BARTScore (Yuan et al. 2021) and T5Score (Qin et al., seed 004, Eq. 1),
the per-token mean log-probability (1/|b|) log p(b | a) of a text b given a text a, teacher-forced
through cscore's statistics engine (``scorers/engine/seq2seq.py``). Directions and columns, for
``<name>`` = bartscore / t5score (F: the arithmetic mean of both ways, per reference first):

  src_hyp  source -> hypothesis     score.<name>
  hyp_src  hypothesis -> source     score.<name>_src_r  (both: score.<name>_src_f)
  ref_hyp  reference -> hypothesis  score.<name>_p
  hyp_ref  hypothesis -> reference  score.<name>_r      (both: score.<name>_f)"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from cscore.errors import ConfigError
from cscore.scorers.baselines.common import (
    BASELINES,
    REFERENCE_MODES,
    Baseline,
    BaselineRun,
    Choices,
    Result,
    Texts,
    pick_references,
    require_references,
)
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.methods.params import Param, required

NAMES = ("bartscore", "t5score")
DIRECTIONS = ("src_hyp", "hyp_src", "ref_hyp", "hyp_ref")
ONE_WAY = {"src_hyp": "", "hyp_src": "_src_r", "ref_hyp": "_p", "hyp_ref": "_r"}
BOTH_WAYS = {"_src_f": ("src_hyp", "hyp_src"), "_f": ("ref_hyp", "hyp_ref")}


@dataclass
class GenerativeParams:
    model: str | None = required(Param(str, nullable=True))
    revision: str | None = required(Param(str, nullable=True))
    directions: list = required(Choices(DIRECTIONS))
    references: str = required(Param(str, choices=REFERENCE_MODES))
    multi_ref: str = required(Param(str, choices=("mean", "max")))


def columns(name: str, directions) -> dict[str, tuple[str, ...]]:
    """score.<column> -> the directions it averages, for ``directions`` (each one way, and both ways
    where both are there), in column order."""
    have = set(directions)
    out: dict[str, tuple[str, ...]] = {}
    for pair_suffix, (a, b) in BOTH_WAYS.items():
        out.update({name + ONE_WAY[d]: (d,) for d in (a, b) if d in have})
        if {a, b} <= have:
            out[name + pair_suffix] = (a, b)
    return out


def direction_items(direction: str, texts: Texts, refs: list[list[str]]) -> list[tuple[int, str, str]]:
    """(row, encoder text, target text) for every pair scored in ``direction``."""
    if direction in ("src_hyp", "hyp_src"):
        pairs = [(i, s, h) for i, (s, h) in enumerate(zip(texts.sources, texts.hypotheses))]
    else:
        pairs = [(i, r, h) for i, h in enumerate(texts.hypotheses) for r in refs[i]]
    return [(i, b, a) if direction.startswith("hyp_") else (i, a, b) for i, a, b in pairs]


def mean_logp(pair, items, run: BaselineRun, label: str):
    """(1/|b|) log p(b | a) per item, the pass's report and which encoder inputs were cut."""
    from cscore.scorers.api import PassRequest

    srcs, tgts = [a for _, a, _ in items], [b for _, _, b in items]
    for row, a, b in items:
        if not a.strip() or not b.strip():
            raise InputError(f"{label}: row {row} has an empty {'encoder input' if not a.strip() else 'target'}")
    try:
        inputs = pair.encode(srcs, tgts, max_length=run.options.max_length,
                             source_spans=[(0, len(a)) for a in srcs])
    except InputError as err:  # "item k: ..." names the k-th pair of this direction: say which row it is
        found = re.match(r"item (\d+):", str(err))
        row = f" (row {items[int(found.group(1))][0]})" if found else ""
        raise InputError(f"{label}: {err}{row}") from None
    # the run's token budget; the other pass options their defaults (a baseline's cache keys as they were)
    options = PassOptions(token_budget=run.options.token_budget)
    stats = pair.statistics(inputs=inputs, request=PassRequest([1.0], ["expert"], options, run.cache,
                                                               progress=run.progress))
    values = stats.score("single", model="expert", t=1.0, norm="mean", skip_first=False, clamp=None)
    return values, stats.reports["expert"], np.array([it.truncated for it in inputs.items])


def by_row(rows: np.ndarray, values: np.ndarray, n: int, agg: str) -> np.ndarray:
    """One value per row: the item's value, or ``agg`` over the row's items; NaN for a row without any."""
    import pandas as pd

    grouped = pd.Series(values).groupby(rows).agg(agg)
    out = np.full(n, np.nan)
    out[grouped.index.to_numpy()] = grouped.to_numpy()
    return out


class Generative(Baseline):
    """BARTScore / T5Score: an encoder-decoder model's mean log-likelihood in the chosen directions."""
    rank = 3
    Params = GenerativeParams

    @classmethod
    def check(cls, params: GenerativeParams) -> None:
        if not params.model:
            raise ConfigError(f"baseline.{cls.name}.model: give the encoder-decoder model to score with (a hub id "
                              "or a local directory; docs/methods/baselines.md lists the papers' checkpoints)")

    @classmethod
    def columns(cls, params: GenerativeParams) -> list[str]:
        return list(columns(cls.name, params.directions))

    @classmethod
    def score(cls, params: GenerativeParams, texts: Texts, run: BaselineRun) -> Result:
        from cscore.scorers.api import ModelPair

        name = cls.name
        directions = list(params.directions)
        refs = pick_references(texts, params.references)
        missing = require_references(name, refs) if {"ref_hyp", "hyp_ref"} & set(directions) else []
        options = run.options
        assert params.model is not None  # check() refuses a run without one
        pair = ModelPair.load(params.model, device=options.device, dtype=options.dtype, revision=params.revision)
        if not pair.expert.is_encoder_decoder:
            raise ConfigError(f"baseline: {params.model!r} is a decoder-only model; BARTScore and T5Score score "
                              "with an encoder-decoder (seq2seq) model such as facebook/bart-large-cnn or an mT5")
        run.started()
        agg = params.multi_ref  # mean | max over a row's references
        n = len(texts)
        per_dir, reports, truncated = {}, {}, np.zeros(n, dtype=bool)
        for d in directions:
            items = direction_items(d, texts, refs)
            values, report, cut = mean_logp(pair, items, run, f"baseline {name} ({d})")
            reports[f"{name}:{d}"] = report
            rows = np.array([i for i, _, _ in items], dtype=np.int64)
            truncated[rows[cut]] = True
            per_dir[d] = (rows, values)
        out = {}
        for column, (a, *b) in columns(name, directions).items():
            rows, values = per_dir[a]  # F per reference: both ways' rows and items align (same pairs, same order)
            out[column] = by_row(rows, (values + per_dir[b[0]][1]) / 2.0 if b else values, n, agg)
        info = {"model": pair.expert.name, "directions": directions, "multi_ref": params.multi_ref,
                "references": params.references, "missing_reference": missing,
                "truncated_sources": int(truncated.sum()),
                "signature": f"{name}|model:{pair.expert.name}|dirs:{','.join(directions)}|refs:{params.references}|"
                             f"multi:{params.multi_ref}|norm:mean|eos:yes"}
        return Result(out, info, reports, {name: pair.expert}, truncated)


@BASELINES
class BartScore(Generative):
    name = "bartscore"


@BASELINES
class T5Score(Generative):
    name = "t5score"
