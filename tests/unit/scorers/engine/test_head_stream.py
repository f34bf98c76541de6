"""The LM head read once per batch on the CPU (scorers/engine/head_stream.py): blocks of the
vocabulary with a running log-sum-exp give ``token_statistics``' numbers to float32 rounding
(float64: to 1e-12), soft-capped and bfloat16 heads included; a row's numbers do not depend on
the rows beside it (bit for bit, however many rows and wherever the row stands); the matrix is read once per batch, an
early exit's rows with its model's; no logits of all rows x the vocabulary are held."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cscore.scorers.engine import engine, head, head_stream
from cscore.tests.support.allocations import Allocations

TEMPS = (0.5, 1.0, 2.0, 0.7)
BLOCK = 256  # blocks of the vocabulary in these tests: 3001 ids are 12 blocks, the last one partial


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(head_stream, "VOCAB_BLOCK", BLOCK)


def linear_and_rows(n=37, hidden=48, vocab=3001, dtype=torch.float32, seed=0, bias=False):
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(hidden, vocab, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(vocab, hidden, generator=g) * 0.6)
        if bias:
            lin.bias.copy_(torch.randn(vocab, generator=g))
    lin = lin.to(dtype)
    states = torch.randn(n, hidden, generator=g).to(dtype)
    targets = torch.randint(0, vocab, (n,), generator=g)
    if n >= 3:
        targets[:3] = torch.tensor([0, vocab - 1, BLOCK])  # the first id, the last, a block's first
    return lin, states, targets


def streamed(lin, states, targets, cap=None):
    return head_stream.streamed_statistics(head_stream.linear_blocks(lin), lin.out_features, states, targets,
                                           TEMPS, cap)


@pytest.mark.parametrize("cap", [None, 30.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_equals_whole_rows_to_float32_rounding(small_blocks, f32, dtype, cap):
    lin, states, targets = linear_and_rows(dtype=dtype, bias=True)
    with torch.no_grad():
        got = streamed(lin, states, targets, cap)
        want = head.token_statistics(lin(states), targets, TEMPS, cap)
    assert got[0].dtype == torch.float32
    for k, t in enumerate(TEMPS):
        for g, w in zip(got, want):
            w = w[k].numpy()
            assert np.all(np.abs(g[k].numpy() - w) <= f32.logp_tol(w, t, runs=2)), (t, np.abs(g[k].numpy() - w).max())


def test_float64_equals_logsumexp(small_blocks):
    lin, states, targets = linear_and_rows(dtype=torch.float64)
    with torch.no_grad():
        lp, lpm = streamed(lin, states, targets)
        z = lin(states)
    assert lp.dtype == torch.float64
    for k, t in enumerate(TEMPS):
        lse = torch.logsumexp(z / t, dim=-1)
        assert torch.allclose(lp[k], z.gather(1, targets[:, None])[:, 0] / t - lse, rtol=0, atol=1e-12)
        assert torch.allclose(lpm[k], z.max(dim=-1).values / t - lse, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_row_does_not_depend_on_the_rows_beside_it(small_blocks, dtype):
    lin, states, targets = linear_and_rows(n=40, dtype=dtype)
    with torch.no_grad():
        lp, lpm = streamed(lin, states, targets)
        for rows in ([5], [5, 6], [9, 5, 30], [5, 1, 2, 3, 4, 33, 17], list(range(39, -1, -2))):
            sel = torch.tensor(rows)
            a, b = streamed(lin, states[sel], targets[sel])
            assert torch.equal(a, lp[:, sel]) and torch.equal(b, lpm[:, sel]), rows


def test_the_matrix_is_read_once_in_blocks_for_all_rows(small_blocks):
    lin, states, targets = linear_and_rows(n=64)
    calls = []
    plain = head_stream.linear_blocks(lin)

    def counted(hidden, v0, v1):
        calls.append((hidden.shape[0], v0, v1))
        return plain(hidden, v0, v1)

    with torch.no_grad(), Allocations() as seen:
        head_stream.streamed_statistics(counted, lin.out_features, states, targets, TEMPS)
    assert [c[1:] for c in calls] == [(v, min(v + BLOCK, 3001)) for v in range(0, 3001, BLOCK)]
    assert all(rows == 64 for rows, _, _ in calls)
    assert seen.largest <= max(64 * BLOCK, lin.weight.numel())  # blocks only: never 64 x the vocabulary


def test_more_rows_than_a_stream_takes_are_split(small_blocks, monkeypatch):
    lin, states, targets = linear_and_rows(n=37)
    with torch.no_grad():
        want = streamed(lin, states, targets)
        monkeypatch.setattr(head_stream, "STREAM_ROWS", 8)
        got = streamed(lin, states, targets)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_no_rows_give_empty_statistics(small_blocks):
    lin, states, targets = linear_and_rows(n=0)
    with torch.no_grad():
        lp, lpm = streamed(lin, states, targets)
    assert lp.shape == lpm.shape == (len(TEMPS), 0)


def test_only_a_plain_linear_head_on_the_cpu_streams():
    lin, _, _ = linear_and_rows()
    model = torch.nn.Module()
    model.get_output_embeddings = lambda: lin
    assert head_stream.linear_head(model) is lin
    lin.register_forward_hook(lambda *a: None)
    assert head_stream.linear_head(model) is None
    other = torch.nn.Module()
    other.get_output_embeddings = lambda: torch.nn.Embedding(3, 2)
    assert head_stream.linear_head(other) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_engine_streams_an_early_exit_with_its_model(tiny_dirs, monkeypatch, f32, dtype):
    """The engine's pass (an early-exit pair: one model, two heads) equals the row chunks' (the
    path an accelerator takes), and each batch reads the matrix once for both heads."""
    from cscore.scorers.models.models import load_model

    model = load_model(tiny_dirs.expert, dtype=dtype).model
    rng = np.random.default_rng(3)
    items = [(list(rng.integers(5, 300, 9)), list(rng.integers(5, 300, 3 + i))) for i in range(7)]
    heads = {"expert": None, "amateur": 1}
    monkeypatch.setattr(head_stream, "VOCAB_BLOCK", 64)  # 400 ids: 7 blocks
    rows = []
    spied = head_stream.streamed_statistics

    def spy(blocks, vocab, hidden, targets, temperatures, cap=None):
        rows.append((hidden.shape[0], targets.shape[0]))
        return spied(blocks, vocab, hidden, targets, temperatures, cap)

    monkeypatch.setattr(head_stream, "streamed_statistics", spy)
    got, _ = engine.compute(model, items, temperatures=TEMPS, heads=heads)
    assert rows and sum(r for r, _ in rows) == 2 * sum(len(h) for _, h in items)
    monkeypatch.setattr(head_stream, "linear_head", lambda m: None)
    want, _ = engine.compute(model, items, temperatures=TEMPS, heads=heads)
    for h in heads:
        for k, t in enumerate(TEMPS):
            tol = 1e-12 if dtype == "float64" else f32.logp_tol(want[h].logp[k], t, runs=2)
            assert np.all(np.abs(got[h].logp[k] - want[h].logp[k]) <= tol), (h, t)
            assert np.all(np.abs(got[h].logp_max[k] - want[h].logp_max[k]) <= tol), (h, t)
