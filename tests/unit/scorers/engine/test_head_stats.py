"""The statistics read from the LM head's logits in their own dtype (scorers/engine/head.py): bfloat16
and soft-capped logits converted a block at a time give exactly what a float32 copy gave, no
float32 copy of all rows is made, float64 stays float64, and a bfloat16 model's statistics stay
within bfloat16's rounding of the float32 model's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cscore.scorers.engine import engine, head
from cscore.scorers.engine.pass_options import PassOptions
from cscore.tests.support.allocations import Allocations

TEMPS = (0.5, 1.0, 2.0, 0.7)


def logits_and_targets(n=37, vocab=3001, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(n, vocab, generator=g) * 4).to(dtype)
    return z, torch.randint(0, vocab, (n,), generator=g)


def test_bfloat16_logits_give_what_their_float32_copy_gives_bit_for_bit():
    z, t = logits_and_targets()
    got = head.token_statistics(z, t, TEMPS)
    want = head.token_statistics(z.float(), t, TEMPS)
    assert got[0].dtype == torch.float32
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_soft_capping_in_blocks_equals_capping_first():
    z, t = logits_and_targets(dtype=torch.float32)
    cap = 30.0
    got = head.token_statistics(z * 3, t, TEMPS, cap=cap)
    want = head.token_statistics(torch.tanh(z * 3 / cap) * cap, t, TEMPS)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    zb = (z * 3).to(torch.bfloat16)
    got = head.token_statistics(zb, t, TEMPS, cap=cap)
    want = head.token_statistics(torch.tanh(zb.float() / cap) * cap, t, TEMPS)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_float64_against_logsumexp():
    z, t = logits_and_targets(dtype=torch.float64)
    lp, lpm = head.token_statistics(z, t, TEMPS)
    assert lp.dtype == torch.float64
    for j, temp in enumerate(TEMPS):
        lse = torch.logsumexp(z / temp, dim=-1)
        want_lp = z.gather(1, t[:, None])[:, 0] / temp - lse
        want_lpm = z.max(dim=-1).values / temp - lse
        assert torch.allclose(lp[j], want_lp, rtol=0, atol=1e-12)
        assert torch.allclose(lpm[j], want_lpm, rtol=0, atol=1e-12)


def test_no_float32_copy_of_all_rows():
    z, t = logits_and_targets(n=64)
    with Allocations(torch.float32) as seen:
        head.token_statistics(z, t, TEMPS)
    rows = head.stats_rows(z)
    assert rows < 64
    assert seen.largest <= rows * z.shape[1]  # blocks only
    z32 = z.float()
    with Allocations(torch.float32) as seen:
        head.token_statistics(z32, t, TEMPS)  # the float32 path allocates no copy either
    assert seen.largest <= rows * z.shape[1]


def test_chunk_rows_for_memory():
    assert head.rows_for_memory(10 * 1000 * 2, 1000, 2) == 10
    assert head.rows_for_memory(1, 1000, 2) == 1
    assert head.rows_for_memory(1 << 40, 1000, 2) == 1 << 16
    assert head.chunk_rows(1000, torch.device("cpu"), 4) == head.HEAD_CHUNK_ELEMENTS // 1000


@pytest.mark.parametrize("share", [False, True])
def test_bfloat16_model_within_its_rounding_of_float32(tiny_dirs, share):
    from transformers import AutoModelForCausalLM

    rng = np.random.default_rng(1)
    prompt = list(rng.integers(5, 300, 12))
    items = [(prompt, list(rng.integers(5, 300, 6 + i))) for i in range(4)]
    got = {}
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(tiny_dirs.expert, dtype=dtype).eval()
        stats, _ = engine.compute(model, items, temperatures=TEMPS, options=PassOptions(prefix_sharing=share))
        got[dtype] = stats["model"]
    a, b = got[torch.float32], got[torch.bfloat16]
    # bfloat16 keeps 8 bits of mantissa: hidden states and logits differ by ~2**-8 relative, log p
    # by a few hundredths on these sharp random models; far from the float32 path it would be off by units
    diff = np.abs(a.logp - b.logp)
    assert np.median(diff) < 0.05 and np.max(diff) < 0.1 * (1 + np.max(np.abs(a.logp)))
