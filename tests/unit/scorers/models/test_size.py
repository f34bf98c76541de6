"""Issue 47 item 7: a pair whose amateur is not smaller than its expert says so in one line, with
both parameter counts, counted without loading weights."""

import logging

import pytest

from cscore.scorers.api import ModelPair
from cscore.scorers.models import size
from cscore.scorers.models.models import early_exit, load_model
from cscore.tests.support.models import build_llama, build_tokenizer

HIDDEN, INTERMEDIATE = 32, 64  # build_llama's: 4 heads of 8, 2 key-value heads, untied head


def llama_parameters(vocab: int, layers: int) -> int:
    """By hand: embeddings and LM head (vocab x hidden each), per layer q and o (hidden x hidden),
    k and v (hidden x 2 x 8), gate, up and down (hidden x intermediate) and two norms, a final norm."""
    layer = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * 16 + 3 * HIDDEN * INTERMEDIATE + 2 * HIDDEN
    return 2 * vocab * HIDDEN + layers * layer + HIDDEN


@pytest.fixture(scope="module")
def small_and_large(tmp_path_factory):
    root = tmp_path_factory.mktemp("size")
    tok = build_tokenizer(root / "tok")
    return (len(tok), str(build_llama(root / "small", tok, layers=2, seed=1)),
            str(build_llama(root / "large", tok, layers=4, seed=2)))


@pytest.fixture
def fresh(monkeypatch, caplog):
    monkeypatch.setattr(size, "_CHECKED", set())
    caplog.set_level(logging.WARNING, logger="cscore.scorers.models.size")
    return caplog


def test_counts_match_the_hand_count_without_loading(small_and_large):
    vocab, small, large = small_and_large
    lazy = load_model(large, lazy=True)
    assert size.parameters(lazy) == llama_parameters(vocab, 4) and not lazy.loaded
    loaded = load_model(small)
    assert size.parameters(loaded) == llama_parameters(vocab, 2) == sum(p.numel() for p in loaded.model.parameters())
    assert size.parameters(early_exit(lazy, 1)) == llama_parameters(vocab, 1)  # an early exit: its layers only


def test_an_upside_down_pair_warns_once_with_both_counts(small_and_large, fresh):
    vocab, small, large = small_and_large
    ModelPair.load(small, large, lazy=True)
    ModelPair.load(small, large, lazy=True)  # the same pair again (a multirun's next job): no second line
    want = (f"amateur {large} ({size.readable(llama_parameters(vocab, 4))} parameters) is not smaller than expert "
            f"{small} ({size.readable(llama_parameters(vocab, 2))}): contrastive methods assume a smaller amateur")
    assert [r.getMessage() for r in fresh.records] == [want]
    assert "(62,752 parameters)" in want and "(44,192)" in want  # 25,600 + 4 or 2 x 9,280 + 32: in full


def test_a_right_way_up_pair_and_a_true_early_exit_are_quiet(small_and_large, fresh):
    _, small, large = small_and_large
    ModelPair.load(large, small, lazy=True)
    ModelPair.load(large, amateur_early_exit=3, lazy=True)
    assert fresh.records == []
    ModelPair.load(large, amateur_early_exit=4, lazy=True)  # every layer: the expert itself
    assert [r.getMessage().split(" (")[0] for r in fresh.records] == [f"amateur {large}[:4]"]


def test_readable_counts():
    assert [size.readable(n) for n in (23_072, 134_515_008, 268_098_176, 7_615_616_512)] == \
        ["23,072", "135M", "268M", "7.6B"]
