"""Judge prompts (data/judge_prompts.py, conf/judge_prompt/*.yaml). Expected prompts are written
out by hand; the released prompt files are read from the shared data folder (those tests skip
without it, except under CI). Nothing here imports torch; a test that needs a real tokenizer
imports transformers in its body."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cscore.data import judge_prompts as jp
from cscore.errors import ConfigError

TURN_ASPECTS = ["interesting", "engaging", "specific", "relevant", "correct", "semantically_appropriate",
                "understandable", "fluent", "overall"]
DIALOG_ASPECTS = ["coherent", "error_recovery", "consistent", "diverse", "depth", "likeable", "understanding",
                  "flexible", "informative", "inquisitive", "overall"]
SUMM_ASPECTS = ["coherence", "consistency", "relevance", "fluency"]


def load_preset(name: str) -> dict:
    return yaml.safe_load(resources.files("cscore.conf").joinpath("judge_prompt", f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def geval():
    return load_preset("geval")


@pytest.fixture(scope="module")
def released():
    return load_preset("released")


# --- render -------------------------------------------------------------------------------------

def test_render_cscore_exact():
    tpl = "Rate ({min}-{max}).\nDoc: {source}\nSum: {hypothesis}\n- Score:"
    prompt, span = jp.render(tpl, source="The cat sat.", hypothesis="A cat.", lo=1, hi=5, style="cscore")
    assert prompt == "Rate (1-5).\nDoc: The cat sat.\nSum: A cat.\n- Score:"
    assert span == (17, 29)
    assert prompt[span[0]:span[1]] == "The cat sat."


def test_render_braces_in_texts_are_kept():
    """Documents with braces, and even with placeholders, come out unchanged."""
    tpl = "{min} to {max} | {source} | {hypothesis} | {max}"
    source = "a {min} b {{Summary}} {x} }{ {hypothesis} {0}"
    hypothesis = "{source} and {max_range}"
    prompt, span = jp.render(tpl, source=source, hypothesis=hypothesis, lo=0, hi=4, style="cscore")
    assert prompt == "0 to 4 | a {min} b {{Summary}} {x} }{ {hypothesis} {0} | {source} and {max_range} | 4"
    assert prompt[span[0]:span[1]] == source


def test_render_released_style_with_braces():
    tpl = "Score ({min_range}-{max_range}), {min_range} lowest.\n{{Document}}\n--\n{{Summary}}\n- Coherence:"
    source = "Text with {{Summary}} and {min_range} inside"
    prompt, span = jp.render(tpl, source=source, hypothesis="S {x}", lo=2, hi=6, style="released")
    assert prompt == ("Score (2-6), 2 lowest.\nText with {{Summary}} and {min_range} inside\n--\nS {x}\n"
                      "- Coherence:")
    assert prompt[span[0]:span[1]] == source
    assert span == (23, 23 + len(source))


def test_render_hypothesis_before_source():
    prompt, span = jp.render("H={hypothesis};S={source};R={min}..{max}", source="src", hypothesis="hyp",
                             lo=3, hi=7, style="cscore")
    assert prompt == "H=hyp;S=src;R=3..7"
    assert span == (8, 11)


def test_render_template_mistakes():
    with pytest.raises(ConfigError, match=r"\{hypothesis\} is missing"):
        jp.render("{min}-{max} {source}", source="s", hypothesis="h", lo=1, hi=5, style="cscore")
    with pytest.raises(ConfigError, match=r"\{source\} appears 2 times"):
        jp.render("{min}-{max} {source} {source} {hypothesis}", source="s", hypothesis="h", lo=1, hi=5,
                  style="cscore")
    with pytest.raises(ConfigError, match=r"\{max\} is missing"):
        jp.render("{min} {source} {hypothesis}", source="s", hypothesis="h", lo=1, hi=5, style="cscore")
    # a released-style template under the cscore style: the error says which style it looks like
    with pytest.raises(ConfigError, match=r"judge_prompt.style=released"):
        jp.render("{min_range}-{max_range} {{Document}} {{Summary}}", source="s", hypothesis="h", lo=1, hi=5,
                  style="cscore")
    with pytest.raises(ConfigError, match=r"still holds \{aspect_title\} and \{definition\}"):
        jp.render("{aspect_title} {min}-{max} {definition} {source} {hypothesis}", source="s", hypothesis="h",
                  lo=1, hi=5, style="cscore")


def test_render_bad_style_and_range():
    with pytest.raises(ConfigError, match=r"judge_prompt.style must be one of cscore \| released, got 'cscor' "
                                          r"\(did you mean cscore\?\)"):
        jp.render("{min}{max}{source}{hypothesis}", source="s", hypothesis="h", lo=1, hi=5, style="cscor")
    with pytest.raises(ConfigError, match="minimum < maximum, got 5-1"):
        jp.render("{min}{max}{source}{hypothesis}", source="s", hypothesis="h", lo=5, hi=1, style="cscore")


# --- the geval preset ----------------------------------------------------------------------------

def test_geval_preset_settings(geval):
    assert (geval["name"], geval["style"], geval["role"], geval["generation_prompt"]) == ("geval", "cscore", "user",
                                                                                         True)
    assert sorted(geval["templates"]) == sorted(SUMM_ASPECTS)
    assert sorted(geval["dialogue_aspects"]) == sorted(set(TURN_ASPECTS) | set(DIALOG_ASPECTS))
    jp.check_config(geval)


@pytest.mark.parametrize("aspect, title", [("coherence", "Coherence"), ("consistency", "Consistency"),
                                           ("relevance", "Relevance"), ("fluency", "Fluency")])
def test_geval_summarization_prompts(geval, aspect, title):
    tpl = jp.template_for(geval, aspect, "summarization")
    source, summary = "ARTICLE {body} TEXT", "SUMMARY TEXT"
    prompt, span = jp.render(tpl, source=source, hypothesis=summary, lo=2, hi=6, style="cscore")
    assert prompt[span[0]:span[1]] == source
    assert f"Evaluation Criteria:\n\n{title} (2-6) - " in prompt
    assert "Evaluation Steps:\n\n1. " in prompt
    assert "score between 2 and 6, where 2 is the worst and 6 is the best" in prompt
    assert prompt.index(source) < prompt.index(summary)
    closing = f"What is the {aspect} of the summary above? Provide only rating and no other text."
    assert prompt.endswith(f"{summary}\n\n\nEvaluation Form (scores ONLY):\n\n- {title}:\n\n{closing}")
    for mark in ("{min}", "{max}", "{source}", "{hypothesis}", "{aspect_title}", "{definition}", "{aspect}"):
        assert mark not in prompt
    for dropped in (None, ""):  # judge_prompt.closing=null drops the paper's closing instruction
        tpl = jp.template_for({**geval, "closing": dropped}, aspect, "summarization")
        prompt, _ = jp.render(tpl, source=source, hypothesis=summary, lo=2, hi=6, style="cscore")
        assert prompt.endswith(f"{summary}\n\n\nEvaluation Form (scores ONLY):\n\n- {title}:")


def test_the_closing_instruction_is_the_papers_and_summarization_only(geval, shared, released):
    # Appendix A of the CD-judge paper ends each prompt with this sentence; so do the released
    # consistency and relevance files, the released coherence file does not
    assert geval["closing"] == "What is the {aspect} of the summary above? Provide only rating and no other text."
    files = shared / "cdjudge_released" / "prompts"
    for short, aspect in (("con", "consistency"), ("rel", "relevance")):
        text = (files / f"{short}_detailed_range.txt").read_text(encoding="utf-8")
        assert text.rstrip().endswith(geval["closing"].replace("{aspect}", aspect))
    assert "Provide only rating" not in (files / "coh_detailed_range.txt").read_text(encoding="utf-8")
    assert "Provide only rating" not in jp.template_for(released, "coherence", "summarization")
    assert "Provide only rating" not in jp.template_for(geval, "overall", "dialogue")
    with pytest.raises(ConfigError, match="judge_prompt.closing must be a string or null"):
        jp.check_config({**geval, "closing": 3})


@pytest.mark.parametrize("aspect, title", [("interesting", "Interesting"),
                                           ("semantically_appropriate", "Semantically appropriate"),
                                           ("error_recovery", "Error recovery"), ("overall", "Overall")])
def test_geval_dialogue_titles(geval, aspect, title):
    prompt, _ = jp.render(jp.template_for(geval, aspect, "dialogue"), source="User: hi", hypothesis="Hello",
                          lo=0, hi=4, style="cscore")
    assert f"\n{title} (0-4) - {geval['dialogue_aspects'][aspect]}\n" in prompt
    assert prompt.endswith(f"\n- {title}:")


@pytest.mark.parametrize("aspect", sorted(set(TURN_ASPECTS) | set(DIALOG_ASPECTS)))
def test_geval_every_fed_aspect(geval, aspect):
    source = "User: Do you like {jazz}?\nSystem: Yes!\nUser: Why?"
    prompt, span = jp.render(jp.template_for(geval, aspect, "dialogue"), source=source,
                             hypothesis="It makes me calm.", lo=1, hi=5, style="cscore")
    assert prompt[span[0]:span[1]] == source
    assert f"Conversation:\n\n{source}\n\nResponse:\n\nIt makes me calm.\n\n\nEvaluation Form (scores ONLY):" in prompt
    assert f"{jp.aspect_title(aspect)} (1-5) - {geval['dialogue_aspects'][aspect].strip()}" in prompt
    assert "{" not in prompt.replace("{jazz}", "")


def test_aspect_title():
    assert jp.aspect_title("semantically_appropriate") == "Semantically appropriate"
    assert jp.aspect_title("depth") == "Depth"


def test_unknown_aspects(geval):
    with pytest.raises(ConfigError, match=r"aspect 'semantically_apropriate' \(did you mean "
                                          r"semantically_appropriate\?\)"):
        jp.template_for(geval, "semantically_apropriate", "dialogue")
    with pytest.raises(ConfigError, match=r"aspect 'coherance' \(did you mean coherence\?\); it has coherence, "
                                          r"consistency, fluency, relevance"):
        jp.template_for(geval, "coherance", "summarization")
    with pytest.raises(ConfigError, match=r"judge prompts exist for summarization and dialogue data; the data's "
                                          r"task is 'translation'"):
        jp.template_for(geval, "coherence", "translation")


def test_dialogue_template_mistakes(geval):
    cfg = {**geval, "dialogue_template": "{min}-{max} {definition} {source} {hypothesis}"}
    with pytest.raises(ConfigError, match=r"dialogue_template lacks \{aspect_title\}"):
        jp.template_for(cfg, "overall", "dialogue")
    with pytest.raises(ConfigError, match="has no dialogue prompt"):
        jp.template_for({"name": "mine", "style": "cscore", "templates": {}}, "overall", "dialogue")


def test_check_config(geval):
    with pytest.raises(ConfigError, match=r"unknown setting judge_prompt.templats \(did you mean templates\?\)"):
        jp.check_config({**geval, "templats": {}})
    with pytest.raises(ConfigError, match=r"judge_prompt.role must be one of user \| system, got 'assistant'"):
        jp.check_config({**geval, "role": "assistant"})
    with pytest.raises(ConfigError, match="generation_prompt must be true"):
        jp.check_config({**geval, "generation_prompt": "yes"})
    with pytest.raises(ConfigError, match="judge_prompt.templates.coherence must be a non-empty string"):
        jp.check_config({**geval, "templates": {"coherence": 3}})


def test_omegaconf_config(geval):
    """The composed config arrives as a DictConfig: it works the same."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(geval)
    assert jp.template_for(cfg, "depth", "dialogue") == jp.template_for(geval, "depth", "dialogue")
    jp.check_config(cfg)


