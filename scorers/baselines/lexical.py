"""Lexical baselines: sentence BLEU and chrF through sacrebleu, ROUGE through rouge-score, each
library handling several references its own way (``multi: mean`` for ROUGE: the mean instead);
``against: source`` compares with the row's source instead (docs/methods/baselines.md)."""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass
from typing import Any

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
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.methods.params import Param, required

ROUGE_TYPE = re.compile(r"^rouge[1-9]$")
REFS = Param(str, choices=REFERENCE_MODES)
AGAINST = Param(str, choices=("reference", "source"))


@dataclass
class BleuParams:
    tokenize: str | None = required(Param(str, nullable=True))
    lowercase: bool = required(Param(bool))
    smooth_method: str = required(Param(str, choices=("none", "floor", "add-k", "exp")))
    smooth_value: float | None = required(Param(float, lo=0.0, nullable=True))
    max_ngram_order: int = required(Param(int, lo=1))
    effective_order: bool = required(Param(bool))
    references: str = required(REFS)
    against: str = required(AGAINST)


@dataclass
class ChrfParams:
    char_order: int = required(Param(int, lo=0))
    word_order: int = required(Param(int, lo=0))
    beta: int = required(Param(int, lo=0))
    lowercase: bool = required(Param(bool))
    whitespace: bool = required(Param(bool))
    eps_smoothing: bool = required(Param(bool))
    references: str = required(REFS)
    against: str = required(AGAINST)


@dataclass
class RougeParams:
    types: list = required(Choices(("rouge1", "rouge2", "rougeL", "rougeLsum"), ROUGE_TYPE))
    measure: str = required(Param(str, choices=("fmeasure", "precision", "recall")))
    use_stemmer: bool = required(Param(bool))
    split_summaries: bool = required(Param(bool))
    references: str = required(REFS)
    multi: str = required(Param(str, choices=("best", "mean")))
    against: str = required(AGAINST)


def _sacrebleu_metric(name: str, params: Any, lang: str | None):
    from sacrebleu.metrics import BLEU, CHRF

    given = {k: v for k, v in asdict(params).items() if k not in ("references", "against")}  # sacrebleu's own names
    try:
        return BLEU(**given, trg_lang=lang or "") if name == "bleu" else CHRF(**given)
    except Exception as err:  # an unknown tokenizer, a missing MeCab for ja / ko, ...
        raise ConfigError(f"baseline {name}: sacrebleu refused the settings"
                          f"{f' for target language {lang}' if lang else ''}: {str(err).splitlines()[0]}") from None


def _sacrebleu(name: str, params: Any, texts: Texts, refs, missing) -> Result:
    values = np.full(len(texts), np.nan)
    signatures, counts = {}, {}
    langs = [lang if name == "bleu" else None for lang in texts.target_langs]  # BLEU's tokenizer follows the language
    for lang in dict.fromkeys(langs):
        metric = _sacrebleu_metric(name, params, lang)
        rows = [i for i, g in enumerate(langs) if g == lang and refs[i]]
        for i in rows:
            values[i] = metric.sentence_score(texts.hypotheses[i], refs[i]).score
        if rows:
            n = sorted({len(refs[i]) for i in rows})
            # the signature names one reference count; rows here may differ: say which counts were used
            sig = str(metric.get_signature()).split("|")
            sig = [f"nrefs:{n[0] if len(n) == 1 else f'{n[0]}-{n[-1]}'}" if f.startswith("nrefs:") else f for f in sig]
            signatures[lang or "all"] = "|".join(sig)
            counts[lang or "all"] = len(rows)
    if params.against == "source":
        signatures = {k: f"{v}|against:source" for k, v in signatures.items()}
    info = {"signature": signatures if len(signatures) > 1 else next(iter(signatures.values())),
            "library": "sacrebleu", "missing_reference": missing, "rows_per_language": counts}
    return Result({name: values}, info)


def import_rouge():
    """rouge-score, its absl first imported with the interpreter's own stderr in place (absl's handler keeps
    that stream and closes it when Hydra configures logging anew, unless it is the interpreter's own)."""
    if "absl.logging" not in sys.modules and sys.__stderr__ is not None:
        saved, sys.stderr = sys.stderr, sys.__stderr__
        try:
            import absl.logging  # noqa: F401
        finally:
            sys.stderr = saved
    from rouge_score import rouge_scorer, tokenizers

    return rouge_scorer, tokenizers


def _rouge(params: Any, texts: Texts, refs, missing) -> Result:
    from importlib.metadata import version

    rouge_scorer, tokenizers = import_rouge()

    tokenizer = tokenizers.DefaultTokenizer(use_stemmer=params.use_stemmer)
    try:  # the default tokenizer given explicitly: left out, rouge-score logs through absl, which can
        # give the root logger a handler of its own (a console line twice, or a stale stream)
        scorer = rouge_scorer.RougeScorer(list(params.types), use_stemmer=params.use_stemmer,
                                          split_summaries=params.split_summaries, tokenizer=tokenizer)
    except Exception as err:
        raise ConfigError(f"baseline rouge: rouge-score refused the settings: {str(err).splitlines()[0]}") from None
    out = {t: np.full(len(texts), np.nan) for t in params.types}
    untokenized = []  # rouge-score keeps only a-z and 0-9: a Chinese or Russian text has no tokens
    for i, hyp in enumerate(texts.hypotheses):
        if not refs[i]:
            continue
        if not tokenizer.tokenize(hyp) or not any(tokenizer.tokenize(r) for r in refs[i]):
            untokenized.append(i)
            continue
        try:
            if params.multi == "mean":
                each = [scorer.score(r, hyp) for r in refs[i]]
                for t in params.types:
                    out[t][i] = np.mean([getattr(e[t], params.measure) for e in each])
                continue
            got = scorer.score_multi(refs[i], hyp)
        except LookupError as err:  # rougeLsum with split_summaries needs nltk's punkt data
            raise InputError(f"baseline rouge: {str(err).strip().splitlines()[0]}") from None
        for t in params.types:
            out[t][i] = getattr(got[t], params.measure)
    stem = "stem:yes" if params.use_stemmer else "stem:no"
    multi = "best-f" if params.multi == "best" else "mean"
    against = "|against:source" if params.against == "source" else ""
    sig = f"rouge-score|types:{','.join(params.types)}|measure:{params.measure}|{stem}|" \
          f"multi:{multi}{against}|version:{version('rouge-score')}"
    return Result(out, {"signature": sig, "library": "rouge-score", "missing_reference": missing,
                        "untokenized": untokenized})


class Lexical(Baseline):
    """BLEU / chrF / ROUGE: one score of the hypothesis against its references (or its source)."""
    rank = 1

    @classmethod
    def score(cls, params: Any, texts: Texts, run: BaselineRun) -> Result:
        """Sentence BLEU / chrF (sacrebleu) or ROUGE (rouge-score) of every row with a reference."""
        if params.against == "source":
            refs = [[src] if isinstance(src, str) and src.strip() else [] for src in texts.sources]
        else:
            refs = pick_references(texts, params.references)
        missing = require_references(cls.name, refs)
        run.started()
        if cls.name == "rouge":
            return _rouge(params, texts, refs, missing)
        return _sacrebleu(cls.name, params, texts, refs, missing)


@BASELINES
class Bleu(Lexical):
    name = "bleu"
    Params = BleuParams


@BASELINES
class Chrf(Lexical):
    name = "chrf"
    Params = ChrfParams


@BASELINES
class Rouge(Lexical):
    name = "rouge"
    Params = RougeParams

    @classmethod
    def columns(cls, params: RougeParams) -> list[str]:
        return list(params.types)
