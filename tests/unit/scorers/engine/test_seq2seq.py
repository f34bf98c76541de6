"""Encoder-decoder (seq2seq) scoring: tiny random T5 and BART models built here (nothing is
downloaded). The engine's per-token statistics against an independent float64 computation
(the model's own forward, one item at a time); invariance to batching, token budget, item order
and encoder sharing; T5's output scaling and BART's final_logits_bias; the seq2seq tokenization
(special tokens, EOS, truncation); loading, pair checks and early-exit refusal; the pair and prompt
configs; `cscore run prompt=seq2seq` end to end with the statistics cache."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import cscore
from cscore.errors import ConfigError
from cscore.scorers import methods
from cscore.scorers.api import ModelPair
from cscore.scorers.engine import engine, seq2seq
from cscore.scorers.engine import head as lm_head
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.engine.tokenize import InputError, encode, target_ids
from cscore.scorers.models.models import LoadedModel, check_same_kind, early_exit, load_model
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.models import sharpen, train_bpe

CONF = Path(cscore.__file__).parent / "conf"
TEMPS = (0.5, 1.0, 1.7)
PAD, BOS, EOS, UNK = 0, 1, 2, 3

CORPUS = [
    "The mayor opened a new bridge over the river on Monday.",
    "The council said the bridge cost five million and took two years to build.",
    "Researchers found that the new vaccine protects most patients from the virus.",
    "The team won the final match after a late goal in extra time.",
    "The city council of Vellmoor voted on Tuesday to extend the tram to the eastern district.",
    "Opponents argued the money should go to road repairs instead.",
] * 20

# (source, [hypotheses]): several hypotheses share one source, lengths differ
SOURCES = [
    ("The mayor opened a new bridge over the river on Monday. The council said the bridge cost five million.",
     ["A bridge was opened by the mayor.", "The river was closed.",
      "The mayor opened a five million bridge on Monday."]),
    ("Researchers found that the new vaccine protects most patients.", ["A vaccine protects patients."]),
    ("The team won the final match after a late goal in extra time, the council said on Tuesday.",
     ["The team won.", "A late goal in extra time won the final match for the team.", "Road repairs."]),
    ("Opponents argued the money should go to road repairs.", ["Money for roads, said the opponents."]),
]


# --- tiny models -------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def build_tokenizer(path: Path | None, style: str):
    """A byte-level BPE tokenizer with <pad> <s> </s> <unk> = 0 1 2 3. ``style``: "t5" formats a
    text as ``x </s>``, "bart" as ``<s> x </s>``, "plain" adds nothing."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = train_bpe(CORPUS, 400)
    if style == "t5":
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", EOS)])
    elif style == "bart":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>",
                                                           special_tokens=[("<s>", BOS), ("</s>", EOS)])
    kw = {"bos_token": "<s>"} if style == "bart" else {}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>", **kw)
    assert (fast.pad_token_id, fast.eos_token_id) == (PAD, EOS)
    if path is not None:
        fast.save_pretrained(path)
    return fast


