"""The statistics engine on tiny random llamas saved to a temp dir and loaded by path."""

import numpy as np
import pytest
import torch

from cscore import ModelPair
from cscore.scorers.engine import engine
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.models.models import early_exit, load_model

PROMPTS = [
    "Write an accurate, relevant, and coherent summary of the following texts:\n"
    "The mayor opened a new bridge.\nSummary:\n",
    "Write an accurate, relevant, and coherent summary of the following texts:\n"
    "The team won the final match after a late goal in extra time.\nSummary:\n",
    "Translate the following sentence to English:\nThe council said the bridge cost five million.\n",
    "Researchers found",
]
HYPS = ["A bridge was opened.", "The team won.", "The bridge cost five million and took two years to build.", " that"]


def naive_logprobs(model, tok, prompt, hyp):
    """Reference: full forward of one unpadded sequence, log_softmax over all positions."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    h = tok(hyp, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([p + h])).logits[0].double()
    lsm = logits.log_softmax(-1)
    return np.array([lsm[len(p) - 1 + j, h[j]].item() for j in range(len(h))])


@pytest.fixture(scope="module")
def pair64(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float64")


@pytest.fixture(scope="module")
def pair32(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32")


def test_statistics_match_a_plain_forward_pass(pair64):
    st = pair64.statistics(PROMPTS, HYPS, temperatures=(1.0,))
    for name, lm in pair64.models.items():
        for i, (p, h) in enumerate(zip(PROMPTS, HYPS)):
            want = naive_logprobs(lm.model, pair64.tokenizer, p, h)
            np.testing.assert_allclose(st.stats[name].lp(1.0)[st.stats[name].item(i)], want, atol=1e-10)


@pytest.mark.parametrize("pair_name", ["pair64", "pair32"])
def test_scores_do_not_depend_on_batching_order_or_padding(request, pair_name, f32):
    """float64: equal to 1e-9 whatever the batching. float32: the batch shape changes the
    summation order of every dot product, so the scores may differ by rounding, within the
    float32 tolerance of conftest.f32_tol (which scales with the tokens summed and with
    ContrastScore's amplification, read from the statistics), on any CPU."""
    pair = request.getfixturevalue(pair_name)
    ref = pair.statistics(PROMPTS, HYPS, token_budget=1, padding_side="right")  # one item per batch
    order = [2, 0, 3, 1]
    for budget in (64, 100000):
        for side in ("left", "right"):
            st = pair.statistics([PROMPTS[i] for i in order], [HYPS[i] for i in order], token_budget=budget,
                                 padding_side=side)
            for method, params in (("single", {}), ("single", {"model": "amateur"}), ("contrast", {}),
                                   ("ensemble", {}), ("contrast", {"norm": "mean"})):
                got = st.score(method, **params)
                want = ref.score(method, **params)[order]
                if pair_name == "pair64":
                    np.testing.assert_allclose(got, want, atol=1e-9, rtol=0)
                else:
                    f32.assert_close(got, want, st, method, **params)  # tolerance from st's statistics


def test_batches_respect_the_token_budget():
    lengths = [5, 9, 3, 9, 1, 7]
    batches = engine.make_batches(lengths, token_budget=18)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for b in batches:
        assert max(lengths[i] for i in b) * len(b) <= 18
    assert engine.make_batches([50], token_budget=10) == [[0]]  # an over-budget item runs alone


def test_early_exit_equals_the_truncated_model(tiny_dirs):
    from transformers import AutoModelForCausalLM

    full = load_model(tiny_dirs.expert, dtype="float64")
    view = early_exit(full, 2)
    truncated = AutoModelForCausalLM.from_pretrained(tiny_dirs.expert, num_hidden_layers=2, dtype=torch.float64)
    tok = full.tokenizer
    for p, h in zip(PROMPTS, HYPS):
        want = naive_logprobs(truncated, tok, p, h)
        np.testing.assert_allclose(naive_logprobs(view.model, tok, p, h), want, atol=1e-10)
    # through the pair: the amateur rides on the expert's pass (a layer tap), same numbers
    pair = ModelPair(full, view)
    st = pair.statistics(PROMPTS, HYPS, temperatures=(1.0,))
    assert list(st.reports) == ["expert+amateur"]
    for i, (p, h) in enumerate(zip(PROMPTS, HYPS)):
        np.testing.assert_allclose(st.stats["amateur"].lp(1.0)[st.stats["amateur"].item(i)],
                                   naive_logprobs(truncated, tok, p, h), atol=1e-10)
    # the expert itself is untouched by the view
    assert len(full.model.model.layers) == 4 and full.model.config.num_hidden_layers == 4
    assert early_exit(full, "auto").exit_layer == 1  # a third of 4 layers, rounded


def test_early_exit_rejects_bad_layer_counts(tiny_dirs):
    full = load_model(tiny_dirs.expert)
    with pytest.raises(ValueError, match="between 1 and 4"):
        early_exit(full, 9)


def test_vocabulary_mismatch_makes_a_cross_family_pair(tiny_dirs):
    assert ModelPair.load(tiny_dirs.expert, tiny_dirs.other).aligned
    assert not ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur).aligned


