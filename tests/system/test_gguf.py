"""Models shipped as GGUF files in PyPI wheels (``gguf:<name>``): found through package
metadata, converted once into the cscore cache, then loaded with plain ``from_pretrained``.

These tests use the real cache (``$CSCORE_CACHE``, default ~/.cache/cscore), so the first
run converts (smollm2 ~30 s, gemma3-270m ~1 min) and every later run reuses the result.
Without the wheels they are skipped, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import importlib.metadata
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from cscore.scorers.engine import engine
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.models.gguf import CONVERSION_VERSION, PACKAGED_GGUF, resolve_path
from cscore.scorers.models.models import early_exit, load_model

pytestmark = pytest.mark.slow  # the fast tier (-m 'not slow') leaves these out

FLUENT = [
    "The quick brown fox jumps over the lazy dog near the river bank every morning.",
    "She opened the window because the room was far too warm to sleep in.",
    "After the meeting, the engineers went back to their desks and kept working on the new design.",
]


def require_wheels(name: str) -> None:
    entry = PACKAGED_GGUF[name]
    missing = []
    for dist in [entry.dist] + [d for d, _ in entry.parts]:
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    if missing:
        message = f"gguf:{name} needs {', '.join(missing)} ({entry.hint})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def load(name: str):
    require_wheels(name)
    return load_model(f"gguf:{name}", device="cpu", dtype="float32")


def shuffled(sentence: str, seed: int = 0) -> str:
    words = sentence.rstrip(".").split()
    order = words[:]
    while order == words:
        random.Random(seed).shuffle(order)
        seed += 1
    return " ".join(order) + "."


def mean_logprob(lm, text: str) -> float:
    """Mean log-probability of the text's tokens, the first one conditioned on BOS."""
    ids = [lm.tokenizer.bos_token_id] + lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ids])
    with torch.no_grad():
        logits = lm.model(ids).logits.float()
    return logits[0, :-1].log_softmax(-1).gather(1, ids[0, 1:, None]).mean().item()


def check_prefers_fluent_text(lm) -> None:
    for sentence in FLUENT:
        fluent, scrambled = mean_logprob(lm, sentence), mean_logprob(lm, shuffled(sentence))
        assert fluent > scrambled, (sentence, fluent, scrambled)


def check_cache_reused(spec: str, monkeypatch) -> None:
    path, fingerprint = resolve_path(spec)  # converted already, by load_model
    # each transformers major version converts its own copy: 4.x misreads a 5.x config
    assert path.endswith(f"-c{CONVERSION_VERSION}-tf{transformers.__version__.split('.')[0]}")
    marker = Path(path) / "COMPLETE"
    before = marker.stat().st_mtime_ns

    def no_conversion(*args, **kwargs):
        raise AssertionError("the cached conversion should have been reused")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_conversion)
    assert resolve_path(spec) == (path, fingerprint)
    assert marker.stat().st_mtime_ns == before


@pytest.fixture(scope="module")
def smollm2():
    return load("smollm2")


@pytest.fixture(scope="module")
def gemma():
    return load("gemma3-270m")


def test_smollm2_loads_and_prefers_fluent_text(smollm2):
    assert type(smollm2.model).__name__ == "LlamaForCausalLM"
    check_prefers_fluent_text(smollm2)


def test_smollm2_cache_is_reused(smollm2, monkeypatch):
    check_cache_reused("gguf:smollm2", monkeypatch)


# Expected ids checked against transformers 5.x (whose GGUF reader gets Gemma 3 right) and
# SentencePiece itself, both fed the same GGUF file.
GEMMA_IDS = {
    "The capital of France is": [818, 5279, 529, 7001, 563],
    "Hello, world! How's it going? (Fine.) -- \"quoted\" [x] {y}...":
        [9259, 236764, 1902, 236888, 2088, 236789, 236751, 625, 1771, 236881, 568, 82879, 2907, 2617, 623,
         148758, 236775, 870, 236781, 236842, 642, 236762, 182071],
    "1234567890 3.14159 $100,000 2024-01-01":
        [236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771, 236743, 236800, 236761,
         236770, 236812, 236770, 236810, 236819, 609, 236770, 236771, 236771, 236764, 236771, 236771, 236771,
         236743, 236778, 236771, 236778, 236812, 236772, 236771, 236770, 236772, 236771, 236770],
    "naïve café résumé 日本語のテキスト 🤗👩\u200d👩\u200d👧 Москва":
        [1789, 238527, 560, 33443, 118515, 33375, 238582, 236945, 95830, 223603, 243767, 237243, 243767, 237243,
         244814, 99776],
    "tabs\tand\nnewlines\n\n\nend": [39218, 255968, 624, 107, 208697, 109, 643],
    "  leading spaces and  double  spaces ": [138, 26016, 9952, 532, 138, 7902, 138, 35220, 236743],
    "\u0001\u0002 control bytes and 𝕏": [249732, 241247, 2256, 17234, 532, 236743, 478, 395, 387, 381],  # bytes
}