def build_t5(path: Path, tok, *, layers: int, d_model: int, seed: int, tie: bool = True) -> str:
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(tok), d_model=d_model, d_kv=8, d_ff=2 * d_model, num_layers=layers,
                      num_heads=4, dropout_rate=0.0, tie_word_embeddings=tie, pad_token_id=PAD, eos_token_id=EOS,
                      decoder_start_token_id=PAD)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def build_bart(path: Path, tok, *, seed: int) -> str:
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(seed)
    config = BartConfig(vocab_size=len(tok), d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_position_embeddings=1024, dropout=0.0, attention_dropout=0.0,
                        pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=EOS,
                        forced_eos_token_id=EOS)
    model = BartForConditionalGeneration(config)
    sharpen(model)
    with torch.no_grad():
        model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias) * 2.0)  # must be honoured
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Saved tiny models: T5 expert (scaled outputs), a smaller T5 amateur, an unscaled T5
    (tie_word_embeddings=False: T5 v1.1 / Flan-T5 style, same weights as ``t5``), a BART."""
    root = tmp_path_factory.mktemp("s2s")
    t5_tok = build_tokenizer(None, "t5")
    bart_tok = build_tokenizer(None, "bart")
    return SimpleNamespace(
        root=root,
        t5=build_t5(root / "t5", t5_tok, layers=2, d_model=32, seed=1),
        t5_small=build_t5(root / "t5_small", t5_tok, layers=1, d_model=16, seed=2),
        t5_unscaled=build_t5(root / "t5_unscaled", t5_tok, layers=2, d_model=32, seed=1, tie=False),
        bart=build_bart(root / "bart", bart_tok, seed=3),
    )


@pytest.fixture(scope="module")
def loaded(dirs):
    """{name: LoadedModel} in float64 (the exact reference dtype) and float32."""
    out = {}
    for name in ("t5", "t5_small", "t5_unscaled", "bart"):
        for dtype in ("float64", "float32"):
            out[name, dtype] = load_model(getattr(dirs, name), device="cpu", dtype=dtype)
    return out


def make_items(tokenizer, sources=SOURCES):
    items = []
    for src, hyps in sources:
        for h in hyps:
            it = encode(tokenizer, src, h, max_length=512, seq2seq=True, eos_id=tokenizer.eos_token_id)
            items.append((it.prompt_ids, it.hyp_ids))
    return items


@pytest.fixture(scope="module")
def items(loaded):
    """Encoded items per tokenizer family: {"t5": [...], "bart": [...]}."""
    return {fam: make_items(loaded[fam, "float64"].tokenizer) for fam in ("t5", "bart")}


def family(name: str) -> str:
    return "bart" if name == "bart" else "t5"


def reference(model, items, temperatures):
    """Independent per-token statistics: the model's own forward on one item at a time (no
    padding, no mask, no shared encoder), decoder input = start + target[:-1], log_softmax(z/T)
    in float64. Returns (logp, logp_max) of shape [n_temps, n_tokens]."""
    start = model.config.decoder_start_token_id
    lp, lpm = [[] for _ in temperatures], [[] for _ in temperatures]
    with torch.no_grad():
        for enc, tgt in items:
            logits = model(input_ids=torch.tensor([enc]), decoder_input_ids=torch.tensor([[start] + tgt[:-1]])).logits
            logits = logits[0].double()
            for k, t in enumerate(temperatures):
                ls = torch.log_softmax(logits / t, dim=-1)
                lp[k].append(ls[torch.arange(len(tgt)), torch.tensor(tgt)].numpy())
                lpm[k].append(ls.max(dim=-1).values.numpy())
    return np.array([np.concatenate(r) for r in lp]), np.array([np.concatenate(r) for r in lpm])


def assert_close64(got, want, rel=1e-10):
    """float64 against float64: |got - want| <= rel * (1 + |want|) element-wise."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    tol = rel * (1.0 + np.abs(want))
    bad = ~(np.abs(got - want) <= tol)
    assert not bad.any(), f"{int(bad.sum())} values differ; worst |diff| {np.max(np.abs(got - want)):.3g}"


def only(stats):
    (ts,) = stats.values()
    return ts


# --- 1. the statistics against an independent computation ---------------------------------------


@pytest.mark.parametrize("name", ["t5", "t5_small", "t5_unscaled", "bart"])
def test_statistics_equal_an_independent_float64_computation(loaded, items, name):
    lm = loaded[name, "float64"]
    its = items[family(name)]
    stats, report = engine.compute(lm.model, its, temperatures=TEMPS, pad_id=PAD)  # dispatches to seq2seq
    ts = only(stats)
    assert ts.logp.dtype == np.float64 and ts.temperatures == TEMPS
    np.testing.assert_array_equal(ts.offsets, np.cumsum([0] + [len(h) for _, h in its]))
    np.testing.assert_array_equal(ts.token_ids, np.concatenate([h for _, h in its]))  # EOS (and BART's <s>) scored
    want_lp, want_max = reference(lm.model, its, TEMPS)
    assert_close64(ts.logp, want_lp)
    assert_close64(ts.logp_max, want_max)
    assert (ts.logp <= ts.logp_max + 1e-12).all() and (ts.logp_max <= 0).all()
    # the distributions are not degenerate: the comparison above says something
    assert np.ptp(want_lp[1]) > 0.5
    assert report.tokens == sum(len(p) + len(h) for p, h in its)
    assert seq2seq.decoder_start(lm.model) == (EOS if name == "bart" else PAD)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_the_head_read_in_blocks_of_the_vocabulary_equals_the_reference(loaded, items, name, monkeypatch):
    """On the CPU the head's matrix streams once per batch in blocks of the vocabulary
    (``head_stream``), T5's output scaling and BART's final_logits_bias applied per block."""
    from cscore.scorers.engine import head_stream

    monkeypatch.setattr(head_stream, "VOCAB_BLOCK", 64)  # ~400 ids: several blocks
    lm = loaded[name, "float64"]
    assert head_stream.linear_head(lm.model) is not None
    its = items[family(name)]
    ts = only(engine.compute(lm.model, its, temperatures=TEMPS, pad_id=PAD)[0])
    want_lp, want_max = reference(lm.model, its, TEMPS)
    assert_close64(ts.logp, want_lp)
    assert_close64(ts.logp_max, want_max)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_float32_statistics_within_the_float32_tolerance(loaded, items, name, f32):
    """The usual dtype: float32 statistics within one float32 evaluation's bound of the float64
    reference of the same weights."""
    its = items[family(name)]
    ts = only(engine.compute(loaded[name, "float32"].model, its, temperatures=TEMPS, pad_id=PAD)[0])
    want_lp, want_max = reference(loaded[name, "float64"].model, its, TEMPS)
    typical = float(np.abs(want_lp[TEMPS.index(1.0)]).mean())
    for k, t in enumerate(TEMPS):
        tol = f32.logp_tol(want_lp[k], t, typical=typical, runs=1)
        assert (np.abs(ts.logp[k] - want_lp[k]) <= tol).all(), (t, np.max(np.abs(ts.logp[k] - want_lp[k])))
        tol = f32.logp_tol(want_max[k], t, typical=typical, runs=1)
        assert (np.abs(ts.logp_max[k] - want_max[k]) <= tol).all()


