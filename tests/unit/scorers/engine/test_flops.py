"""Useful FLOPs (scorers/engine/flops.py) against independent counts: torch's FlopCounterMode on a real
forward for the per-token body, head and attention costs; the engine's dense block-causal mask for
the (query, key) pairs a packed row allows; metrics.json's speed figures for a real run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from cscore.scorers.engine import engine, flops
from cscore.scorers.engine.pass_options import PassOptions


@pytest.fixture(scope="module")
def llama(tiny_dirs):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_dirs.expert, attn_implementation="sdpa").eval()


def counted(fn) -> dict:
    """FLOPs by op name of one call, as torch's flop counter sees them."""
    with FlopCounterMode(display=False) as mode:
        fn()
    return {str(op).split(".")[1]: n for op, n in mode.get_flop_counts()["Global"].items()}


def test_costs_match_torch_flop_counter(tiny_dirs):
    from transformers import AutoModelForCausalLM

    # eager attention: its products are batched matrix products the counter sees (it skips CPU SDPA)
    llama = AutoModelForCausalLM.from_pretrained(tiny_dirs.expert, attn_implementation="eager").eval()
    c = flops.costs(llama)
    length = 11
    ids = torch.arange(3, 3 + length)[None]
    with torch.no_grad():
        by_op = counted(lambda: llama.model(input_ids=ids))
    # every projection is a matrix product: the body per token, exactly
    assert by_op["mm"] == c.body * length
    # eager attention computes the full square (masked afterwards): scores and values, 4 q per pair a layer
    assert by_op["bmm"] == c.pair * length * length
    hidden = torch.zeros(5, llama.config.hidden_size)
    with torch.no_grad():
        head = counted(lambda: llama.lm_head(hidden))
    assert head["mm"] == c.head * 5


def test_costs_by_hand(llama):
    cfg = llama.config
    d, f, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    q = cfg.num_attention_heads * (d // cfg.num_attention_heads)
    kv = cfg.num_key_value_heads * (d // cfg.num_attention_heads)
    c = flops.costs(llama)
    assert c.body == layers * (2 * d * (2 * q + 2 * kv) + 2 * 3 * d * f)
    assert c.head == 2 * d * cfg.vocab_size
    assert c.pair == 4 * q * layers and c.window_pair == 0 and c.window is None


def test_sliding_window_layers_are_counted_apart():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=6,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=8, sliding_window=4,
                           max_position_embeddings=64)
    c = flops.costs(Gemma3ForCausalLM(cfg))
    sliding = sum(t == "sliding_attention" for t in cfg.layer_types)
    assert 0 < sliding < 6
    assert c.window == 4 and c.window_pair == 4 * 16 * sliding and c.pair == 4 * 16 * (6 - sliding)
    # a query sees at most 4 keys: 1, 2, 3, 4, 4, 4
    assert flops.causal_pairs(0, 6, 4) == 18
    assert flops.causal_pairs(0, 6) == 21


def test_unknown_architectures_give_none():
    from transformers import T5Config, T5ForConditionalGeneration

    t5 = T5ForConditionalGeneration(T5Config(vocab_size=32, d_model=8, d_ff=16, num_layers=1, num_heads=2, d_kv=4))
    assert flops.costs(t5) is None
    assert flops.costs(torch.nn.Linear(2, 2)) is None


@pytest.mark.parametrize("prompt,hyps", [(5, [3]), (7, [2, 4, 1]), (1, [6, 6])])
def test_pairs_equal_the_engines_block_causal_mask(prompt, hyps):
    """The pairs a packed row allows, counted on the dense mask the engine builds for it."""
    items = [(list(range(10, 10 + prompt)), list(range(20, 20 + h))) for h in hyps]
    row = engine.Row(items[0][0], list(range(len(items))), prompt + sum(hyps))
    _, mask, _, _ = engine.pad_rows(items, [row], 0, "right", torch.device("cpu"), torch.float32, "sdpa",
                                    dense_mask=len(hyps) > 1)
    allowed = int(mask.sum()) if mask.dim() == 4 else int(np.tril(np.ones((row.length, row.length))).sum())
    want = flops.causal_pairs(0, prompt) + sum(flops.causal_pairs(prompt, h) for h in hyps)
    assert allowed == want


def test_engine_reports_the_useful_flops_of_its_rows(llama):
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(5, 300, n)) for n in (9, 4)]
    items = [(prompts[i % 2], list(rng.integers(5, 300, 2 + i))) for i in range(6)]
    c = flops.costs(llama)

    def by_hand(share: bool) -> int:
        total = 0
        for p, h in items if not share else []:
            total += c.body * (len(p) + len(h)) + 2 * c.head * len(h) + c.pair * flops.causal_pairs(0, len(p) + len(h))
        if share:
            for p in prompts:
                hs = [len(h) for q, h in items if q is p]
                total += c.body * (len(p) + sum(hs)) + 2 * c.head * sum(hs) + c.pair * (
                    flops.causal_pairs(0, len(p)) + sum(flops.causal_pairs(len(p), h) for h in hs))
        return total

    for share in (False, True):
        for budget in (64, 4096):  # padding and batching change nothing useful
            _, rep = engine.compute(llama, items, temperatures=[1.0], heads={"expert": None, "amateur": 2},
                                    options=PassOptions(token_budget=budget, prefix_sharing=share))
            assert rep.flops == by_hand(share), (share, budget)
    assert by_hand(True) < by_hand(False)


def test_mfu_and_peaks():
    assert flops.peak_flops(torch.device("cpu"), torch.float32) is None
    assert flops.mfu(2e12, 2.0, 1e12) == 1.0
    assert flops.mfu(None, 2.0, 1e12) is None and flops.mfu(1e12, 1.0, None) is None


def test_metrics_json_speed_has_useful_flops(tiny_sweep):
    runs = sorted(p for p in tiny_sweep.dir.glob("*/metrics.json"))
    assert runs
    first = json.loads(runs[0].read_text())["speed"]
    per_pass = [p["useful_flops"] for p in first["passes"].values()]
    assert all(isinstance(x, float) and x > 0 for x in per_pass)
    assert first["useful_flops"] == pytest.approx(sum(per_pass), rel=1e-12)
    assert first["mfu"] is None  # a CPU has no peak in the table
    later = json.loads(runs[1].read_text())["speed"]  # read from the cache: the computing pass's FLOPs
    assert later["useful_flops"] == first["useful_flops"] and later["mfu"] is None