# --- files and the released preset ---------------------------------------------------------------

def test_files_inline_and_relative(tmp_path, monkeypatch):
    shared = tmp_path / "shared_data"
    (shared / "mine").mkdir(parents=True)
    (shared / "mine" / "c.txt").write_text("C {min_range}-{max_range}\n{{Document}}\n{{Summary}}\nÉ", encoding="utf-8")
    local = tmp_path / "local.txt"
    local.write_text("L {min_range}-{max_range} {{Document}} {{Summary}}", encoding="utf-8")
    monkeypatch.setenv("CSCORE_SHARED_DATA", str(shared))
    cfg = {"name": "t", "style": "released", "files": {"coherence": "mine/c.txt", "relevance": str(local)},
           "templates": {"relevance": "inline {min_range}{max_range}{{Document}}{{Summary}}"}}
    want = "C {min_range}-{max_range}\n{{Document}}\n{{Summary}}\nÉ"
    assert jp.template_for(cfg, "coherence", "summarization") == want
    assert jp.template_for(cfg, "relevance", "summarization").startswith("inline")  # inline wins
    del cfg["templates"]
    assert jp.template_for(cfg, "relevance", "summarization").startswith("L ")
    cfg["files"]["consistency"] = "mine/missing.txt"
    with pytest.raises(ConfigError, match=r"judge prompt file mine/missing.txt not found.*"
                                          r"judge_prompt.files.<aspect>=/path/to/missing.txt"):
        jp.template_for(cfg, "consistency", "summarization")
    cfg["files"]["consistency"] = str(tmp_path / "nope.txt")
    with pytest.raises(ConfigError, match=r"nope.txt does not exist"):
        jp.template_for(cfg, "consistency", "summarization")