# --- 2. batching, budget, order and encoder sharing ----------------------------------------------


def assert_same_stats(a, b, rel=1e-12):
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_array_equal(a.token_ids, b.token_ids)
    assert a.temperatures == b.temperatures
    assert_close64(a.logp, b.logp, rel)
    assert_close64(a.logp_max, b.logp_max, rel)


def permute(items, order):
    return [items[i] for i in order]


def unpermute_stats(ts, order):
    """Stats of permuted items back in the original order."""

    n = len(order)
    pieces = [None] * n
    for pos, i in enumerate(order):
        pieces[i] = slice(ts.offsets[pos], ts.offsets[pos + 1])
    idx = np.concatenate([np.arange(s.start, s.stop) for s in pieces])
    offsets = np.concatenate([[0], np.cumsum([s.stop - s.start for s in pieces])])
    return TokenStats(ts.temperatures, offsets, ts.token_ids[idx], ts.logp[:, idx], ts.logp_max[:, idx])


class EncoderRows:
    """Counts the rows (and calls) the encoder is run on."""

    def __init__(self, model):
        self.rows = self.calls = 0
        self.handle = model.get_encoder().register_forward_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.rows += ids.shape[0]
        self.calls += 1

    def close(self):
        self.handle.remove()


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_batching_budget_order_and_encoder_sharing_do_not_change_the_statistics(loaded, items, name, monkeypatch):
    model = loaded[name, "float64"].model
    its = items[family(name)]
    n, n_src = len(its), len({tuple(p) for p, _ in its})
    assert n_src < n  # several hypotheses share a source

    monkeypatch.setattr(seq2seq, "check_head", lambda *a: None)  # count only the scoring passes' encoder rows

    def run(its, **kw):
        done = []
        counter = EncoderRows(model)
        try:
            stats, report = seq2seq.compute(model, its, temperatures=TEMPS, pad_id=PAD, progress=done.append,
                                            options=PassOptions(**kw))
        finally:
            counter.close()
        assert sum(done) == len(its) and len(done) == report.batches
        return only(stats), report, counter

    base, rep, enc = run(its, token_budget=100_000, prefix_sharing=True)
    max_enc, max_dec = max(len(p) for p, _ in its), max(len(h) for _, h in its)
    # one batch, one encoder row per distinct source
    assert rep.batches == 1 and enc.rows == n_src
    assert rep.padded_tokens == n_src * max_enc + n * max_dec
    unshared, rep_u, enc_u = run(its, token_budget=100_000, prefix_sharing=False)
    assert rep_u.batches == 1 and enc_u.rows == n and rep_u.padded_tokens == n * (max_enc + max_dec)
    assert_same_stats(unshared, base)
    for share in (True, False):
        tiny, rep_t, _ = run(its, token_budget=1, prefix_sharing=share)  # every item alone
        assert rep_t.batches == n
        assert_same_stats(tiny, base)
        mid, rep_m, _ = run(its, token_budget=max_enc + 3 * max_dec, prefix_sharing=share)
        assert 1 < rep_m.batches < n
        assert_same_stats(mid, base)
    rng = np.random.default_rng(0)
    for _ in range(2):
        order = rng.permutation(n).tolist()
        shuffled, _, _ = run(permute(its, order), token_budget=60)
        assert_same_stats(unpermute_stats(shuffled, order), base)
    left, _, _ = run(its, token_budget=60, padding_side="left")  # causal padding_side does not apply
    assert_same_stats(left, base)
    # the LM head in chunks of 3 target positions
    monkeypatch.setattr(lm_head, "HEAD_CHUNK_ELEMENTS", 3 * model.get_output_embeddings().weight.shape[0])
    chunked, _, _ = run(its, token_budget=100_000)
    assert_same_stats(chunked, base)


def test_many_hypotheses_of_one_source_share_one_encoder_pass(loaded, items, monkeypatch):
    model = loaded["t5", "float64"].model
    monkeypatch.setattr(seq2seq, "check_head", lambda *a: None)
    src = items["t5"][0][0]
    its = [(src, h) for _, h in items["t5"]]  # every hypothesis under the first source
    counter = EncoderRows(model)
    try:
        shared, rep = seq2seq.compute(model, its, temperatures=TEMPS, pad_id=PAD,
                                      options=PassOptions(token_budget=100_000))
    finally:
        counter.close()
    assert counter.rows == 1 and counter.calls == 1 and rep.batches == 1  # one shared encoder row
    want_lp, want_max = reference(model, its, TEMPS)
    assert_close64(only(shared).logp, want_lp)
    assert_close64(only(shared).logp_max, want_max)


