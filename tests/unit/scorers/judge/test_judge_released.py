"""cd_judge_released (scorers/judge/released.py): the released CD-judge scoring step against
hand-computed values, greedy decoding on a toy bigram LM whose logits the tests choose (hand-
computed token by token), and on the tiny random llamas against a full-recompute reference, HF
greedy generation, batch size 1 and a model truncated to k layers."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from cscore.errors import ConfigError
from cscore.scorers.judge import released as jr
from cscore.scorers.methods.cd_judge_released import CdJudgeReleasedParams as Params

CALL = ("lam", "t", "rules", "asst_exit_layer", "return_first_scores")  # jr.decode's own; the rest: Decoding's


def how_of(kw: dict) -> dict:
    """``kw`` as ``jr.decode``'s keywords: its own, and the rest as its ``Decoding``."""
    return {**{k: kw[k] for k in CALL if k in kw}, "how": jr.Decoding(**{k: v for k, v in kw.items() if k not in CALL})}


def decode(model, prompts, first=None, **kw):
    return jr.decode(model, prompts, first, **how_of(kw))


def decode_tree(model, prompts, first=None, **kw):
    return jr.decode_tree(model, prompts, first, **how_of(kw))


NEG_INF = -math.inf


def logs(ps):
    return [math.log(p) for p in ps]


def t2(rows):
    return torch.tensor(rows, dtype=torch.float64)


# --- relative_top_scores: hand-computed -----------------------------------------------------------


def test_alpha_set_larger_than_top_min_keep():
    """p_main = (.5, .3, .15, .04, .01): alpha = 0.1 keeps p >= .05 -> {0, 1, 2}; top-2 is {0, 1};
    the larger set wins. Scores log(p/q) with q = (.1, .6, .1, .1, .1), lam = 1."""
    main, asst = t2([logs([.5, .3, .15, .04, .01])]), t2([logs([.1, .6, .1, .1, .1])])
    got = jr.relative_top_scores(main, asst, lam=1.0, t=1.0, alpha=0.1, min_keep=2)[0].tolist()
    want = [math.log(5.0), math.log(0.5), math.log(1.5), NEG_INF, NEG_INF]
    assert got[3] == NEG_INF and got[4] == NEG_INF
    assert got[:3] == pytest.approx(want[:3], abs=1e-12)
    assert int(torch.tensor(got).argmax()) == 0  # the main model's argmax too here


def test_top_min_keep_larger_than_alpha_set():
    """p_main = (.9, .05, .03, .015, .005): alpha keeps only {0} (p >= .09); min_keep = 3 keeps
    {0, 1, 2}. lam = 0.5: score = log p - 0.5 log q."""
    p, q = [.9, .05, .03, .015, .005], [.2, .1, .5, .1, .1]
    got = jr.relative_top_scores(t2([logs(p)]), t2([logs(q)]), lam=0.5, t=1.0, alpha=0.1, min_keep=3)[0].tolist()
    want = [math.log(p[i]) - 0.5 * math.log(q[i]) for i in range(3)]
    assert got[:3] == pytest.approx(want, abs=1e-12)
    assert got[3:] == [NEG_INF, NEG_INF]
    # min_keep = 1: the alpha set {0} alone
    one = jr.relative_top_scores(t2([logs(p)]), t2([logs(q)]), lam=0.5, t=1.0, alpha=0.1, min_keep=1)[0]
    assert torch.isneginf(one[1:]).all() and one[0].item() == pytest.approx(want[0], abs=1e-12)


def test_ties_with_the_min_keep_th_value_are_all_kept():
    """p = (.4, .18, .18, .18, .06), alpha = 0.9 (threshold .36: {0}), min_keep = 2: the 2nd value
    is .18, held by three tokens; all three are kept (the code compares with sorted[k-1])."""
    p = [.4, .18, .18, .18, .06]
    main_lp, _ = jr.relative_top_filter(t2([logs(p)]), t2([logs([.2] * 5)]), t=1.0, alpha=0.9, min_keep=2)
    kept = torch.isfinite(main_lp[0]).tolist()
    assert kept == [True, True, True, True, False]


