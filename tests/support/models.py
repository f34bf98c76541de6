"""The tests' models, built from nothing (no download): a byte-level BPE tokenizer trained on a
small corpus, tiny random llamas, judge models whose next token the tests choose, and a toy
bigram LM whose logits are a table. torch is imported inside the functions (tests/unit/repo/test_torch_free.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

CORPUS = [
    "The mayor opened a new bridge over the river on Monday.",
    "The council said the bridge cost five million and took two years to build.",
    "Write an accurate, relevant, and coherent summary of the following texts:",
    "Summary: A bridge was opened. Translate the following sentence to English:",
    "Researchers found that the new vaccine protects most patients from the virus.",
    "The team won the final match after a late goal in extra time.",
] * 20


SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0 1 2 3


def train_bpe(corpus, vocab_size: int, specials=SPECIALS):
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``corpus``, ``specials`` first (ids 0, 1, ...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    return tok


def build_tokenizer(path: Path, vocab_size: int = 400, extra: str = ""):
    from transformers import PreTrainedTokenizerFast

    tok = train_bpe([c + extra for c in CORPUS], vocab_size)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    fast.save_pretrained(path)
    return fast


def sharpen(model) -> None:
    """Larger random weights (every matrix drawn from N(0, 0.2)): sharper, more varied distributions."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)


def build_llama(path: Path, tokenizer, layers: int = 4, seed: int = 0, hidden: int = 32):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=64,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    sharpen(model)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


CHAT = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")


ROLE_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
ROLE_CHAIN = ["<|im_end|>", "<|im_start|>", "assistant", "\u010a", "4", "<|im_end|>"]  # "\u010a": byte-level "\n"


def build_role_llama(path: Path, tokenizer, gain: float, seed: int) -> None:
    """A tiny llama whose next token depends on the current token only (every attention output
    and MLP projection zero, so the last hidden state is the token's embedding): after each token
    of ``ROLE_CHAIN`` it puts the logit ``gain * sqrt(hidden)`` on the next one and 0 on every
    other token; other tokens' embeddings are random and live in other dimensions."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    hidden = 32
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ROLE_CHAIN]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        emb.normal_(0, 1)
        emb[:, :len(ids) - 1] = 0  # dimensions 0..4: the chain's tokens only
        head = model.lm_head.weight
        head.normal_(0, 0.02)
        head[:, :len(ids) - 1] = 0
        for k, (cur, nxt) in enumerate(zip(ids[:-1], ids[1:])):
            emb[cur] = 0
            emb[cur, k] = 1.0
            head[nxt, k] = gain
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def toy_bigram_class():
    """The ToyBigram class (defined when asked for, so that importing this module does not
    import torch)."""
    import torch
    from torch import nn

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

    return ToyBigram


def build_judge_dirs(tiny_dirs, root: Path) -> dict:
    """Copies of the tiny models under ``root``, expert and amateur with the chat template ``CHAT``
    (the ``judge_dirs`` fixture)."""
    import shutil

    from transformers import AutoTokenizer

    out = {}
    for name in ("expert", "amateur", "other"):
        shutil.copytree(getattr(tiny_dirs, name), root / name)
        if name != "other":
            tok = AutoTokenizer.from_pretrained(root / name)
            tok.chat_template = CHAT
            tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out


def build_role_judge_dirs(root: Path) -> dict:
    """The ``role_judge_dirs`` pair under ``root`` (conftest says what its models write)."""
    from transformers import PreTrainedTokenizerFast

    base = build_tokenizer(root / "tok")
    tok = PreTrainedTokenizerFast.from_pretrained(root / "tok")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.add_tokens(["assistant"])  # one ordinary token, as in SmolLM2's vocabulary
    tok.eos_token = "<|im_end|>"
    tok.chat_template = ROLE_CHAT
    assert tok("assistant\n4", add_special_tokens=False)["input_ids"] == [tok.convert_tokens_to_ids(t)
                                                                          for t in ROLE_CHAIN[2:5]]
    assert len(base) < len(tok)
    out = {}
    for name, gain, seed in (("expert", 3.0, 11), ("amateur", 1.0, 12)):
        build_role_llama(root / name, tok, gain, seed)
        out[name] = str(root / name)
    return out