@pytest.mark.parametrize("name", ["t5", "bart"])
@pytest.mark.parametrize("sources", [1, 3])
def test_cross_attention_projects_each_source_once(loaded, items, name, sources, monkeypatch):
    """A batch of hypotheses under 1 or 3 sources: the decoder's cross-attention projections run
    on one row per source (not one per item), and the decoder states equal the plain call's."""
    model = loaded[name, "float64"].model
    its = items[family(name)]
    srcs = list(dict.fromkeys(tuple(p) for p, _ in its))[:sources]
    hyps = [h for _, h in its]
    batch = [(list(srcs[j % sources]), hyps[j]) for j in range(6)]
    cpu, start = torch.device("cpu"), model.config.decoder_start_token_id
    enc_ids, enc_mask = seq2seq._pad([list(s) for s in srcs], PAD, cpu)
    dec_ids, dec_mask = seq2seq._pad([[start] + h[:-1] for _, h in batch], PAD, cpu)
    sel = torch.tensor([srcs.index(tuple(p)) for p, _ in batch])
    with torch.no_grad():
        states = model.get_encoder()(input_ids=enc_ids, attention_mask=enc_mask).last_hidden_state
        kw = dict(input_ids=dec_ids, attention_mask=dec_mask, encoder_attention_mask=enc_mask[sel], use_cache=False)
        want = model.get_decoder()(encoder_hidden_states=states[sel], **kw).last_hidden_state
        rows = []
        real_linear = torch.nn.functional.linear
        monkeypatch.setattr(seq2seq.F, "linear",
                            lambda x, w, b=None: rows.append(tuple(x.shape[:2])) or real_linear(x, w, b))
        with seq2seq.shared_source_projections(model.get_decoder(), states, sel, len(batch)) as per_item:
            got = model.get_decoder()(encoder_hidden_states=per_item, **kw).last_hidden_state
    n_layers = model.config.num_decoder_layers if name == "t5" else model.config.decoder_layers
    width = enc_ids.shape[1]
    assert width != dec_ids.shape[1]
    assert rows.count((sources, width)) == 2 * n_layers  # keys and values of every layer, one row per source
    assert (len(batch), width) not in rows  # no projection of the per-item copies
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-12)


def test_make_batches_respects_the_budget_and_keeps_sources_together():
    rng = np.random.default_rng(1)
    groups = [int(g) for g in np.repeat(np.arange(12), rng.integers(1, 6, 12))]
    enc = {g: int(rng.integers(3, 40)) for g in set(groups)}
    enc_lens = [enc[g] for g in groups]
    dec_lens = [int(rng.integers(1, 15)) for _ in groups]
    for share in (True, False):
        for budget in (1, 50, 120, 10_000):
            batches = seq2seq.make_batches(enc_lens, dec_lens, groups, budget, share)
            assert sorted(i for b in batches for i in b) == list(range(len(groups)))
            for b in batches:
                rows = len({groups[i] for i in b}) if share else len(b)
                cost = rows * max(enc_lens[i] for i in b) + len(b) * max(dec_lens[i] for i in b)
                assert cost <= budget or len(b) == 1
            if budget == 10_000:
                assert len(batches) == 1
            # items of one source are contiguous in the run order
            seq = [groups[i] for b in batches for i in b]
            for g in set(seq):
                at = [k for k, x in enumerate(seq) if x == g]
                assert at == list(range(at[0], at[-1] + 1))


def test_bad_items_and_decoder_start(loaded, items):
    model = loaded["t5", "float32"].model
    src, tgt = items["t5"][0]
    with pytest.raises(InputError, match="item 1: need at least one prompt token and one hypothesis token"):
        engine.compute(model, [(src, tgt), (src, [])], temperatures=(1.0,))
    vocab = model.get_output_embeddings().weight.shape[0]
    with pytest.raises(InputError, match=f"item 1: token id {vocab} is outside the model's vocabulary of {vocab}"):
        engine.compute(model, [(src, tgt), (src, tgt[:-1] + [vocab])], temperatures=(1.0,))
    with pytest.raises(ConfigError, match="temperatures must be positive"):
        engine.compute(model, [(src, tgt)], temperatures=(0.0,))
    empty, report = engine.compute(model, [], temperatures=TEMPS)  # nothing to score: empty statistics
    assert only(empty).n_items == 0 and only(empty).logp.shape == (len(TEMPS), 0) and report.batches == 0
    # decoder_start: the config's, else the generation config's, else a clear error
    fake = SimpleNamespace(config=SimpleNamespace(decoder_start_token_id=None),
                           generation_config=SimpleNamespace(decoder_start_token_id=7))
    assert seq2seq.decoder_start(fake) == 7
    fake.generation_config.decoder_start_token_id = None
    with pytest.raises(ConfigError, match="no decoder_start_token_id"):
        seq2seq.decoder_start(fake)