def test_temperature_divides_the_main_model_only():
    """t = 2 on the main model: p' = sqrt(p) / sum sqrt(p) = (.364, .282, .199, .103, .0515), so all
    five pass alpha = 0.1 (.0515 >= .0364), where at t = 1 tokens 3 and 4 were filtered. The
    assistant is NOT tempered: its log q enters as is."""
    p, q = [.5, .3, .15, .04, .01], [.1, .6, .1, .1, .1]
    z = sum(math.sqrt(x) for x in p)
    want = [math.log(math.sqrt(p[i]) / z) - math.log(q[i]) for i in range(5)]
    got = jr.relative_top_scores(t2([logs(p)]), t2([logs(q)]), lam=1.0, t=2.0, alpha=0.1, min_keep=2)[0].tolist()
    assert got == pytest.approx(want, abs=1e-12)
    assert want[0] == pytest.approx(math.log(0.7071068 / 1.9421277) - math.log(0.1), abs=1e-6)  # by hand
    # the paper's Eq. 1 would temper the assistant instead: a different answer
    paper = [math.log(p[i]) - math.log(math.sqrt(q[i]) / sum(math.sqrt(x) for x in q)) for i in range(3)]
    assert got[:3] != pytest.approx(paper, abs=1e-3)


def test_the_assistant_is_log_softmaxed_and_filtered_to_minus_1e_3():
    """Raw assistant logits (log q + 7) give the same scores as log q; filtered tokens carry -1e-3
    for the assistant, -inf for the main model."""
    p, q = [.5, .3, .15, .04, .01], [.1, .6, .1, .1, .1]
    main_lp, asst_lp = jr.relative_top_filter(t2([logs(p)]), t2([[v + 7.0 for v in logs(q)]]), t=1.0, alpha=0.1,
                                              min_keep=2)
    assert asst_lp[0].tolist()[:3] == pytest.approx(logs(q)[:3], abs=1e-12)
    assert asst_lp[0].tolist()[3:] == [-1e-3, -1e-3]
    assert main_lp[0].tolist()[3:] == [NEG_INF, NEG_INF]
    assert main_lp[0].tolist()[:3] == pytest.approx(logs(p)[:3], abs=1e-12)


def test_rows_are_filtered_separately_and_float32_is_the_default_dtype():
    rows = torch.tensor([logs([.5, .3, .15, .04, .01]), logs([.9, .05, .03, .015, .005])], dtype=torch.bfloat16)
    out = jr.relative_top_scores(rows, torch.zeros(2, 5), lam=1.0, t=1.0, alpha=0.1, min_keep=2)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).tolist() == [[True, True, True, False, False], [True, True, False, False, False]]


def test_bad_parameters_are_config_errors():
    x = torch.zeros(1, 5)
    for kwargs, match in (({"min_keep": 6}, "min_keep"), ({"min_keep": 0}, "min_keep"), ({"t": 0.0}, "t must"),
                          ({"alpha": 1.5}, "alpha"), ({"lam": math.inf}, "lam")):
        args = dict(lam=1.0, t=1.0, alpha=0.1, min_keep=2) | kwargs
        with pytest.raises(ConfigError, match=match):
            jr.relative_top_scores(x, x, **args)
    with pytest.raises(ValueError, match=r"\[B, V\]"):
        jr.relative_top_scores(x, torch.zeros(1, 4), lam=1.0, t=1.0, min_keep=2)


def test_repetition_penalty_divides_positive_and_multiplies_negative_scores():
    scores = torch.tensor([[2.0, -1.0, 0.0, -math.inf, 3.0]])
    seen = torch.tensor([[True, True, True, True, False]])
    assert jr.apply_repetition_penalty(scores, seen, 2.0).tolist() == [[1.0, -2.0, 0.0, NEG_INF, 3.0]]
    assert jr.apply_repetition_penalty(scores, seen, 1.0) is scores


# --- decode on a toy bigram with a KV "cache" -------------------------------------------------------
#
# Tokens 0..4, 0 = EOS (and the pad id). Main next-token probabilities by previous token:
MAIN = {
    0: [.2, .2, .2, .2, .2],
    1: [.04, .06, .34, .06, .5],
    2: [.1, .3, .04, .06, .5],
    3: [.02, .5, .3, .15, .03],
    4: [.45, .5, .01, .02, .02],
}
Q = [.1, .6, .1, .1, .1]  # the assistant's fixed step-1 distribution
# With lam = 1, t = 1, alpha = 0.1, min_keep = 2 (score = log p - log q on the kept tokens):
#   after 3: keep {1, 2, 3} (p >= .05): log(.5/.6) = -.18, log(.3/.1) = 1.10, log(.15/.1) = .41 -> 2
#   after 2: keep {0, 1, 3, 4} (.04 < .05 goes): 0, -.69, -.51, log 5 = 1.61               -> 4
#   after 4: keep {0, 1}: log 4.5 = 1.50, -.18                                              -> 0 (EOS)
#   after 1: keep {1, 2, 3, 4}: -2.30, log 3.4 = 1.22, -.51, log 5 = 1.61                   -> 4
# The main model alone (uniform assistant) goes 3 -> 1 -> 4 -> 1 -> 4 ... and never ends.


