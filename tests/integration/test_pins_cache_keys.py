"""Cache-key pins: the statistics cache key (the 64-hex SHA-256 an entry is stored under) and its
key parts (meta.json ``parts``, what ``cscore cache info`` shows) of the token-statistics pass
(two whole models, and an early-exit amateur riding on the expert's pass), the judge pass
(method=cd_judge) and the seq2seq pass (a T5 pair, prompt=seq2seq), against
tests/integration/pins/cache_keys.json (issue 21: keep every cache key through the rebuild).

The models are built here so that nothing machine-specific reaches a key: the config.json files
are written by hand (none of transformers' version fields) and the weights come from numpy's
``default_rng(seed)`` and are written by safetensors with a fixed tensor order; the tokenizer is a
byte-level BPE with a fixed vocabulary (every byte a token, no merges, no training), so the
token ids are fixed by the inputs alone. The runs are the real ``cscore run`` (in this process)
on three fixed demo rows, forced to ``runtime.device=cpu runtime.dtype=float32`` (the device
type and the dtype are key parts). What can still move a key without any change to cscore: a
safetensors release that writes its header differently (the weight fingerprint hashes the file
bytes; 0.8 here) and transformers' Llama / T5 parameter names (they name the tensors written).
``test_key_recipe`` checks the recipe alone (key = SHA-256 of the pinned parts), which holds on
any machine.

A mismatch prints a unified diff. Regenerate after an intended change:
``CSCORE_UPDATE_PINS=1 python -m pytest tests/integration/test_pins_*.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PIN = Path(__file__).parent / "pins" / "cache_keys.json"
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]  # ids 0 1 2 3
CHAT = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")
ROWS = ["demo-01-clean", "demo-01-disfluent", "demo-02-clean"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def save_tokenizer(path: Path, seq2seq: bool) -> int:
    """A byte-level BPE whose vocabulary is the four specials then the 256 byte symbols, no merges;
    T5 style (`` x </s>``) for seq2seq. Returns the vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate(SPECIALS + symbols)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.add_special_tokens(SPECIALS)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if seq2seq:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    if not seq2seq:
        fast.chat_template = CHAT
    fast.save_pretrained(path)
    return len(vocab)


def save_model(path: Path, config: dict, seed: int) -> str:
    """config.json as given, and model.safetensors: every distinct tensor of the model that config
    makes, in name order, matrices ~ N(0, 0.2), vectors ones, from ``default_rng(seed)``."""
    import numpy as np
    from safetensors.numpy import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    cfg = AutoConfig.from_pretrained(path)
    cls = AutoModelForSeq2SeqLM if cfg.is_encoder_decoder else AutoModelForCausalLM
    state = cls.from_config(cfg).state_dict()
    seen, shapes = set(), {}
    for name in sorted(state):
        ptr = state[name].data_ptr()
        if ptr not in seen:  # tied weights once
            seen.add(ptr)
            shapes[name] = tuple(state[name].shape)
    rng = np.random.default_rng(seed)
    tensors = {n: (rng.normal(0.0, 0.2, s) if len(s) == 2 else np.ones(s)).astype(np.float32)
               for n, s in shapes.items()}
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    return str(path)


def llama_config(vocab: int, layers: int) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab, "hidden_size": 16,
            "intermediate_size": 32, "num_hidden_layers": layers, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 8192, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
            "tie_word_embeddings": False, "torch_dtype": "float32"}


def t5_config(vocab: int, layers: int) -> dict:
    return {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "vocab_size": vocab, "d_model": 16,
            "d_kv": 8, "d_ff": 32, "num_layers": layers, "num_heads": 2, "dropout_rate": 0.0,
            "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 0,
            "torch_dtype": "float32"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pins_keys")
    out = {}
    for name, seq2seq, layers, seed in (("expert", False, 3, 11), ("amateur", False, 2, 12),
                                        ("t5", True, 2, 13), ("t5_small", True, 1, 14)):
        vocab = save_tokenizer(root / name, seq2seq)
        config = (t5_config if seq2seq else llama_config)(vocab, layers)
        out[name] = save_model(root / name, config, seed)
    return out


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    from cscore.data.demo import DEMO_FILE

    lines = [json.loads(line) for line in Path(DEMO_FILE).read_text().splitlines() if line.strip()]
    by_id = {r["id"]: r for r in lines}
    path = tmp_path_factory.mktemp("pins_rows") / "rows.jsonl"
    path.write_text("".join(json.dumps(by_id[i]) + "\n" for i in ROWS))
    return path


def pass_entries(cscore_main, tmp_path: Path, *args) -> dict[str, dict]:
    """The cache entries one run stores (a fresh cache): {its heads (``amateur+expert``),
    ``judge`` or ``judge_decode:<rule>`` (cd_judge's decoded paths): {key, parts}}."""
    from cscore.scorers.store.cache import StatsCache

    cache = tmp_path / "stats"
    tmp_path.mkdir()
    res = cscore_main("run", *args, "runtime.device=cpu", "runtime.dtype=float32", "runtime.progress=false",
                      "runtime.max_length=8192", f"cache.dir={cache}", f"hydra.run.dir={tmp_path / 'run'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    store = StatsCache(cache)
    out = {}
    for key in store.keys():
        parts = store.meta(key)["parts"]
        name = "+".join(parts["heads"]) if "heads" in parts else parts["kind"]
        out[f"{name}:{parts['rule']}" if "rule" in parts else name] = {"key": key, "parts": parts}
    return out


def run_args(models: dict, rows: Path) -> dict[str, list[str]]:
    """{pass: the run's overrides}: the contrast run of two whole models and of an early-exit
    amateur, the judge run, the seq2seq run."""
    data = ["data=demo", f"data.path={rows}"]
    pair = [f"pair.expert.path={models['expert']}", "pair.name=pins"]
    whole = [*pair, f"pair.amateur.path={models['amateur']}", "pair.amateur.early_exit=null"]
    exit_ = [*pair, "pair.amateur.path=null", "pair.amateur.early_exit=1"]
    t5 = [f"pair.expert.path={models['t5']}", f"pair.amateur.path={models['t5_small']}",
          "pair.amateur.early_exit=null", "pair.name=pins_t5", "prompt=seq2seq"]
    return {"token": [*data, *whole, "method=contrast"], "token_early_exit": [*data, *exit_, "method=contrast"],
            "judge": [*data, *whole, "method=cd_judge"], "seq2seq": [*data, *t5, "method=contrast"]}



def test_cache_keys_are_pinned(models, rows, tmp_path, cscore_main, pin_snapshot):
    """Each pass's entries (key and parts) as the real runs store them."""
    got = {name: pass_entries(cscore_main, tmp_path / name, *args) for name, args in run_args(models, rows).items()}
    assert {n: sorted(e) for n, e in got.items()} == {
        "token": ["amateur", "expert"],
        "token_early_exit": ["amateur+expert"],
        "judge": ["judge", "judge_decode:0.0", "judge_decode:0.1", "judge_decode:asst"],
        "seq2seq": ["amateur", "expert"],
    }
    pin_snapshot(PIN, json.dumps(got, indent=1, sort_keys=True) + "\n")


def test_key_recipe():
    """The key is ``stats_key`` of the parts: SHA-256 of their canonical JSON with the statistics
    format and cache schema versions (no model, no machine involved)."""
    from cscore.scorers.store.cache import stats_key

    pinned = json.loads(PIN.read_text())
    assert pinned, "no pinned keys"
    for name, stored in pinned.items():
        for head, entry in stored.items():
            assert stats_key(entry["parts"]) == entry["key"], f"{name} {head}: the key recipe changed"