# --- 3. the LM head: T5 output scaling, BART final_logits_bias -----------------------------------


def test_t5_scaling_follows_tie_word_embeddings_and_is_honoured(loaded, items):
    scaled, unscaled = loaded["t5", "float64"].model, loaded["t5_unscaled", "float64"].model
    assert scaled.config.scale_decoder_outputs is True and unscaled.config.scale_decoder_outputs is False
    for p, q in zip(scaled.parameters(), unscaled.parameters()):  # same weights: only the scaling differs
        assert torch.equal(p, q)
    a = only(engine.compute(scaled, items["t5"], temperatures=TEMPS, pad_id=PAD)[0])
    b = only(engine.compute(unscaled, items["t5"], temperatures=TEMPS, pad_id=PAD)[0])
    assert np.max(np.abs(a.logp - b.logp)) > 0.5  # the scaling matters; each matched its reference in test 1


def test_bart_final_logits_bias_is_saved_and_honoured(loaded, items):
    model = loaded["bart", "float64"].model
    bias = model.final_logits_bias
    assert bias.abs().max() > 1.0  # the non-zero bias survived save_pretrained / load_model
    with_bias = only(engine.compute(model, items["bart"], temperatures=TEMPS, pad_id=PAD)[0])
    saved = bias.clone()
    try:
        with torch.no_grad():
            bias.zero_()
        without = only(engine.compute(model, items["bart"], temperatures=TEMPS, pad_id=PAD)[0])
        assert_close64(without.logp, reference(model, items["bart"], TEMPS)[0])
    finally:
        with torch.no_grad():
            bias.copy_(saved)
    assert np.max(np.abs(with_bias.logp - without.logp)) > 0.5


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_bfloat16_passes_the_head_check(dirs, items, name):
    """bfloat16 (the CUDA default): the head recipe reproduces the model's own bfloat16 logits, so
    check_head passes; the statistics stay near the float64 reference."""
    lm = load_model(getattr(dirs, name), device="cpu", dtype="bfloat16")
    its = items[family(name)]
    ts = only(engine.compute(lm.model, its, temperatures=(1.0,), pad_id=PAD)[0])
    want, _ = reference(load_model(getattr(dirs, name), device="cpu", dtype="float64").model, its, (1.0,))
    assert np.isfinite(ts.logp).all()
    assert np.mean(np.abs(ts.logp[0] - want[0])) < 0.05 * np.mean(np.abs(want[0]))


def naive_head(model, states):
    """A head recipe that forgets T5's scaling and BART's bias."""
    return model.get_output_embeddings()(states).float()


@pytest.mark.parametrize("name, known", [("t5", False), ("bart", False), ("t5_unscaled", True)])
def test_check_head_refuses_a_head_recipe_that_differs_from_the_model(loaded, items, name, known, monkeypatch):
    model = loaded[name, "float32"].model
    its = items[family(name)][:2]
    monkeypatch.setattr(seq2seq, "raw_logits", naive_head)
    if known:  # no scaling, no bias: the naive recipe is the model's
        seq2seq.compute(model, its, temperatures=(1.0,), pad_id=PAD)
    else:
        with pytest.raises(ConfigError, match="does not know how"):
            seq2seq.compute(model, its, temperatures=(1.0,), pad_id=PAD)


# --- 4. tokenization --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toks(loaded):
    return {"t5": loaded["t5", "float64"].tokenizer, "bart": loaded["bart", "float64"].tokenizer,
            "plain": build_tokenizer(None, "plain")}


@pytest.mark.parametrize("style", ["t5", "bart", "plain"])
def test_target_ends_with_eos_once_and_the_encoder_input_has_special_tokens(toks, style):
    tok = toks[style]
    src, hyp = SOURCES[0][0], SOURCES[0][1][2]
    item = encode(tok, src, hyp, max_length=512, seq2seq=True, eos_id=EOS)
    words = tok(hyp, add_special_tokens=False)["input_ids"]
    src_words = tok(src, add_special_tokens=False)["input_ids"]
    assert item.hyp_ids[-1] == EOS and item.hyp_ids.count(EOS) == 1
    assert target_ids(tok, hyp, EOS) == item.hyp_ids
    if style == "t5":
        assert item.hyp_ids == words + [EOS] and item.prompt_ids == src_words + [EOS]
    elif style == "bart":
        assert item.hyp_ids == [BOS] + words + [EOS] and item.prompt_ids == [BOS] + src_words + [EOS]
    else:  # the tokenizer adds nothing: EOS appended to the target only
        assert item.hyp_ids == words + [EOS] and item.prompt_ids == src_words
    assert not item.truncated and item.prompt == src
    # the causal path is unchanged: no special tokens, no EOS
    causal = encode(tok, src, hyp, max_length=512)
    assert causal.hyp_ids == words and causal.prompt_ids == src_words