class CachedToyBase(nn.Module):
    """The toy's decoder: hidden state = one-hot of the current token; the "cache" is the number
    of tokens seen, checked against the attention mask. Records every call."""

    def __init__(self, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, vocab)
        with torch.no_grad():
            self.embed.weight.copy_(torch.eye(vocab))
        self.calls = []

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False):
        seen = (past_key_values or 0) + input_ids.shape[1]
        assert attention_mask.shape == (input_ids.shape[0], seen)
        self.calls.append(SimpleNamespace(ids=input_ids.tolist(), mask=attention_mask.tolist(),
                                          pos=position_ids.tolist(), cached=past_key_values))
        return SimpleNamespace(last_hidden_state=self.embed(input_ids), past_key_values=seen if use_cache else None)


@pytest.fixture
def toy(toy_bigram):
    table = torch.tensor([logs(MAIN[i]) for i in range(5)])
    model = toy_bigram(table)
    model.model = CachedToyBase(5)
    return model


def run(model, prompts, asst_rows, **kwargs):
    args = dict(lam=1.0, t=1.0, alpha=0.1, min_keep=2, max_new_tokens=10, eos_ids={0}, pad_id=0) | kwargs
    return decode(model, prompts, torch.tensor([logs(q) for q in asst_rows]), **args)


def test_toy_greedy_steps_equal_the_hand_computation(toy):
    prompts = [[3], [1], [2, 1, 4], [4, 2]]
    assert run(toy, prompts, [Q] * 4) == [[2, 4], [4], [], [4]]
    calls = toy.model.calls
    assert len(calls) == 3  # prefill + 2 steps; row 0 ends at step 3 (its EOS), nothing runs after
    # left padding, mask and positions of the prefill
    assert calls[0].ids == [[0, 0, 3], [0, 0, 1], [2, 1, 4], [0, 4, 2]]
    assert calls[0].mask == [[0, 0, 1], [0, 0, 1], [1, 1, 1], [0, 1, 1]]
    assert calls[0].pos == [[0, 0, 0], [0, 0, 0], [0, 1, 2], [0, 0, 1]]
    assert calls[0].cached is None
    # then one token per row through the cache; finished rows get their EOS, then the pad id
    assert [c.ids for c in calls[1:]] == [[[2], [4], [0], [4]], [[4], [0], [0], [0]]]
    assert [c.pos for c in calls[1:]] == [[[1], [1], [3], [2]], [[2], [2], [4], [3]]]
    assert [c.cached for c in calls[1:]] == [3, 4]
    assert calls[2].mask[0] == [0, 0, 1, 1, 1]


def test_toy_batch_equals_one_by_one(toy):
    prompts = [[3], [1], [2, 1, 4], [4, 2]]
    assert run(toy, prompts, [Q] * 4) == [run(toy, [p], [Q])[0] for p in prompts]


def test_toy_the_assistant_is_per_row_and_fixed(toy):
    """Row 1 has a uniform assistant: plain greedy of the main model (filtered), 1, 4, 1, 4, ...;
    row 0 the hand-computed contrast. The same step-1 assistant row serves every step."""
    got = run(toy, [[3], [3]], [Q, [.2] * 5], max_new_tokens=5)
    assert got == [[2, 4], [1, 4, 1, 4, 1]]
    assert len(toy.model.calls) == 5


def test_toy_max_new_tokens(toy):
    assert run(toy, [[3]], [Q], max_new_tokens=2) == [[2, 4]]  # cut before its EOS
    assert len(toy.model.calls) == 2  # no pass after the last token
    assert run(toy, [[3]], [Q], max_new_tokens=1) == [[2]]
    toy.model.calls.clear()
    assert run(toy, [[3]], [Q], max_new_tokens=0) == [[]]
    assert toy.model.calls == []


def test_toy_eos_ids_are_a_set_and_not_returned(toy):
    assert run(toy, [[3]], [Q], eos_ids={0, 4}) == [[2]]  # 4 ends it now
    # no EOS: 0 is an ordinary token; after 0 the main model is uniform, all kept, scores
    # log .2 - log q: the four q = .1 tie exactly at log 2 and argmax takes the first, 0
    assert run(toy, [[3]], [Q], eos_ids=set(), max_new_tokens=5) == [[2, 4, 0, 0, 0]]


