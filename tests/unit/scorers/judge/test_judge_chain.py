"""The expected score of a two-digit range (1-10) on a tokenizer that writes one digit per token:
chained digit probabilities from the judge pass, against a step-by-step float64 recomputation
over the whole vocabulary (tiny random llamas; their byte-level tokenizer has no digit merges)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cscore.scorers.engine.pass_options import PassOptions  # noqa: E402
from cscore.scorers.judge import judge  # noqa: E402
from cscore.scorers.judge.parse import continuation_prefixes, digit_tokens, score_tokens  # noqa: E402
from cscore.scorers.judge.stats import CHAIN_CS, JudgeStats  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["The mayor opened a new bridge. Score:", "The council voted on the tram line on Monday night. Score:",
         "Rain is expected", "A short one"]


@pytest.fixture(scope="module")
def chain_models(tiny_dirs, tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("chain")
    shutil.copytree(tiny_dirs.expert, root / "expert")
    tok = AutoTokenizer.from_pretrained(root / "expert")
    main = AutoModelForCausalLM.from_pretrained(tiny_dirs.expert, dtype=torch.float64).eval()
    asst = AutoModelForCausalLM.from_pretrained(tiny_dirs.amateur, dtype=torch.float64).eval()
    return tok, main, asst


def full_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1].double().numpy()


def reference_expected(tok, main, asst, prompt, who, c) -> float:
    """E over 1..10 step by step: q at the prompt and after "1", each a softmax over the whole
    vocabulary; w(1) = q("1") (1 - sum of q(digit | "1")), w(10) = q("1") q("0" | "1"), w(d) = q(d)."""
    digits = [tok.convert_tokens_to_ids(str(d)) for d in range(10)]
    one, zero = digits[1], digits[0]

    def q(ids):
        a = torch.log_softmax(torch.from_numpy(full_logits(main, ids)), -1)
        z = torch.from_numpy(full_logits(asst, ids))
        s = {"main": a, "asst": z, "contrast": a - c * z}[who]
        return torch.softmax(s, -1).numpy()

    q0, q1 = q(prompt), q(prompt + [one])
    w = {d: q0[digits[d]] for d in range(2, 10)}
    w[1] = q0[one] * (1.0 - q1[digits].sum())
    w[10] = q0[one] * q1[zero]
    return sum(v * x for v, x in w.items()) / sum(w.values())


def chain_pass(tok, main, asst, **kw) -> JudgeStats:
    tokens = score_tokens(tok, 1, 10)
    values = list(range(1, 11))
    value_ids = [tuple(tokens[v]) for v in values]
    prefixes = continuation_prefixes(tokens)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    contexts = [c for p in prompts for c in [p, *(p + list(x) for x in prefixes)]]
    digits = kw.pop("digit_ids", None)
    scale = judge.Scale(values, value_ids, prefixes, len(prompts), lambda t: tok.decode([t]), digits)
    stats, _ = judge.compute(main, contexts, scale, asst=asst, options=PassOptions(**kw))
    return stats


def test_tokenizer_writes_one_digit_per_token(chain_models):
    tok, _, _ = chain_models
    tokens = score_tokens(tok, 1, 10)
    assert [len(tokens[v]) for v in range(1, 11)] == [1] * 9 + [2]
    assert continuation_prefixes(tokens) == [tuple(tokens[1])]
    assert digit_tokens(tok) == sorted(tok.convert_tokens_to_ids(str(d)) for d in range(10))


@pytest.mark.parametrize("budget,side", [(10_000, "right"), (24, "left")])
def test_chained_expected_score_equals_step_by_step_float64(chain_models, budget, side):
    tok, main, asst = chain_models
    stats = chain_pass(tok, main, asst, digit_ids=digit_tokens(tok), token_budget=budget, padding_side=side)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    cases = [("main", 0.0), ("asst", 0.0), ("contrast", 0.0), ("contrast", 0.1 / 3), ("contrast", 0.5),
             ("contrast", 2.0)]
    for who, c in cases:
        assert stats.expected_note(who, c) is None
        want = [reference_expected(tok, main, asst, p, who, c) for p in prompts]
        np.testing.assert_allclose(stats.expected(who, c), want, rtol=0, atol=1e-10)
    assert len(set(np.round(stats.expected("contrast", 0.5), 6))) > 1  # the items differ: no constant


def test_off_grid_c_is_not_computed_and_says_why(chain_models):
    tok, main, asst = chain_models
    stats = chain_pass(tok, main, asst, digit_ids=digit_tokens(tok))
    off = 0.3
    assert not np.isclose(CHAIN_CS, off).any()
    assert np.isnan(stats.expected("contrast", off)).all()
    assert "not one of the kept normalisers" in stats.expected_note("contrast", off)
    assert np.isfinite(stats.expected("main")).all()  # the single-model rows need no contrast normaliser
    without = chain_pass(tok, main, asst)  # no digit tokens given: no chain kept
    assert np.isnan(without.expected("main")).all() and "no chain" in without.expected_note("main")


def test_chain_round_trips_through_the_cache(chain_models, tmp_path):
    from cscore.scorers.store.cache import StatsCache, stats_key

    tok, main, asst = chain_models
    stats = chain_pass(tok, main, asst, digit_ids=digit_tokens(tok))
    cache = StatsCache(tmp_path)
    key = stats_key({"kind": "judge", "test": "chain"})
    cache.save(key, {"judge": stats}, {"kind": "judge"})
    back = cache.load(key, JudgeStats).stats["judge"]
    np.testing.assert_array_equal(back.chain_ids, stats.chain_ids)
    for who, c in (("main", 0.0), ("asst", 0.0), ("contrast", 0.5)):
        np.testing.assert_array_equal(back.expected(who, c), stats.expected(who, c))