@pytest.mark.parametrize("style", ["t5", "bart"])
def test_over_long_source_is_cut_to_max_length(toks, style):
    tok = toks[style]
    source = " ".join(s for s, _ in SOURCES)
    prompt = "summarize: " + source
    span = (len("summarize: "), len(prompt))
    hyp = "The mayor opened a bridge and the team won the final match after a late goal."
    full = encode(tok, prompt, hyp, max_length=4096, source_span=span, seq2seq=True, eos_id=EOS)
    n_hyp = len(full.hyp_ids)
    max_length = len(full.prompt_ids) // 2
    assert n_hyp < max_length  # the target does not count against the encoder's budget, and is never cut
    item = encode(tok, prompt, hyp, max_length=max_length, source_span=span, index=3, seq2seq=True, eos_id=EOS)
    assert item.truncated and len(item.prompt_ids) <= max_length
    assert item.hyp_ids == full.hyp_ids
    assert item.prompt.startswith("summarize: ") and source.startswith(item.prompt[len("summarize: "):])
    assert item.prompt_ids == tok(item.prompt, add_special_tokens=True)["input_ids"]  # re-tokenizes exactly
    assert item.prompt_ids[-1] == EOS and (item.prompt_ids[0] == BOS) == (style == "bart")
    # the largest cut that fits: one more word would not
    kept = len(item.prompt) - len("summarize: ")
    next_space = source.find(" ", kept + 1)
    longer = source if next_space < 0 else source[:next_space]
    assert len(tok("summarize: " + longer, add_special_tokens=True)["input_ids"]) > max_length
    with pytest.raises(InputError, match=r"item 3: the encoder input has \d+ tokens > max_length=\d+ and no source "):
        encode(tok, prompt, hyp, max_length=max_length, index=3, seq2seq=True, eos_id=EOS)


def test_over_long_target_is_a_clear_error(toks):
    tok = toks["t5"]
    hyp = " ".join(CORPUS[:4])
    n = len(target_ids(tok, hyp, EOS))
    with pytest.raises(InputError, match=rf"item 7: the hypothesis alone has {n} tokens, more than "
                                         rf"max_length={n - 1} allows; the hypothesis is never truncated"):
        encode(tok, "short source", hyp, max_length=n - 1, index=7, seq2seq=True, eos_id=EOS)
    # exactly max_length target tokens is fine (the encoder has its own budget)
    assert len(encode(tok, "short source", hyp, max_length=n, seq2seq=True, eos_id=EOS).hyp_ids) == n


def test_model_pair_encode_ends_targets_with_the_eos_of_the_model(loaded, toks):
    lm = loaded["t5", "float64"]
    pair = ModelPair(lm)
    inputs = pair.encode(["a source"], ["a hypothesis"])
    assert inputs.items[0].hyp_ids[-1] == EOS and inputs.items[0].prompt_ids[-1] == EOS
    # a tokenizer without an EOS: the model config's
    no_eos = SimpleNamespace(eos_token_id=None)
    fake = LoadedModel(SimpleNamespace(config=SimpleNamespace(eos_token_id=[EOS, 5])), no_eos, "fake",
                       torch.device("cpu"), torch.float64, {"encoder_decoder": True})
    assert ModelPair(fake)._eos() == EOS
    fake.model.config.eos_token_id = None
    with pytest.raises(ConfigError, match="no EOS token"):
        ModelPair(fake)._eos()


# --- 5. loading, pair kinds, early exit ---------------------------------------------------------


def test_load_model_picks_the_seq2seq_class(loaded):
    for name, cls in (("t5", "T5ForConditionalGeneration"), ("bart", "BartForConditionalGeneration")):
        lm = loaded[name, "float64"]
        assert lm.is_encoder_decoder and lm.info["encoder_decoder"] is True and lm.info["class"] == cls
        assert lm.dtype == torch.float64 and next(lm.model.parameters()).dtype == torch.float64
        assert not lm.model.training


def test_causal_and_seq2seq_models_do_not_pair(loaded, tiny_dirs):
    causal = load_model(tiny_dirs.expert, device="cpu", dtype="float32")
    assert not causal.is_encoder_decoder
    t5 = loaded["t5", "float32"]
    with pytest.raises(ConfigError, match="is an encoder-decoder .* is a decoder-only"):
        ModelPair(t5, causal)
    with pytest.raises(ConfigError, match="is a decoder-only .* is an encoder-decoder"):
        check_same_kind(causal, t5)
    check_same_kind(t5, loaded["t5_small", "float32"])  # same kind: fine