def test_toy_first_step_scores_are_returned(toy):
    ids, first = run(toy, [[3]], [Q], return_first_scores=True)
    assert ids == [[2, 4]]
    want = [NEG_INF, math.log(.5 / .6), math.log(3.0), math.log(1.5), NEG_INF]
    assert first[0, [0, 4]].tolist() == [NEG_INF, NEG_INF]
    assert first[0, 1:4].tolist() == pytest.approx(want[1:4], abs=1e-6)


def test_toy_repetition_penalty_over_prompt_generated_and_pad_ids(toy):
    """penalty 2, prompt [4, 1]: after 1, token 4 was seen: log 5 / 2 = .80 < log 3.4 = 1.22 -> 2
    (without the penalty: 4); after 2: 4 -> .80 still best; after 4: 0 unseen -> EOS."""
    assert run(toy, [[4, 1]], [Q]) == [[4]]
    assert run(toy, [[4, 1]], [Q], repetition_penalty=2.0) == [[2, 4]]
    # the released code penalises the left-padding ids too (pad 4 here): [1] padded next to a
    # longer prompt behaves like [4, 1]; alone it does not
    assert run(toy, [[1]], [Q], repetition_penalty=2.0, pad_id=4) == [[4]]
    assert run(toy, [[2, 1], [1]], [Q, Q], repetition_penalty=2.0, pad_id=4) == [[4], [2, 4]]


def test_toy_first_step_logprobs_and_its_penalty(toy):
    got = jr.first_step_logprobs(toy, [[4, 1], [3]], pad_id=0)
    assert got[0].tolist() == pytest.approx(logs(MAIN[1]), abs=1e-6)
    assert got[1].tolist() == pytest.approx(logs(MAIN[3]), abs=1e-6)
    assert toy.model.calls[-1].cached is None
    # penalty 2 over the padded prompt ids {4, 1} (row 0) and {0 (pad), 3} (row 1); all logits < 0: doubled
    pen = jr.first_step_logprobs(toy, [[4, 1], [3]], pad_id=0, repetition_penalty=2.0)
    for row, last, seen in ((0, 1, {1, 4}), (1, 3, {0, 3})):
        z = [v * 2 if i in seen else v for i, v in enumerate(logs(MAIN[last]))]
        lse = math.log(sum(math.exp(v) for v in z))
        assert pen[row].tolist() == pytest.approx([v - lse for v in z], abs=1e-6)
    # a cut vocabulary (the released Qwen runs: len(tokenizer))
    cut = jr.first_step_logprobs(toy, [[3]], pad_id=0, vocab_size=4)
    p = MAIN[3][:4]
    assert cut[0].tolist() == pytest.approx([math.log(x / sum(p)) for x in p], abs=1e-6)


def test_toy_argument_errors(toy):
    with pytest.raises(ValueError, match="exactly one"):
        decode(toy, [[3]], lam=1.0, t=1.0, eos_ids={0}, pad_id=0, min_keep=2)
    with pytest.raises(ValueError, match="vocabularies differ"):
        run(toy, [[3]], [Q], vocab_size=4)
    with pytest.raises(ConfigError, match="min_keep"):
        run(toy, [[3]], [Q], min_keep=1000)  # the released default needs a vocabulary of >= 1000
    with pytest.raises(ValueError, match="empty"):
        run(toy, [[3], []], [Q, Q])


# --- the tiny random llamas (float64: greedy choices must agree exactly) ---------------------------

TEXTS = [
    "Write an accurate, relevant, and coherent summary of the following texts:\nThe mayor opened a new bridge.",
    "The team won",
    "Researchers found that the new vaccine protects most patients from the virus. Summary:",
    "The council said",
]
KW = dict(lam=0.7, t=1.5, alpha=0.1, min_keep=20)  # min_keep below the tiny vocabulary of 400


@pytest.fixture(scope="module")
def tiny(tiny_dirs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def load(path, **kw):
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, **kw)
        return model.eval().requires_grad_(False)

    tok = AutoTokenizer.from_pretrained(tiny_dirs.expert)
    prompts = [tok(s, add_special_tokens=False)["input_ids"] for s in TEXTS]
    assert len({len(p) for p in prompts}) == len(prompts)  # mixed lengths: real left padding
    return SimpleNamespace(main=load(tiny_dirs.expert), asst=load(tiny_dirs.amateur),
                           cut=load(tiny_dirs.expert, num_hidden_layers=2), tok=tok, prompts=prompts,
                           pad=tok.pad_token_id)


def naive_last_logprobs(model, prompt):
    """One unpadded sequence, full forward through the HF causal LM, last position."""
    with torch.no_grad():
        return model(torch.tensor([prompt])).logits[0, -1].double().log_softmax(-1)


