"""Prompts for LLM-as-a-judge scoring (``cd_judge``; the ``judge_prompt`` config group): one score in
``lo``-``hi`` for one aspect of a hypothesis given its source, in the ``cscore`` or ``released`` (the
CD-judge release's files) placeholder style. Filling never runs ``str.format`` (documents contain braces)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from cscore.data import paths
from cscore.data.prompts import wrap_chat
from cscore.data.schema import DataError
from cscore.errors import ConfigError
from cscore.registry import suggest
from cscore.score_range import check_range

STYLES = ("cscore", "released")
# per style: the placeholders of the source, the hypothesis and the range ends
PLACEHOLDERS = {
    "cscore": {"source": "{source}", "hypothesis": "{hypothesis}", "min": "{min}", "max": "{max}"},
    "released": {"source": "{{Document}}", "hypothesis": "{{Summary}}", "min": "{min_range}", "max": "{max_range}"},
}
# filled by template_for before render; one left in a rendered template is a config mistake
DIALOGUE_FIELDS = ("{aspect_title}", "{definition}")
TASKS = ("summarization", "dialogue")
ROLES = ("user", "system")
RELEASED_ASPECTS = ("coherence", "consistency", "relevance")
CHAT_CHANGED = ("the chat template changed the judge prompt's text, so the source cannot be located in it; use a "
                "model whose chat template keeps the message as it is")
KEYS = ("name", "style", "role", "generation_prompt", "templates", "files", "closing", "dialogue_template",
        "dialogue_aspects")


def _name(prompt_cfg: Mapping) -> str:
    return str(prompt_cfg.get("name") or "?")


def _mapping(prompt_cfg: Mapping, key: str) -> Mapping:
    value = prompt_cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"judge_prompt.{key} must be a mapping of aspect -> text, got {type(value).__name__}")
    return value


def check_style(style) -> str:
    if style not in STYLES:
        raise ConfigError(f"judge_prompt.style must be one of {' | '.join(STYLES)}, got {style!r}"
                          f"{suggest(str(style), STYLES)}")
    return style


def check_role(role) -> None:
    if role not in ROLES:
        raise ConfigError(f"judge_prompt.role must be one of {' | '.join(ROLES)}, got {role!r}")


def check_config(prompt_cfg: Mapping) -> None:
    """A ConfigError for the first judge_prompt setting of a wrong key or type."""
    for key in prompt_cfg:
        if key not in KEYS:
            raise ConfigError(f"unknown setting judge_prompt.{key}{suggest(str(key), KEYS)}; "
                              f"judge_prompt has {', '.join(KEYS)}")
    check_style(prompt_cfg.get("style", "cscore"))
    check_role(prompt_cfg.get("role", "user"))
    if not isinstance(prompt_cfg.get("generation_prompt", True), bool):
        raise ConfigError(f"judge_prompt.generation_prompt must be true | false, "
                          f"got {prompt_cfg.get('generation_prompt')!r}")
    for key in ("templates", "files", "dialogue_aspects"):
        for aspect, text in _mapping(prompt_cfg, key).items():
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"judge_prompt.{key}.{aspect} must be a non-empty string, got {text!r}")
    closing = prompt_cfg.get("closing")
    if closing is not None and not isinstance(closing, str):
        raise ConfigError(f"judge_prompt.closing must be a string or null (null or '' drops it), got {closing!r}")
    dialogue = prompt_cfg.get("dialogue_template")
    if dialogue is not None and not (isinstance(dialogue, str) and dialogue.strip()):
        raise ConfigError(f"judge_prompt.dialogue_template must be a non-empty string or null, got {dialogue!r}")


def aspect_title(aspect: str) -> str:
    """'semantically_appropriate' -> 'Semantically appropriate'."""
    words = str(aspect).replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def read_file(path: str) -> str:
    """A prompt file's text: ``path`` itself when it is a file, else (relative) inside the shared data folder."""
    file = Path(str(path)).expanduser()
    if file.is_absolute() and not file.is_file():
        raise ConfigError(f"judge prompt file {file} does not exist; point judge_prompt.files.<aspect> at "
                          "an existing file")
    try:
        file = file if file.is_file() else paths.default_file(*file.parts)
    except DataError as err:
        raise ConfigError(f"judge prompt file {path} not found (neither relative to {Path.cwd()} nor in the shared "
                          f"data folder: {err}). Give the file's path as judge_prompt.files.<aspect>=/path/to/"
                          f"{file.name}, or set {paths.ENV_VAR} to the folder that holds {file.as_posix()}") from None
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read judge prompt file {file}: {err}") from None