def test_early_exit_is_refused_for_seq2seq(dirs, loaded, items):
    with pytest.raises(ConfigError, match="early exit is for decoder-only models"):
        early_exit(loaded["t5", "float32"], 1)
    with pytest.raises(ConfigError, match="early exit is for decoder-only models"):
        ModelPair.load(dirs.t5, amateur_early_exit="auto", device="cpu")
    with pytest.raises(ConfigError, match="early exit is for decoder-only models"):
        engine.compute(loaded["t5", "float32"].model, items["t5"], temperatures=(1.0,),
                       heads={"expert": None, "amateur": 1})


def test_cli_refuses_an_early_exit_of_a_seq2seq_expert(dirs, tmp_path, cscore_main):
    """The default pair's amateur is an early exit (auto): with a seq2seq expert that is a
    one-line error naming the fix, and no run directory."""
    res = cscore_main("run", f"pair.expert.path={dirs.t5}", "prompt=seq2seq", "runtime.progress=false",
                      f"hydra.run.dir={tmp_path / 'run'}", f"cache.dir={tmp_path / 'stats'}", cwd=tmp_path)
    assert res.returncode != 0
    assert "cscore: error: early exit is for decoder-only models" in res.stderr
    assert "pair.amateur.early_exit=null" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run" / "scores.parquet").exists()


# --- the API: a seq2seq pair, its cache key --------------------------------------------------------


def test_pair_statistics_through_the_cache(loaded, items, tmp_path):
    exp, ama = loaded["t5", "float64"], loaded["t5_small", "float64"]
    pair = ModelPair(exp, ama)
    prompts = [s for s, hs in SOURCES for _ in hs]
    hyps = [h for _, hs in SOURCES for h in hs]
    cache = StatsCache(tmp_path / "stats")
    first = pair.statistics(prompts, hyps, temperatures=TEMPS, cache=cache)
    assert [(it.prompt_ids, it.hyp_ids) for it in first.inputs.items] == items["t5"]
    assert not any(r.cached for r in first.reports.values())
    for head, lm in (("expert", exp), ("amateur", ama)):
        want_lp, want_max = reference(lm.model, items["t5"], TEMPS)
        assert_close64(first.stats[head].logp, want_lp)
        assert_close64(first.stats[head].logp_max, want_max)
    keys = cache.keys()
    assert len(keys) == 2
    for key in keys:
        assert cache.load(key, TokenStats).meta["parts"]["layout"] == {"kind": "encoder-decoder", "decoder_start": PAD}
    second = pair.statistics(prompts, hyps, temperatures=TEMPS, cache=cache)
    assert all(r.cached for r in second.reports.values())
    for head in ("expert", "amateur"):
        np.testing.assert_array_equal(second.stats[head].logp, first.stats[head].logp)
    assert seq2seq.key_part(loaded["bart", "float64"].model) == {"layout": {"kind": "encoder-decoder",
                                                                             "decoder_start": EOS}}


# --- configs ----------------------------------------------------------------------------------------


SEQ2SEQ_PAIRS = sorted(p.stem for p in (CONF / "pair").glob("*.yaml") if "t5" in p.stem)


def test_seq2seq_pair_configs():
    from omegaconf import OmegaConf

    assert {"t5_base_small", "t5_large_small", "flan_t5_large_base"} <= set(SEQ2SEQ_PAIRS)
    for stem in SEQ2SEQ_PAIRS:
        cfg = OmegaConf.load(CONF / "pair" / f"{stem}.yaml")
        assert cfg.name == stem
        assert cfg.amateur.early_exit is None  # early exit is for decoder-only models
        prefix = "google/flan-t5-" if stem.startswith("flan") else "google-t5/t5-"
        assert cfg.expert.path.startswith(prefix) and cfg.amateur.path.startswith(prefix)
        assert cfg.expert.path != cfg.amateur.path


def test_seq2seq_prompt_is_the_raw_source():
    from omegaconf import OmegaConf

    from cscore.data import prompts
    from cscore.data.registry import load_config

    cfg = OmegaConf.load(CONF / "prompt" / "seq2seq.yaml")
    assert cfg.chat_template is False and cfg.condition == "source"
    examples, _ = load_config(OmegaConf.to_container(OmegaConf.load(CONF / "data" / "demo.yaml")))
    for condition, column in (("source", "source"), ("reference", "reference")):
        texts, spans = prompts.build(examples, condition=condition, templates=OmegaConf.to_container(cfg.templates),
                                     reference_templates=OmegaConf.to_container(cfg.reference_templates))
        assert texts == list(examples[column])
        assert spans == [(0, len(t)) for t in texts]