def naive_decode(model, prompt, asst, *, eos_ids, max_new_tokens, **kw):
    """Reference: no cache, no padding, the whole sequence re-run through the HF model each step."""
    seq, out = list(prompt), []
    for _ in range(max_new_tokens):
        with torch.no_grad():
            logits = model(torch.tensor([seq])).logits[:, -1].double()
        token = int(jr.relative_top_scores(logits, asst[None], **kw).argmax())
        if token in eos_ids:
            break
        out.append(token)
        seq.append(token)
    return out


def test_first_step_logprobs_of_a_separate_assistant_and_of_an_early_exit(tiny):
    batch = jr.first_step_logprobs(tiny.asst, tiny.prompts, pad_id=tiny.pad)
    early = jr.first_step_logprobs(tiny.main, tiny.prompts, pad_id=tiny.pad, exit_layer=2)
    for i, p in enumerate(tiny.prompts):
        torch.testing.assert_close(batch[i], naive_last_logprobs(tiny.asst, p), atol=1e-10, rtol=0)
        torch.testing.assert_close(early[i], naive_last_logprobs(tiny.cut, p), atol=1e-10, rtol=0)
    assert not torch.allclose(early, jr.first_step_logprobs(tiny.main, tiny.prompts, pad_id=tiny.pad), atol=1e-3)
    cut = jr.first_step_logprobs(tiny.asst, tiny.prompts[:1], pad_id=tiny.pad, vocab_size=300)
    with torch.no_grad():
        logits = tiny.asst(torch.tensor([tiny.prompts[0]])).logits[0, -1, :300].double()
    torch.testing.assert_close(cut[0], logits.log_softmax(-1), atol=1e-10, rtol=0)
    with pytest.raises(ConfigError, match="between 1 and 4"):
        jr.first_step_logprobs(tiny.main, tiny.prompts, pad_id=tiny.pad, exit_layer=5)


@pytest.mark.slow
def test_decode_equals_a_full_recompute_and_batch_size_one(tiny):
    asst = jr.first_step_logprobs(tiny.asst, tiny.prompts, pad_id=tiny.pad)
    widths = []
    hook = tiny.main.model.embed_tokens.register_forward_hook(lambda m, args, out: widths.append(args[0].shape))
    try:
        free = decode(tiny.main, tiny.prompts, asst, max_new_tokens=8, eos_ids=set(), pad_id=tiny.pad, **KW)
    finally:
        hook.remove()
    width = max(len(p) for p in tiny.prompts)
    assert widths == [(4, width)] + [(4, 1)] * 7  # the prompt once, then one token per row through the cache
    want = [naive_decode(tiny.main, p, asst[i], eos_ids=set(), max_new_tokens=8, **KW)
            for i, p in enumerate(tiny.prompts)]
    assert free == want and all(len(w) == 8 for w in want)
    # the assistant matters: lam = 0 decodes differently for some prompt
    plain = decode(tiny.main, tiny.prompts, asst, max_new_tokens=8, eos_ids=set(), pad_id=tiny.pad,
                      **(KW | {"lam": 0.0}))
    assert plain != free
    # an EOS that some rows meet (the 3rd token of row 0): rows stop at different steps
    eos = {free[0][2]}
    stopped = decode(tiny.main, tiny.prompts, asst, max_new_tokens=8, eos_ids=eos, pad_id=tiny.pad, **KW)
    for row, full in zip(stopped, free):
        assert row == (full[:full.index(free[0][2])] if free[0][2] in full else full)
    assert len(stopped[0]) == 2
    assert stopped == [decode(tiny.main, [p], asst[i:i + 1], max_new_tokens=8, eos_ids=eos, pad_id=tiny.pad,
                                 **KW)[0] for i, p in enumerate(tiny.prompts)]


def test_decode_with_lam_0_is_hf_greedy_generation(tiny):
    """lam = 0 leaves the main model's filtered log-probs, whose argmax is the main model's: the
    same tokens as transformers' own greedy generate with left padding."""
    asst = torch.zeros(len(tiny.prompts), 400, dtype=torch.float64)
    got = decode(tiny.main, tiny.prompts, asst, max_new_tokens=6, eos_ids=set(), pad_id=tiny.pad,
                    **(KW | {"lam": 0.0}))
    width = max(len(p) for p in tiny.prompts)
    ids = torch.tensor([[tiny.pad] * (width - len(p)) + p for p in tiny.prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in tiny.prompts])
    with torch.no_grad():
        seqs = tiny.main.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, min_new_tokens=6,
                                  do_sample=False, pad_token_id=tiny.pad)
    assert got == seqs[:, width:].tolist()