def _summarization_template(prompt_cfg: Mapping, aspect: str) -> str:
    templates, files = _mapping(prompt_cfg, "templates"), _mapping(prompt_cfg, "files")
    if aspect in templates:
        return str(templates[aspect])
    if aspect in files:
        return read_file(str(files[aspect]))
    known = sorted(set(templates) | set(files))
    if prompt_cfg.get("style") == "released":
        raise ConfigError(f"judge_prompt={_name(prompt_cfg)} has no prompt for the aspect {aspect!r}: the released "
                          f"CD-judge prompts cover only {', '.join(known or RELEASED_ASPECTS)}; use "
                          "judge_prompt=geval (cscore's own prompts) for other aspects")
    raise ConfigError(f"judge_prompt={_name(prompt_cfg)} has no summarization prompt for the aspect "
                      f"{aspect!r}{suggest(aspect, known)}; it has {', '.join(known) or 'none'}")


def _dialogue_template(prompt_cfg: Mapping, aspect: str) -> str:
    template = prompt_cfg.get("dialogue_template")
    definitions = _mapping(prompt_cfg, "dialogue_aspects")
    if not template:
        hint = (f"the released CD-judge prompts cover only summarization ({', '.join(RELEASED_ASPECTS)}); use "
                "judge_prompt=geval for dialogue" if prompt_cfg.get("style") == "released"
                else "set judge_prompt.dialogue_template")
        raise ConfigError(f"judge_prompt={_name(prompt_cfg)} has no dialogue prompt: {hint}")
    if aspect not in definitions:
        raise ConfigError(f"judge_prompt={_name(prompt_cfg)} has no definition of the dialogue aspect "
                          f"{aspect!r}{suggest(aspect, definitions)}; it defines {', '.join(definitions) or 'none'} "
                          f"(add judge_prompt.dialogue_aspects.{aspect})")
    template = str(template)
    missing = [f for f in DIALOGUE_FIELDS if f not in template]
    if missing:
        raise ConfigError(f"judge_prompt.dialogue_template lacks {' and '.join(missing)}")
    return (template.replace("{aspect_title}", aspect_title(aspect))
            .replace("{definition}", str(definitions[aspect]).strip()))


def with_closing(template: str, closing: str | None, aspect: str) -> str:
    """``template``, a blank line and ``closing`` with ``{aspect}`` filled (lower case, underscores as spaces),
    as the CD-judge paper's Appendix A prompts end; None or '': unchanged."""
    if not closing or not closing.strip():
        return template
    name = str(aspect).replace("_", " ").strip().lower()
    return f"{template.rstrip()}\n\n{closing.strip().replace('{aspect}', name)}"


def template_for(prompt_cfg: Mapping, aspect: str, task: str) -> str:
    """The template for one aspect of one task (summarization or dialogue)."""
    if task == "summarization":
        return with_closing(_summarization_template(prompt_cfg, aspect), prompt_cfg.get("closing"), aspect)
    if task == "dialogue":
        return _dialogue_template(prompt_cfg, aspect)
    raise ConfigError(f"judge prompts exist for {' and '.join(TASKS)} data; the data's task is {task!r}")