@pytest.mark.parametrize("pair", ["t5_base_small", "flan_t5_large_base"])
def test_seq2seq_pair_composes(pair, tmp_path, cscore_main):
    res = cscore_main("run", f"pair={pair}", "prompt=seq2seq", "--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"name: {pair}" in res.stdout and "early_exit: null" in res.stdout


# --- 6. cscore run end to end -------------------------------------------------------------------


@pytest.mark.slow
def test_cli_run_contrast_then_cdm_from_the_cache(dirs, tmp_path, cscore_main, monkeypatch):
    cache = tmp_path / "stats"
    args = [f"pair.expert.path={dirs.t5}", f"pair.amateur.path={dirs.t5_small}", "pair.amateur.early_exit=null",
            "pair.name=tiny_t5", "prompt=seq2seq", "data=demo", "runtime.dtype=float64", "runtime.device=cpu",
            "runtime.progress=false", f"cache.dir={cache}"]

    def run(name, *extra):
        res = cscore_main("run", *args, *extra, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        out = tmp_path / name
        return pd.read_parquet(out / "scores.parquet"), json.loads((out / "metrics.json").read_text())

    scores, metrics = run("contrast", "method=contrast")
    assert len(scores) == 160 and not metrics["speed"]["from_cache"]
    for col in ("score.contrast", "score.expert", "score.amateur", "score.ensemble"):
        assert col in scores.columns and np.isfinite(scores[col]).all(), col
    assert list(scores["prompt"]) == list(scores["source"])  # prompt=seq2seq: the raw source
    # the same numbers from ModelPair statistics computed here (same float64 models, same items)
    pair = ModelPair.load(dirs.t5, dirs.t5_small, device="cpu", dtype="float64")
    stats = pair.statistics(list(scores["prompt"]), list(scores["hypothesis"]), temperatures=metrics["temperatures"])
    assert list(scores["hypothesis_tokens"]) == [len(it.hyp_ids) for it in stats.inputs.items]
    assert all(it.hyp_ids[-1] == EOS for it in stats.inputs.items)
    for v in metrics["variants"]:
        assert_close64(scores[f"score.{v['name']}"], stats.score(v["method"], **v["params"]), 1e-9)
    # ... and from the cached statistics, bit for bit
    cached = {}
    for key in StatsCache(cache).keys():
        cached.update(StatsCache(cache).load(key, TokenStats).stats)
    assert sorted(cached) == ["amateur", "expert"]
    for v in metrics["variants"]:
        np.testing.assert_array_equal(scores[f"score.{v['name']}"], methods.score(v["method"], cached, **v["params"]))

    # another method parameter and another method: cache hits, no forward pass
    def no_forward(*a, **k):
        raise AssertionError("a forward pass ran on a cache hit")

    monkeypatch.setattr(seq2seq, "compute", no_forward)
    scores2, metrics2 = run("contrast_gamma", "method=contrast", "method.gamma=0.3")
    assert metrics2["speed"]["from_cache"] and all(p["from_cache"] for p in metrics2["speed"]["passes"].values())
    (v,) = [v for v in metrics2["variants"] if v["method"] == "contrast"]
    assert v["params"]["gamma"] == 0.3
    np.testing.assert_array_equal(scores2["score.contrast"], methods.score("contrast", cached, **v["params"]))
    assert not np.array_equal(scores2["score.contrast"], scores["score.contrast"])
    scores3, metrics3 = run("cdm", "method=cdm")
    assert metrics3["speed"]["from_cache"]
    np.testing.assert_array_equal(scores3["score.cdm"], methods.score("cdm", cached, pooling="mean"))
    np.testing.assert_allclose(scores3["score.cdm"], scores3["score.expert"] - scores3["score.amateur"], atol=1e-9)


def test_an_interrupted_pass_resumes_from_its_checkpoint_bit_identical(loaded, items, tmp_path):
    """Ctrl-C after three batches: the batches kept in the checkpoint are skipped on the re-run,
    the rest run as planned, and the statistics equal an uninterrupted pass's bit for bit."""
    from cscore.scorers.store.checkpoint import Checkpoint

    model, its = loaded["t5", "float32"].model, items["t5"] * 3
    kw = dict(temperatures=TEMPS, options=PassOptions(token_budget=96))
    counter = EncoderRows(model)
    try:
        want, full = engine.compute(model, its, **kw)
    finally:
        counter.close()
    calls = counter.calls
    offsets = np.concatenate([[0], np.cumsum([len(h) for _, h in its])])
    seen = []

    def stop(n):
        seen.append(n)
        if len(seen) == 3:
            raise KeyboardInterrupt

    first = Checkpoint(tmp_path / "ck", "k", ["model"], offsets, TEMPS, every=0)
    with pytest.raises(KeyboardInterrupt):
        engine.compute(model, its, progress=stop, checkpoint=first, **kw)
    again = Checkpoint(tmp_path / "ck", "k", ["model"], offsets, TEMPS, every=0)
    assert again.load() == sum(seen) and full.batches > 3
    counter = EncoderRows(model)
    try:
        got, _ = engine.compute(model, its, checkpoint=again, **kw)
    finally:
        counter.close()
    assert counter.calls == calls - 3  # the batches kept are not run again
    assert np.array_equal(got["model"].logp, want["model"].logp)
    assert np.array_equal(got["model"].logp_max, want["model"].logp_max)