@pytest.mark.slow
def test_early_exit_assistant_equals_the_truncated_model(tiny):
    """asst_exit_layer = 2 (read from the main model's own prefill) decodes as the 2-layer model's
    step-1 log-probs passed in, with the same contrasted step-1 scores."""
    via_tap, first_tap = decode(tiny.main, tiny.prompts, asst_exit_layer=2, max_new_tokens=8, eos_ids=set(),
                                   pad_id=tiny.pad, return_first_scores=True, **KW)
    asst = torch.stack([naive_last_logprobs(tiny.cut, p) for p in tiny.prompts])
    passed, first = decode(tiny.main, tiny.prompts, asst, max_new_tokens=8, eos_ids=set(), pad_id=tiny.pad,
                              return_first_scores=True, **KW)
    assert via_tap == passed
    torch.testing.assert_close(first_tap, first, atol=1e-10, rtol=0)
    assert via_tap == [naive_decode(tiny.main, p, asst[i], eos_ids=set(), max_new_tokens=8, **KW)
                       for i, p in enumerate(tiny.prompts)]
    assert len(tiny.main.model.layers) == 4 and not tiny.main.model.layers[1]._forward_hooks  # tap removed


# --- the text around it ------------------------------------------------------------------------------


def test_released_prompt_ids_double_bos_and_right_truncation(tiny_dirs):
    """A template that writes the BOS itself, and a tokenizer that adds one (as Llama-3's does):
    two BOS. Truncation keeps the first max_length ids. No generation prompt by default."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dirs.expert)
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}"
                         "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
    tok._tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    bos, eos = tok.bos_token_id, tok.eos_token_id
    body = tok("[system]The team won", add_special_tokens=False)["input_ids"]
    ids = jr.released_prompt_ids(tok, "The team won")
    assert ids == [bos, bos] + body + [eos]
    assert jr.released_prompt_ids(tok, "The team won", max_length=5) == ids[:5]
    user = jr.released_prompt_ids(tok, "The team won", role="user", add_generation_prompt=True)
    assert user[-len(tok("[assistant]", add_special_tokens=False)["input_ids"]):] == \
        tok("[assistant]", add_special_tokens=False)["input_ids"]
    assert tok.decode(user, skip_special_tokens=True).startswith("[user]")


def test_released_text_drops_special_tokens_and_every_assistant(tiny_dirs):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dirs.expert)
    ids = [tok.bos_token_id] + tok("assistant\n\n 4 - the assistant said", add_special_tokens=False)["input_ids"]
    ids += [tok.eos_token_id, tok.pad_token_id]
    assert jr.released_text(tok, ids) == "4 - the  said"


@pytest.mark.parametrize("penalty", [1.0, 1.3])
def test_decode_tree_equals_decode_per_rule_with_one_prefill(tiny, penalty):
    """Several (λ, t) rules decoded as one tree give each rule's own ``decode`` paths; the prompts
    go through the model once, and every later forward is one token per distinct path."""
    asst = jr.first_step_logprobs(tiny.asst, tiny.prompts, pad_id=tiny.pad, repetition_penalty=penalty)
    rules = [(0.0, 1.0), (0.7, 1.5), (1.0, 0.5), (0.01, 5.0)]
    common = dict(alpha=0.1, min_keep=20, max_new_tokens=8, pad_id=tiny.pad, repetition_penalty=penalty)
    free = [decode(tiny.main, tiny.prompts, asst, lam=lam, t=t, eos_ids=set(), **common) for lam, t in rules]
    eos = {free[1][0][3]}  # some paths meet it, at different steps
    want = [decode(tiny.main, tiny.prompts, asst, lam=lam, t=t, eos_ids=eos, **common) for lam, t in rules]
    assert len({str(w) for w in want}) > 1  # the rules decode differently
    widths = []
    hook = tiny.main.model.embed_tokens.register_forward_hook(lambda m, args, o: widths.append(tuple(args[0].shape)))
    try:
        got = decode_tree(tiny.main, tiny.prompts, asst, rules=rules, eos_ids=eos, **common)
    finally:
        hook.remove()
    assert got == want
    width = max(len(p) for p in tiny.prompts)
    assert widths[0] == (len(tiny.prompts), width) and all(w[1] == 1 for w in widths[1:])  # one prefill
    for step, (n_rows, _) in enumerate(widths[1:], start=1):  # a row per distinct unfinished path prefix
        prefixes = {(i, tuple(w[i][:step])) for w in want for i in range(len(tiny.prompts)) if len(w[i]) >= step
                    and not (len(w[i]) == step and step == 8)}
        assert n_rows == len(prefixes)
    # the main model alone is rule (0, 1): decode with the assistant term 0
    alone = decode(tiny.main, tiny.prompts, torch.zeros_like(asst), lam=0.0, t=1.0, eos_ids=eos, **common)
    assert got[0] == alone


def test_decode_tree_with_an_early_exit_assistant(tiny):
    rules = [(0.0, 1.0), (0.7, 1.5)]
    common = dict(alpha=0.1, min_keep=20, max_new_tokens=6, pad_id=tiny.pad, eos_ids=set(), asst_exit_layer=2)
    want = [decode(tiny.main, tiny.prompts, lam=lam, t=t, **common) for lam, t in rules]
    assert decode_tree(tiny.main, tiny.prompts, rules=rules, **common) == want


def test_grid_decodes_the_main_and_assistant_rows_once(tiny, tmp_path):
    """Three (λ, t) points through the kind's decode (statistics cache on): the main-alone and
    assistant-alone rows are decoded by the first point only (later points read them), the first
    point's main-alone and contrast rows share one prefill (a tree); every row equals a step-by-step
    recomputation without cache or padding. Prefills counted on each model's embedding."""
    from types import SimpleNamespace as NS

    from cscore.run.kinds.judge_released import decode_rows
    from cscore.scorers.store.cache import StatsCache

    pair = NS(expert=NS(model=tiny.main, config=tiny.main.config, parent=None),
              amateur=NS(model=tiny.asst, parent=None, exit_layer=None), tokenizer=tiny.tok)
    plan = NS(variants=[NS(name="expert", who="main"), NS(name="amateur", who="asst"),
                        NS(name="cd", who="contrast")])
    params = Params(alpha=0.1, min_keep=20, max_new_tokens=5, batch_size=2, repetition_penalty=None,
                    max_prompt_tokens=2048)
    prefills = {"main": 0, "asst": 0}
    hooks = [m.model.embed_tokens.register_forward_hook(
        lambda mod, args, o, who=who: prefills.__setitem__(who, prefills[who] + (args[0].shape[1] > 1)))
        for who, m in (("main", tiny.main), ("asst", tiny.asst))]
    cache, got, counts = StatsCache(tmp_path), {}, []
    try:
        for lam, t in ((0.5, 1.0), (1.0, 1.0), (0.5, 2.0)):
            got[lam, t], _, also = decode_rows(pair, tiny.prompts, plan, replace(params, lam=lam, t=t), cache,
                                               {"ids": "tiny prompts"}, None)
            assert also == []
            counts.append(dict(prefills))
    finally:
        for h in hooks:
            h.remove()
    batches = 2  # 4 prompts, 2 per batch
    # point 1: main and contrast in one tree; the assistant's first step and the assistant alone
    assert counts[0] == {"main": batches, "asst": 2 * batches}
    # each later point: the contrast only (its own prefill, the assistant's first step)
    assert counts[2] == {"main": 3 * batches, "asst": 4 * batches}
    assert [got[k]["expert"][1] for k in got] == [False, True, True]
    assert [got[k]["amateur"][1] for k in got] == [False, True, True]
    asst = jr.first_step_logprobs(tiny.asst, tiny.prompts, pad_id=tiny.pad)
    kw = dict(alpha=0.1, min_keep=20, eos_ids={tiny.main.generation_config.eos_token_id}, max_new_tokens=5)
    for (lam, t), rows in got.items():
        assert rows["cd"][0] == [naive_decode(tiny.main, p, asst[i], lam=lam, t=t, **kw)
                                 for i, p in enumerate(tiny.prompts)]
        assert rows["expert"][0] == [naive_decode(tiny.main, p, asst[i], lam=0.0, t=1.0, **kw)
                                     for i, p in enumerate(tiny.prompts)]
        assert rows["amateur"][0] == [naive_decode(tiny.asst, p, asst[i], lam=0.0, t=1.0, **kw)
                                      for i, p in enumerate(tiny.prompts)]
    assert got[0.5, 1.0]["cd"][0] != got[0.5, 1.0]["expert"][0]  # the contrast decodes otherwise


