"""Prompt templates (the ``prompt`` config group); the summarization and translation ones are the
ContrastScore paper's (Table 6; the spaces it typesets after line breaks left out), the others cscore's."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from cscore.data.schema import DataError
from cscore.errors import ConfigError

LANGUAGES = {"en": "English", "de": "German", "ru": "Russian", "zh": "Chinese", "he": "Hebrew", "ja": "Japanese",
             "cs": "Czech", "uk": "Ukrainian", "fr": "French", "es": "Spanish", "pl": "Polish", "is": "Icelandic",
             "ko": "Korean", "hr": "Croatian", "liv": "Livonian", "sah": "Yakut", "fi": "Finnish",
             "et": "Estonian", "tr": "Turkish", "ro": "Romanian", "lv": "Latvian", "lt": "Lithuanian",
             "kk": "Kazakh", "gu": "Gujarati", "km": "Khmer", "ps": "Pashto", "ta": "Tamil", "iu": "Inuktitut",
             "ha": "Hausa", "hi": "Hindi", "ar": "Arabic", "it": "Italian", "pt": "Portuguese", "nl": "Dutch"}

TEMPLATES = {
    "summarization": "Write an accurate, relevant, and coherent summary of the following texts:\n{source}\nSummary:\n",
    "translation": "Translate the following sentence to {target_language}:\n{source}\n",
    "dialogue": "Continue the following conversation with the next response.\n{source}\nResponse:\n",
}
REFERENCE_TEMPLATES = {
    "summarization": "Paraphrase the following summary:\n{source}\nParaphrase:\n",
    "translation": "Paraphrase the following {target_language} sentence:\n{source}\n",
    "dialogue": "Paraphrase the following response.\n{source}\nParaphrase:\n",
}
CONDITIONS = ("source", "reference")


def target_language(lang_pair: str | None) -> str:
    if not lang_pair:
        return "English"
    code = str(lang_pair).split("-")[-1]
    return LANGUAGES.get(code, code)


def render(template: str, source: str, fields: Mapping[str, str] | None = None) -> tuple[str, tuple[int, int]]:
    """The filled template and the character span of the source in it (truncation cuts only that)."""
    fields = fields or {}
    if "{source}" not in template:
        raise ConfigError(f"a prompt template must contain {{source}}: {template!r}")
    head, tail = template.split("{source}", 1)
    try:
        head, tail = head.format(**fields), tail.format(**fields)
    except (KeyError, IndexError, ValueError) as err:  # {name} not known, {0}, a lone brace
        known = ", ".join("{" + k + "}" for k in ["source", *fields])
        raise ConfigError(f"prompt template {template!r}: cannot fill it ({type(err).__name__}: {err}); "
                          f"it may use {known}, and {{{{ }}}} for a literal brace") from None
    prompt = head + source + tail
    return prompt, (len(head), len(head) + len(source))


CHAT_CHANGED = ("prompt.chat_template=true: the chat template changed the prompt text, so the source cannot be "
                "located in it")


def wrap_chat(prompt: str, span: tuple[int, int], chat: Callable[[str], str],
              changed: str = CHAT_CHANGED) -> tuple[str, tuple[int, int]]:
    """The prompt put into a chat template and its moved source span; ``changed``: the ConfigError's text
    when the template changed the prompt."""
    full = chat(prompt)
    at = full.find(prompt)
    if at < 0:
        raise ConfigError(changed)
    return full, (span[0] + at, span[1] + at)


def build(examples: pd.DataFrame, *, condition: str = "source", templates: dict | None = None,
          reference_templates: dict | None = None, template: str | None = None,
          chat: Callable[[str], str] | None = None) -> tuple[list[str], list[tuple[int, int]]]:
    """Prompts and source spans for every row; ``template`` (a task name or a template) overrides the task's."""
    if condition not in CONDITIONS:
        raise ConfigError(f"prompt.condition must be one of {CONDITIONS}, got {condition!r}")
    table = dict(TEMPLATES if condition == "source" else REFERENCE_TEMPLATES)
    table.update((templates if condition == "source" else reference_templates) or {})
    prompts, spans = [], []
    for row in examples.itertuples(index=False):
        tpl = template if template is not None else row.task
        tpl = table.get(tpl, TEMPLATES.get(tpl, tpl))
        filler = row.source if condition == "source" else row.reference
        if condition == "reference" and (filler is None or (isinstance(filler, float)) or not str(filler).strip()):
            raise DataError(f"prompt.condition=reference but row {row.id!r} has no reference (field 'reference' "
                            "is empty); use prompt.condition=source or data with references")
        prompt, span = render(tpl, str(filler), {"target_language": target_language(row.lang_pair)})
        if chat is not None:
            prompt, span = wrap_chat(prompt, span, chat)
        prompts.append(prompt)
        spans.append(span)
    return prompts, spans
