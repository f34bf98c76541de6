"""Property-based tests of the prompt builder and the judge-output parsers: any text, any template,
any judge output gives a prompt whose source span holds exactly the source (rows in input order),
a one-line ConfigError / DataError, or a score inside the range; never a traceback."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cscore.data import prompts
from cscore.data.schema import DataError
from cscore.errors import ConfigError, CscoreError
from cscore.scorers.judge.parse import ABOVE, BELOW, NO_PRED, OK, parse_paper, parse_released
from cscore.tests.support import REPO

spec = importlib.util.spec_from_file_location("cscore_fuzz", REPO / "scripts" / "fuzz.py")
fuzz = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fuzz)

FAST = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
texts = st.text(max_size=30) | st.sampled_from(["{source}", "{", "}", "{target_language}", "{0}", "{{x}}", "\u2028"])


def table(sources, refs=None, tasks=None, lang_pairs=None):
    n = len(sources)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "task": tasks or ["summarization"] * n,
                         "source": sources, "reference": refs or [None] * n,
                         "lang_pair": lang_pairs or [None] * n})


@FAST
@given(
    st.lists(
        st.tuples(texts, st.sampled_from(list(prompts.TEMPLATES)), st.one_of(st.none(), texts)), min_size=1, max_size=6
    )
)
def test_source_span_holds_exactly_the_source(rows):
    df = table([r[0] for r in rows], tasks=[r[1] for r in rows], lang_pairs=[r[2] for r in rows])
    built, spans = prompts.build(df)
    assert len(built) == len(spans) == len(rows)
    for (source, task, _), prompt, (a, b) in zip(rows, built, spans):
        assert prompt[a:b] == source  # braces in the text are never formatted
        head = prompts.TEMPLATES[task].split("{source}")[0].split("{")[0]
        assert prompt.startswith(head)


@FAST
@given(st.lists(texts, min_size=1, max_size=4), st.lists(texts, min_size=1, max_size=4))
def test_reference_prompts_or_a_one_line_data_error(sources, refs):
    refs = (refs * len(sources))[:len(sources)]
    df = table(sources, refs=refs)
    try:
        built, spans = prompts.build(df, condition="reference")
    except DataError as err:
        assert "\n" not in str(err) and "field 'reference'" in str(err)
        missing = [i for i, r in enumerate(refs) if not r.strip()]
        assert missing and f"'r{missing[0]}'" in str(err)  # names the first row without one
        return
    assert all(p[a:b] == r for p, (a, b), r in zip(built, spans, refs))


@FAST
@given(st.text(alphabet="ab{}:0 _sourcetagl", max_size=40), texts)
def test_any_template_renders_or_is_a_config_error(template, source):
    try:
        prompt, (a, b) = prompts.render(template, source, {"target_language": "German"})
    except ConfigError as err:
        assert "\n" not in str(err) and repr(template) in str(err)
        return
    assert prompt[a:b] == source and "{source}" in template


@pytest.mark.parametrize("template,message", [
    ("Rate {foo}: {source}", r"cannot fill it \(KeyError: 'foo'\)"),
    ("Rate {: {source}", r"cannot fill it \(ValueError"),
    ("Rate {0} {source}", r"cannot fill it \(IndexError"),
    ("no slot", r"must contain \{source\}"),
])
def test_bad_templates_are_config_errors(template, message):
    """Found by the property above: these raised KeyError / ValueError / IndexError (a traceback)."""
    with pytest.raises(ConfigError, match=message):
        prompts.build(table(["s"]), template=template)


def test_missing_reference_is_a_data_error_naming_row_and_field():
    """Was a bare ValueError: a traceback from `cscore run prompt.condition=reference`."""
    with pytest.raises(DataError, match=r"row 'r1' has no reference \(field 'reference' is empty\)"):
        prompts.build(table(["a", "b"], refs=["ref", "  "]), condition="reference")


def test_chat_template_that_rewrites_the_prompt_is_a_config_error():
    with pytest.raises(CscoreError, match="chat template changed the prompt text"):
        prompts.build(table(["a"]), chat=lambda text: text.upper())


# ---------------------------------------------------------------------------------------------
# judge output


def test_judge_parsers_on_any_text():
    result = fuzz.run_parsers(300, seed=None, derandomize=True)
    assert result["findings"] == [] and result["ok"] == 300


@FAST
@given(st.integers(-3, 3), st.integers(1, 9), st.integers(-20, 20), st.sampled_from(["", " ", "\n", "  "]),
       st.text(max_size=5))
def test_judge_number_then_anything(lo, width, value, lead, rest):
    """The paper rule reads the leading integer whatever follows; the status says where it fell."""
    hi = lo + width
    score, status = parse_paper(f"{lead}{value}{' ' + rest if rest else ''}", lo, hi)
    want = (float(lo), BELOW) if value < lo else (float(hi), ABOVE) if value > hi else (float(value), OK)
    assert (score, status) == want
    score, status = parse_released(f"Score: {value}", lo, hi)
    assert (score, status) == want


@pytest.mark.parametrize("text", ["", "Coherence", "..", "+.", "1.2.3", "\x00", "9" * 5000, "-" * 3])
def test_judge_no_number_is_the_minimum(text):
    score, status = parse_paper(text, 1, 5)
    if status == NO_PRED:
        assert score == 1.0
    else:
        assert status == ABOVE and score == 5.0 and text.startswith("9")
    assert parse_paper("٣", 1, 5) == (3.0, OK)  # a Unicode digit is a number, as G-Eval's \d reads it
