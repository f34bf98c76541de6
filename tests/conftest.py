"""Shared fixtures: tiny randomly initialised models built here and saved to a temp dir
(nothing is downloaded), and a toy bigram LM whose logits the tests choose."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))

@pytest.fixture(scope="session", autouse=True)
def isolated_stats_cache(tmp_path_factory):
    """Each test session gets its own statistics cache (converted GGUF models stay shared)."""
    os.environ["CSCORE_STATS_CACHE"] = str(tmp_path_factory.mktemp("stats_cache"))
    yield


CORPUS = [
    "The mayor opened a new bridge over the river on Monday.",
    "The council said the bridge cost five million and took two years to build.",
    "Write an accurate, relevant, and coherent summary of the following texts:",
    "Summary: A bridge was opened. Translate the following sentence to English:",
    "Researchers found that the new vaccine protects most patients from the virus.",
    "The team won the final match after a late goal in extra time.",
] * 20


def build_tokenizer(path: Path, vocab_size: int = 400, extra: str = ""):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([c + extra for c in CORPUS], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    fast.save_pretrained(path)
    return fast


def build_llama(path: Path, tokenizer, layers: int = 4, seed: int = 0, hidden: int = 32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=64,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger random weights: sharper, more varied distributions
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """Two tiny llamas sharing one tokenizer (expert 4 layers, amateur 2 layers), and one
    model with a different tokenizer."""
    root = tmp_path_factory.mktemp("tiny")
    tok = build_tokenizer(root / "tok")
    expert = build_llama(root / "expert", tok, layers=4, seed=1)
    amateur = build_llama(root / "amateur", tok, layers=2, seed=2)
    other_tok = build_tokenizer(root / "tok_other", vocab_size=300, extra=" zebra quartz")
    other = build_llama(root / "other", other_tok, layers=2, seed=3)
    return SimpleNamespace(root=root, expert=str(expert), amateur=str(amateur), other=str(other))


class ToyBase(nn.Module):
    """Hidden state = one-hot of the current token."""

    def __init__(self, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, vocab)
        with torch.no_grad():
            self.embed.weight.copy_(torch.eye(vocab))

    def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False):
        return SimpleNamespace(last_hidden_state=self.embed(input_ids.clamp(min=0)))


class ToyBigram(nn.Module):
    """A causal LM whose next-token logits depend only on the current token:
    logits(next | prev) = table[prev]. The tests pick the table."""

    base_model_prefix = "model"

    def __init__(self, table: torch.Tensor):
        super().__init__()
        vocab = table.shape[0]
        self.model = ToyBase(vocab)
        self.lm_head = nn.Linear(vocab, vocab, bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(table.T)
        self.config = SimpleNamespace(final_logit_softcapping=None)

    def get_output_embeddings(self):
        return self.lm_head


@pytest.fixture
def toy_bigram():
    return ToyBigram


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def shared():
    """The shared/data folder; its tests skip without it, except under CI where they fail."""
    from cscore.data import paths

    folder = paths.shared_data_dir()
    if folder is None:
        message = f"shared data folder not found (set {paths.ENV_VAR} or put it at <workspace>/shared/data)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return folder
