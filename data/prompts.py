"""Prompt templates. A template holds ``{source}``; ``render`` returns the prompt and the
character span of the source inside it (truncation cuts only that span).

Default templates are the ContrastScore paper's (Table 6). The table typesets them as
"...texts:\\n {Article}\\n Summary:\\n"; we read the spaces after the line breaks as layout
and leave them out."""

from __future__ import annotations

TEMPLATES = {
    "summarization": "Write an accurate, relevant, and coherent summary of the following texts:\n{source}\nSummary:\n",
    "translation": "Translate the following sentence to {target_language}:\n{source}\n",
}


def render(template: str, source: str, **fields) -> tuple[str, tuple[int, int]]:
    if "{source}" not in template:
        raise ValueError("a prompt template must contain {source}")
    head, tail = template.split("{source}", 1)
    head, tail = head.format(**fields), tail.format(**fields)
    prompt = head + source + tail
    return prompt, (len(head), len(head) + len(source))