def test_grid_points_join_the_first_jobs_tree(tiny, tmp_path):
    """With its sweep's other (λ, t) points given, the first point decodes every contrast row in
    one tree (one prefill per batch on the main model) and stores them; the later points read all
    their rows from the cache (no forward at all) and equal a step-by-step recomputation. A point
    whose contrast is cached does not decode the others."""
    from types import SimpleNamespace as NS

    from cscore.run.kinds.judge_released import decode_rows
    from cscore.scorers.store.cache import StatsCache

    pair = NS(expert=NS(model=tiny.main, config=tiny.main.config, parent=None),
              amateur=NS(model=tiny.asst, parent=None, exit_layer=None), tokenizer=tiny.tok)
    plan = NS(variants=[NS(name="expert", who="main"), NS(name="cd", who="contrast")])
    params = Params(alpha=0.1, min_keep=20, max_new_tokens=5, batch_size=2, repetition_penalty=None,
                    max_prompt_tokens=2048)
    grid = [(0.5, 1.0), (1.0, 1.0), (0.5, 2.0), (3.0, 0.5)]
    prefills = {"main": 0}
    hook = tiny.main.model.embed_tokens.register_forward_hook(
        lambda mod, args, o: prefills.__setitem__("main", prefills["main"] + 1))
    cache, got, also, calls = StatsCache(tmp_path), {}, {}, []
    try:
        for lam, t in grid:
            got[lam, t], _, also[lam, t] = decode_rows(pair, tiny.prompts, plan, replace(params, lam=lam, t=t), cache,
                                                       {"ids": "tiny prompts"}, None, grid)
            calls.append(prefills["main"])
    finally:
        hook.remove()
    assert also[0.5, 1.0] == [[1.0, 1.0], [0.5, 2.0], [3.0, 0.5]]
    assert calls[0] > 0 and calls[1:] == [calls[0]] * 3  # the later points ran nothing
    assert [got[k]["cd"][1] for k in grid] == [False, True, True, True]
    # a row read from the cache reports the seconds of the tree that stored it
    assert {got[k]["cd"][2] for k in grid} == {got[0.5, 1.0]["cd"][2]} and got[0.5, 1.0]["cd"][2] > 0
    asst = jr.first_step_logprobs(tiny.asst, tiny.prompts, pad_id=tiny.pad)
    kw = dict(alpha=0.1, min_keep=20, eos_ids={tiny.main.generation_config.eos_token_id}, max_new_tokens=5)
    for (lam, t), rows in got.items():
        assert rows["cd"][0] == [naive_decode(tiny.main, p, asst[i], lam=lam, t=t, **kw)
                                 for i, p in enumerate(tiny.prompts)]
    assert len({str(rows["cd"][0]) for rows in got.values()}) > 1  # the points decode differently
    # a point whose own rows are cached decodes nothing for the others
    fresh = StatsCache(tmp_path / "fresh")
    for (lam, t), rows in got.items():
        if (lam, t) != (3.0, 0.5):
            decode_rows(pair, tiny.prompts, plan, replace(params, lam=lam, t=t), fresh, {"ids": "tiny prompts"},
                        None)
    _, _, none = decode_rows(pair, tiny.prompts, plan, replace(params, lam=0.5, t=1.0), fresh,
                             {"ids": "tiny prompts"}, None, grid)
    assert none == []


