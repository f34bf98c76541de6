"""The prompts a kind renders: the scoring prompt (``data.prompts``) with the model's chat template,
the judge prompt group of a judge method, and a judge prompt cut to fit."""

from __future__ import annotations

import logging

import pandas as pd

from cscore.config.groups import JudgePrompt
from cscore.config.run import RunConfig
from cscore.errors import ConfigError

log = logging.getLogger(__name__)


def make_prompts(run: RunConfig, examples: pd.DataFrame, tokenizer,
                 role: str = "expert") -> tuple[list[str], list[tuple[int, int]]]:
    from cscore.data import prompts

    p = run.prompt
    chat = None
    if p.chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(f"prompt.chat_template=true but the {role}'s tokenizer has no chat template")

        def chat(text):
            return tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True)
    return prompts.build(examples, condition=p.condition, templates=p.templates,
                         reference_templates=p.reference_templates, template=run.data.template, chat=chat)


def judge_prompt(run: RunConfig) -> JudgePrompt:
    """The judge_prompt group a judge method composes (a ConfigError when a config has none)."""
    if run.judge_prompt is None:
        raise ConfigError(f"method={run.method.name} needs the judge_prompt group (judge_prompt=geval | released)")
    return run.judge_prompt


def fit_judge_prompt(tok, i: int, text: str, span, room: int) -> tuple[str, list[int], bool]:
    """(text, token ids, whether it was cut): the source cut at a word boundary to fit ``room`` tokens (an InputError
    where even no source is short enough)."""
    from cscore.scorers.engine.tokenize import InputError, fit_source, text_ids

    ids = text_ids(tok, text)
    if len(ids) <= room:
        return text, ids, False
    fitted = fit_source(tok, text, span, room)
    if fitted is None:
        raise InputError(f"item {i}: the judge prompt without its source still has more than {room} tokens; "
                         "raise runtime.max_length")
    return fitted[0], fitted[1], True


def say_truncated(n_truncated: int, n: int, max_length: int, what: str = "items") -> None:
    if n_truncated:
        log.warning("%d of %d %s had their source truncated to fit runtime.max_length=%d", n_truncated, n, what,
                    max_length)