def _pieces(template: str, style: str) -> tuple[list[str], list[str]]:
    """(the texts around the source and hypothesis placeholders, their order); ConfigError on a bad template."""
    marks = PLACEHOLDERS[style]
    counts = {key: template.count(marks[key]) for key in ("source", "hypothesis")}
    problems = [f"{marks[key]} {'is missing' if n == 0 else f'appears {n} times (once, please)'}"
                for key, n in counts.items() if n != 1]
    problems += [f"{marks[key]} is missing" for key in ("min", "max") if marks[key] not in template]
    if problems:
        other = "released" if style == "cscore" else "cscore"
        hint = (f" (it looks like a {other}-style template: set judge_prompt.style={other})"
                if PLACEHOLDERS[other]["source"] in template else "")
        raise ConfigError(f"judge prompt template ({style} style): {'; '.join(problems)}{hint}")
    first, second = sorted(("source", "hypothesis"), key=lambda k: template.index(marks[k]))
    head, rest = template.split(marks[first], 1)
    middle, tail = rest.split(marks[second], 1)
    return [head, middle, tail], [first, second]


def render(template: str, *, source: str, hypothesis: str, lo: int, hi: int,
           style: str) -> tuple[str, tuple[int, int]]:
    """The filled prompt and the span ``(start, end)`` of the source in it (``prompt[start:end] == source``)."""
    check_style(style)
    check_range(lo, hi)
    marks = PLACEHOLDERS[style]
    pieces, order = _pieces(str(template), style)
    filled = [p.replace(marks["min"], str(lo)).replace(marks["max"], str(hi)) for p in pieces]
    left = [f for f in DIALOGUE_FIELDS if any(f in p for p in filled)]
    if left:
        raise ConfigError(f"judge prompt template still holds {' and '.join(left)}: a dialogue template must be "
                          "filled by template_for (judge_prompt.dialogue_template)")
    texts = {"source": str(source), "hypothesis": str(hypothesis)}
    prompt, starts = filled[0], {}
    for key, piece in zip(order, filled[1:]):
        starts[key] = len(prompt)
        prompt += texts[key] + piece
    return prompt, (starts["source"], starts["source"] + len(texts["source"]))


def chat_renderer(tokenizer, role: str = "user", generation_prompt: bool = True) -> Callable[[str], str]:
    """``text -> the tokenizer's chat template around one message``; ConfigError if it cannot render one."""
    check_role(role)
    model = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"judge prompts need an instruct model's chat template; {model} has none")

    def chat(text: str) -> str:
        return tokenizer.apply_chat_template([{"role": role, "content": text}], tokenize=False,
                                             add_generation_prompt=generation_prompt)

    try:  # a template that refuses the role (some allow no system message) fails here, once
        chat("x")
    except Exception as err:  # jinja2's TemplateError and friends: a config problem, said in one line
        message = " ".join(str(err).split()) or type(err).__name__
        raise ConfigError(f"the chat template of {model} cannot render one {role} message: {message} "
                          "(try judge_prompt.role=user)") from None
    return chat


def build(examples, prompt_cfg: Mapping, *, aspect: str, lo: int, hi: int,
          chat: Callable[[str], str] | None) -> tuple[list[str], list[tuple[int, int]]]:
    """One judge prompt per row of ``examples`` (through ``chat`` when given) and its source's span."""
    style = check_style(prompt_cfg.get("style", "cscore"))
    templates: dict[str, str] = {}
    prompts, spans = [], []
    for source, hypothesis, task in zip(examples["source"], examples["hypothesis"], examples["task"]):
        if task not in templates:
            templates[task] = template_for(prompt_cfg, aspect, task)
        prompt, (start, end) = render(templates[task], source=source, hypothesis=hypothesis, lo=lo, hi=hi,
                                      style=style)
        if chat is not None:
            prompt, (start, end) = wrap_chat(prompt, (start, end), chat, CHAT_CHANGED)
        prompts.append(prompt)
        spans.append((start, end))
    return prompts, spans