def test_released_preset_settings(released):
    assert (released["name"], released["style"], released["role"], released["generation_prompt"]) == \
        ("released", "released", "system", False)
    assert released["files"] == {"coherence": "cdjudge_released/prompts/coh_detailed_range.txt",
                                 "consistency": "cdjudge_released/prompts/con_detailed_range.txt",
                                 "relevance": "cdjudge_released/prompts/rel_detailed_range.txt"}
    jp.check_config(released)


def test_released_preset_covers_three_aspects(released):
    with pytest.raises(ConfigError, match=r"cover only coherence, consistency, relevance; use judge_prompt=geval"):
        jp.template_for(released, "fluency", "summarization")
    with pytest.raises(ConfigError, match=r"has no dialogue prompt: the released CD-judge prompts cover only "
                                          r"summarization.*judge_prompt=geval"):
        jp.template_for(released, "overall", "dialogue")


@pytest.mark.parametrize("aspect, short, title", [("coherence", "coh", "Coherence"),
                                                  ("consistency", "con", "Consistency"),
                                                  ("relevance", "rel", "Relevance")])
def test_released_prompt_files(shared, released, aspect, short, title):
    file = shared / "cdjudge_released" / "prompts" / f"{short}_detailed_range.txt"
    tpl = jp.template_for(released, aspect, "summarization")
    assert tpl == file.read_text(encoding="utf-8")  # read where it lies, unchanged
    source = "Article with {braces} and {{Summary}}."
    prompt, span = jp.render(tpl, source=source, hypothesis="The summary.", lo=2, hi=6, style="released")
    assert prompt[span[0]:span[1]] == source
    assert f"{title} (2-6) - " in prompt
    for mark in ("{min_range}", "{max_range}", "{{Document}}"):
        assert mark not in prompt
    assert prompt.count("{{Summary}}") == 1  # only the one inside the article
    assert prompt.index(source) < prompt.index("The summary.")


