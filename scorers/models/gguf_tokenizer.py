"""A Gemma-3 tokenizer (SentencePiece BPE) built from a GGUF file's metadata (``gguf.GGUFReader``) under every
transformers version: every split of a piece into two pieces becomes a merge ranked by the piece's score."""

from __future__ import annotations

from pathlib import Path

SPACE = "\u2581"  # SentencePiece's visible space
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4  # GGUF's tokenizer.ggml.token_type (llama.cpp)


def read_gguf_vocab(gguf_path: str | Path) -> dict:
    """Tokens, scores, types and special ids from the GGUF metadata (no tensors are read)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf_path)).fields

    def get(key, default=None):
        return fields[key].contents() if key in fields else default

    arch = get("general.architecture")
    return {
        "model": get("tokenizer.ggml.model"),
        "tokens": get("tokenizer.ggml.tokens"),
        "scores": get("tokenizer.ggml.scores"),
        "types": get("tokenizer.ggml.token_type"),
        "bos": get("tokenizer.ggml.bos_token_id"),
        "eos": get("tokenizer.ggml.eos_token_id"),
        "pad": get("tokenizer.ggml.padding_token_id"),
        "unk": get("tokenizer.ggml.unknown_token_id"),
        "add_bos": get("tokenizer.ggml.add_bos_token", True),
        "context_length": get(f"{arch}.context_length"),
    }


def bpe_merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """Ranked merges for a SentencePiece BPE vocabulary (only normal pieces take part)."""
    normal = {tok: i for i, tok in enumerate(tokens) if types[i] == NORMAL}
    merges = []
    for i in sorted(normal.values(), key=lambda i: (-scores[i], i)):  # best score first, then file order
        piece = tokens[i]
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                  if piece[:k] in normal and piece[k:] in normal]
        splits.sort(key=lambda pair: (normal[pair[0]], normal[pair[1]]))  # better-ranked halves first
        merges.extend(splits)
    return merges


def build_gemma3_tokenizer(gguf_path: str | Path):
    """A ``PreTrainedTokenizerFast`` equivalent to Gemma 3's SentencePiece BPE tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    v = read_gguf_vocab(gguf_path)
    tokens, types = v["tokens"], v["types"]
    if v["model"] != "llama" or not tokens or len(set(tokens)) != len(tokens):
        raise ValueError(f"{gguf_path}: not a SentencePiece vocabulary this builder understands")
    # GGUF keeps the user-defined runs of spaces with real spaces; as pieces they are "▁▁", ...
    tokens = [t.replace(" ", SPACE) if ty == USER_DEFINED else t for t, ty in zip(tokens, types)]
    vocab = {tok: i for i, tok in enumerate(tokens)}

    def name(key):  # token string of a special id, None where the GGUF sets none
        return tokens[v[key]] if v[key] is not None else None

    unk, bos = name("unk"), name("bos")

    tk = Tokenizer(BPE(vocab=vocab, merges=bpe_merges(tokens, v["scores"], types), unk_token=unk,
                       fuse_unk=True, byte_fallback=True))
    tk.normalizer = normalizers.Replace(" ", SPACE)
    tk.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    # user-defined pieces match whole in the normalized text, control tokens only verbatim
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == CONTROL])
    tk.add_tokens([AddedToken(t, special=False, normalized=True)
                   for t, ty in zip(tokens, types) if ty == USER_DEFINED])

    if bos is not None and v["add_bos"]:  # <bos> first (cscore itself encodes without special tokens)
        tk.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, v["bos"])])

    extra = {"model_max_length": int(v["context_length"])} if v["context_length"] else {}
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=bos, eos_token=name("eos"), pad_token=name("pad"),
                                   unk_token=unk, **extra)