def test_truncation_cuts_the_source_never_the_hypothesis(pair32):
    source = " ".join(["The council said the bridge cost five million."] * 30)
    prompt = f"Summarize:\n{source}\nSummary:\n"
    span = (len("Summarize:\n"), len("Summarize:\n") + len(source))
    hyp = "The bridge cost five million."
    inputs = pair32.encode([prompt, "Summarize:\nshort.\nSummary:\n"], [hyp, hyp], max_length=60,
                           source_spans=[span, (11, 17)])
    item = inputs.items[0]
    assert item.truncated and not inputs.items[1].truncated and inputs.n_truncated == 1
    assert item.length <= 60
    assert item.prompt.startswith("Summarize:\nThe council") and item.prompt.endswith("\nSummary:\n")
    assert item.hyp_ids == pair32.tokenizer(hyp, add_special_tokens=False)["input_ids"]
    # what was scored is exactly the tokenization of the recorded prompt string
    assert item.prompt_ids == pair32.tokenizer(item.prompt, add_special_tokens=False)["input_ids"]


def test_bad_inputs_are_clear_errors(pair32):
    with pytest.raises(InputError, match="item 1: empty hypothesis"):
        pair32.encode(["a", "b"], ["fine", "  "])
    with pytest.raises(InputError, match="hypothesis alone has"):
        pair32.encode(["a"], ["word " * 50], max_length=10)
    with pytest.raises(InputError, match="no source span"):
        pair32.encode(["word " * 50], ["ok"], max_length=10)
    with pytest.raises(ValueError, match="2 prompts but 1 hypotheses"):
        pair32.encode(["a", "b"], ["c"])


def test_scoring_runs_without_gradients(pair32):
    st = pair32.statistics(PROMPTS[:1], HYPS[:1])
    assert isinstance(st.stats["expert"].logp, np.ndarray)
    assert not any(p.requires_grad for p in pair32.expert.model.parameters())
    table = st.tokens(0, tokenizer=pair32.tokenizer)
    assert list(table.columns) == ["token_id", "token", "logp.expert", "logp_max.expert", "logp.amateur",
                                   "logp_max.amateur"]
    assert (table["logp.expert"] <= table["logp_max.expert"] + 1e-12).all()


def test_one_call_score_api(pair32, f32):
    full = pair32.score(PROMPTS, HYPS, method="contrast", gamma=0.2, t_exp=0.5, t_ama=1.5)
    st = pair32.statistics(PROMPTS, HYPS)
    # float32, two passes (other cached temperatures): equal up to float32 rounding
    f32.assert_close(full, st.score("contrast", gamma=0.2), st, "contrast", gamma=0.2)