# --- chat wrapping and build ---------------------------------------------------------------------

def fake_chat(text: str) -> str:
    return "<|user|>\n" + text + "<|end|>\n<|assistant|>\n"


def test_build_with_chat_and_mixed_tasks(geval):
    examples = pd.DataFrame({
        "source": ["Doc one {a}.", "Doc two.", "User: hi\nSystem: hey\nUser: so?"],
        "hypothesis": ["Sum one.", "Sum {two}.", "Fine."],
        "task": ["summarization", "summarization", "dialogue"],
    })
    cfg = {**geval, "templates": {"overall": "S {min}-{max} {source} / {hypothesis}"}, "closing": None}
    prompts, spans = jp.build(examples, cfg, aspect="overall", lo=1, hi=5, chat=fake_chat)
    assert prompts[0] == "<|user|>\nS 1-5 Doc one {a}. / Sum one.<|end|>\n<|assistant|>\n"
    assert prompts[1] == "<|user|>\nS 1-5 Doc two. / Sum {two}.<|end|>\n<|assistant|>\n"
    assert spans[0] == (len("<|user|>\nS 1-5 "), len("<|user|>\nS 1-5 Doc one {a}."))
    assert prompts[2].startswith("<|user|>\nYou will read a conversation")
    assert "\nOverall (1-5) - the overall quality of the response" in prompts[2]
    assert prompts[2].endswith("- Overall:<|end|>\n<|assistant|>\n")
    for prompt, (start, end), source in zip(prompts, spans, examples["source"]):
        assert prompt[start:end] == source


def test_build_without_chat_matches_render(geval):
    examples = pd.DataFrame({"source": ["A {x}"], "hypothesis": ["B"], "task": ["summarization"]})
    prompts, spans = jp.build(examples, geval, aspect="relevance", lo=0, hi=4, chat=None)
    template = geval["templates"]["relevance"] + "\n\n" + geval["closing"].replace("{aspect}", "relevance")
    want = jp.render(template, source="A {x}", hypothesis="B", lo=0, hi=4, style="cscore")
    assert (prompts[0], spans[0]) == want


def test_build_chat_that_changes_the_text(geval):
    examples = pd.DataFrame({"source": ["A"], "hypothesis": ["B"], "task": ["summarization"]})
    with pytest.raises(ConfigError, match="chat template changed the judge prompt"):
        jp.build(examples, geval, aspect="coherence", lo=1, hi=5, chat=lambda t: t.strip().upper())


def test_build_released_style(tmp_path):
    tpl = tmp_path / "p.txt"
    tpl.write_text("R {min_range}-{max_range}: {{Document}} => {{Summary}}", encoding="utf-8")
    cfg = {"name": "released", "style": "released", "files": {"coherence": str(tpl)}}
    examples = pd.DataFrame({"source": ["doc"], "hypothesis": ["sum"], "task": ["summarization"]})
    prompts, spans = jp.build(examples, cfg, aspect="coherence", lo=3, hi=7, chat=None)
    assert prompts == ["R 3-7: doc => sum"] and spans == [(7, 10)]