@pytest.mark.slow  # first run: joins the four part wheels and converts (about a minute)
def test_gemma3_270m_loads_and_prefers_fluent_text(gemma):
    config = gemma.model.config
    assert type(gemma.model).__name__ == "Gemma3ForCausalLM"
    assert config.num_hidden_layers == 18 and config.final_logit_softcapping is None
    check_prefers_fluent_text(gemma)


@pytest.mark.slow
def test_gemma3_270m_tokenizer(gemma):
    tok = gemma.tokenizer
    assert len(tok) == 262144
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id) == (2, 1, 0, 3)
    for text, ids in GEMMA_IDS.items():
        assert tok(text, add_special_tokens=False)["input_ids"] == ids, text
        assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(GEMMA_IDS["The capital of France is"]) == [
        "The", "▁capital", "▁of", "▁France", "▁is"]
    assert tok("The capital of France is")["input_ids"] == [2, 818, 5279, 529, 7001, 563]  # BOS added
    assert tok("<start_of_turn>user", add_special_tokens=False)["input_ids"] == [105, 2364]


@pytest.mark.slow
def test_gemma3_270m_cache_is_reused(gemma, monkeypatch):
    check_cache_reused("gguf:gemma3-270m", monkeypatch)


def hyp_logprobs(model, prompt: list[int], hyp: list[int]) -> np.ndarray:
    """Reference: one unpadded forward pass, log-probs of the hypothesis tokens (the LM head on
    the positions that predict them only: a 262k vocabulary over a 576-token prompt is 0.6 GB)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + hyp]), logits_to_keep=len(hyp) + 1).logits[0, :-1]
    lsm = logits.double().log_softmax(-1)
    return np.array([lsm[j, t].item() for j, t in enumerate(hyp)])


@pytest.mark.slow
def test_gemma3_270m_early_exit_equals_the_truncated_model(gemma, f32):
    """Past the sliding window (so local and global layers differ), with padding on either side:
    the early-exit view and the engine's layer tap give the truncated model's numbers."""
    k = 6  # five sliding-window layers, then a global one
    tok = gemma.tokenizer

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    window = gemma.model.config.sliding_window
    long_prompt = ids(" ".join(FLUENT * window))[:window + 64]
    items = [(long_prompt, ids(" " + FLUENT[0])), (ids(FLUENT[1]), ids(" " + FLUENT[2]))]
    truncated = transformers.AutoModelForCausalLM.from_pretrained(gemma.info["path"], num_hidden_layers=k,
                                                                  dtype=torch.float32)
    want = [hyp_logprobs(truncated, p, h) for p, h in items]
    view = early_exit(gemma, k)
    for (p, h), w in zip(items, want):
        np.testing.assert_allclose(hyp_logprobs(view.model, p, h), w, rtol=0, atol=f32.logp_tol(w).min())
    for side in ("left", "right"):
        stats, _ = engine.compute(gemma.model, items, temperatures=(1.0,), pad_id=tok.pad_token_id,
                                  heads={"amateur": k}, options=PassOptions(padding_side=side))
        for i, w in enumerate(want):
            got = stats["amateur"].lp(1.0)[stats["amateur"].item(i)]
            np.testing.assert_allclose(got, w, rtol=0, atol=f32.logp_tol(w).min())


@pytest.mark.slow
@pytest.mark.xdist_group("test_gguf.py")  # the module's models (getfixturevalue): loaded once, in its worker
@pytest.mark.parametrize("name, fixture", [("smollm2", "smollm2"), ("gemma3-270m", "gemma")])
def test_tokenizer_alone_needs_no_conversion_and_equals_the_converted_one(name, fixture, request, tmp_path,
                                                                         monkeypatch):
    """`cscore data check tokenizer=gguf:...` reads the tokenizer from the GGUF metadata: with an
    empty cache no model is converted, and the ids are those of the converted model's tokenizer."""
    from cscore.scorers.models import gguf

    converted = request.getfixturevalue(fixture).tokenizer
    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path))
    tok = gguf.load_tokenizer(f"gguf:{name}")
    assert not (tmp_path / "models").exists()
    assert len(tok) == len(converted)
    for attr in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert getattr(tok, attr) == getattr(converted, attr), attr
    for text in FLUENT + list(GEMMA_IDS):
        assert tok(text)["input_ids"] == converted(text)["input_ids"], text