def test_grid_points_that_do_not_fit_leave_this_points_rows_alone(tiny, tmp_path, monkeypatch, caplog):
    """Out of memory in the grid's tree (injected into decode_tree with more than two rules): one
    warning, this point's rows decoded alone and equal to a run without the grid, nothing stored for
    the other points."""
    from types import SimpleNamespace as NS

    from cscore.run.kinds.judge_released import decode_rows
    from cscore.scorers.store.cache import StatsCache

    pair = NS(expert=NS(model=tiny.main, config=tiny.main.config, parent=None),
              amateur=NS(model=tiny.asst, parent=None, exit_layer=None), tokenizer=tiny.tok)
    plan = NS(variants=[NS(name="expert", who="main"), NS(name="cd", who="contrast")])
    params = Params(alpha=0.1, min_keep=20, max_new_tokens=4, batch_size=2, repetition_penalty=None, lam=0.5, t=1.0)
    real = jr.decode_tree

    def small_device(model, prompts, first=None, *, rules, **kw):
        if len(rules) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model, prompts, first, rules=rules, **kw)

    monkeypatch.setattr(jr, "decode_tree", small_device)
    cache = StatsCache(tmp_path / "c")
    got, _, also = decode_rows(pair, tiny.prompts, plan, params, cache, {"ids": "p"}, None, [(1.0, 1.0), (2.0, 0.5)])
    assert also == [] and "out of memory decoding 2 other grid points" in caplog.text
    want, _, _ = decode_rows(pair, tiny.prompts, plan, params, None, {"ids": "p"}, None)
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
    assert len([d for d in cache.root.iterdir() if not d.name.startswith(".")]) == 2  # this point's two rows