class FakeTokenizer:
    def __init__(self, chat_template="tpl", refuse_system=False):
        self.chat_template = chat_template
        self.name_or_path = "fake/model"
        self.refuse_system = refuse_system
        self.calls = []

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        self.calls.append((messages, tokenize, add_generation_prompt))
        if self.refuse_system and messages[0]["role"] == "system":
            raise ValueError("System role not\n supported")
        head = f"<{messages[0]['role']}>" + messages[0]["content"] + "</>"
        return head + ("<assistant>" if add_generation_prompt else "")


def test_chat_renderer_fake():
    tok = FakeTokenizer()
    chat = jp.chat_renderer(tok, role="system", generation_prompt=False)
    assert chat("hello {x}") == "<system>hello {x}</>"
    assert tok.calls[-1] == ([{"role": "system", "content": "hello {x}"}], False, False)
    chat = jp.chat_renderer(tok)
    assert chat("hi") == "<user>hi</><assistant>"
    with pytest.raises(ConfigError, match=r"judge prompts need an instruct model's chat template; fake/model has none"):
        jp.chat_renderer(FakeTokenizer(chat_template=None))
    with pytest.raises(ConfigError, match=r"cannot render one system message: System role not supported"):
        jp.chat_renderer(FakeTokenizer(refuse_system=True), role="system")
    with pytest.raises(ConfigError, match="judge_prompt.role must be one of"):
        jp.chat_renderer(tok, role="assistant")


def test_chat_renderer_tiny_tokenizer_has_none(tiny_tokenizer):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(tiny_tokenizer)
    with pytest.raises(ConfigError, match=r"has none"):
        jp.chat_renderer(tok)


def test_chat_renderer_smollm2(geval, released):
    """The packaged SmolLM2 (converted copy in the cscore model cache; skipped when absent): the
    released preset's one system message without generation prompt, and geval's user message, whose
    template adds SmolLM2's default system message and the assistant header."""
    import os

    root = Path(os.environ.get("CSCORE_CACHE", Path.home() / ".cache" / "cscore")).expanduser() / "models"
    found = sorted(p for p in root.glob("*") if "smollm2" in p.name.lower() and p.name.endswith("-c3-tf5")
                   and (p / "COMPLETE").exists()) if root.is_dir() else []
    if not found:
        pytest.skip("no converted SmolLM2 in the cscore model cache (a default `cscore run` makes it)")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(found[0])
    chat = jp.chat_renderer(tok, role=released["role"], generation_prompt=released["generation_prompt"])
    assert chat("X {y}") == "<|im_start|>system\nX {y}<|im_end|>\n"
    chat = jp.chat_renderer(tok, role=geval["role"], generation_prompt=geval["generation_prompt"])
    examples = pd.DataFrame({"source": ["Doc."], "hypothesis": ["Sum."], "task": ["summarization"]})
    prompts, spans = jp.build(examples, geval, aspect="fluency", lo=1, hi=5, chat=chat)
    assert prompts[0].startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert prompts[0].endswith("- Fluency:\n\nWhat is the fluency of the summary above? Provide only rating and no "
                               "other text.<|im_end|>\n<|im_start|>assistant\n")
    assert prompts[0][spans[0][0]:spans[0][1]] == "Doc."


# --- the real dialogue data ------------------------------------------------------------------------

def test_every_aspect_of_the_dialogue_data_has_a_prompt(shared, geval):
    """Every human.<aspect> column of FED (both levels) and DSTC9 renders with the geval preset."""
    from cscore.data import dstc9, fed

    frames = (fed.load(str(shared / "fed" / "fed_data.json"))[0],
              dstc9.load(str(shared / "dstc9" / "dstc9_data.json"))[0])
    for df in frames:
        aspects = sorted(c.removeprefix("human.") for c in df.columns if c.startswith("human."))
        assert aspects, df.columns
        row = df.iloc[:1]
        for aspect in aspects:
            prompts, spans = jp.build(row, geval, aspect=aspect, lo=1, hi=5, chat=None)
            assert prompts[0][spans[0][0]:spans[0][1]] == row["source"].iloc[0]
            assert prompts[0].endswith(f"- {jp.aspect_title(aspect)}:")


def test_a_closing_that_is_not_text_is_a_one_line_config_error(tmp_path, cscore_main):
    res = cscore_main("run", "method=cd_judge", "judge_prompt.closing=5", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "cscore: error: judge_prompt.closing must be a string or null (null or '' drops it), got 5\n"
