"""Prefix sharing in the causal-LM engine: items with identical prompt ids are packed into one
row (prompt once, hypotheses after it, block-causal mask) and give the statistics of the
unshared path: float64 to 1e-9, float32 within the float32 tolerance of conftest."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from cscore.scorers.api import ModelPair
from cscore.scorers.engine import engine
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.models.models import load_model
from cscore.scorers.store.cache import StatsCache

HEADS = {"expert": None, "amateur": 2}  # the full 4-layer model and an early exit after 2 layers
TEMPS = (0.5, 1.0, 1.5)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tiny_dirs):
    return {dt: load_model(tiny_dirs.expert, dtype=dt).model for dt in ("float64", "float32")}


def make_items(seed: int = 0):
    """Three prompts with 7, 5 and 4 hypotheses, four singletons, in shuffled order; one singleton
    prompt is a prefix of a shared prompt (different ids: not grouped)."""
    rng = np.random.default_rng(seed)
    prompts = [[int(x) for x in rng.integers(4, 390, n)] for n in (31, 12, 47)]
    items = []
    for p, k in zip(prompts, (7, 5, 4)):
        items += [(p, [int(x) for x in rng.integers(4, 390, rng.integers(1, 13))]) for _ in range(k)]
    for n in (9, 1, 20):
        items.append(([int(x) for x in rng.integers(4, 390, n)], [int(x) for x in rng.integers(4, 390, 5)]))
    items.append((prompts[0][:10], [int(x) for x in rng.integers(4, 390, 6)]))
    order = rng.permutation(len(items))
    return [items[i] for i in order]


ITEMS = make_items()


def run(model, items=ITEMS, **kw):
    return engine.compute(model, items, temperatures=TEMPS, heads=HEADS, options=PassOptions(**kw))


def assert_same(a, b, atol=1e-9):
    for h in HEADS:
        np.testing.assert_array_equal(a[h].offsets, b[h].offsets)
        np.testing.assert_array_equal(a[h].token_ids, b[h].token_ids)
        np.testing.assert_allclose(a[h].logp, b[h].logp, rtol=0, atol=atol)
        np.testing.assert_allclose(a[h].logp_max, b[h].logp_max, rtol=0, atol=atol)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("budget", [4096, 70, 1])
def test_shared_equals_unshared_in_float64(models, side, budget):
    """Full model and early exit; one batch, groups split over rows and batches (budget 70: a
    row holds the prompt and a few hypotheses), and a budget below every item (one item a row)."""
    ref, ref_report = run(models["float64"], token_budget=4096, padding_side="right", prefix_sharing=False)
    got, report = run(models["float64"], token_budget=budget, padding_side=side, prefix_sharing=True)
    assert_same(got, ref)
    if budget == 70:
        rows = engine.plan_rows(ITEMS, 70, True)
        counts = {}
        for r in rows:
            counts[tuple(r.prompt)] = counts.get(tuple(r.prompt), 0) + 1
            assert r.length <= 70 or not r.packed
        assert max(counts.values()) > 1  # some group runs over several rows
        assert report.batches > 1
        assert any(r.packed for r in rows)
    if budget == 1:
        assert report.tokens == ref_report.tokens  # nothing can be packed


def test_shared_float32_within_tolerance(models, f32):
    ref, _ = run(models["float32"], prefix_sharing=False)
    for side in ("left", "right"):
        got, _ = run(models["float32"], padding_side=side, token_budget=90)
        for h in HEADS:
            m = f32.typical_logp(ref[h])
            for k, t in enumerate(TEMPS):
                tol = f32.logp_tol(ref[h].logp[k], t, typical=m)
                assert np.all(np.abs(got[h].logp[k] - ref[h].logp[k]) <= tol), (side, h, t)


def test_sharing_processes_fewer_tokens(models):
    """Report and a hook on the first decoder layer agree: the shared pass feeds each distinct
    prompt once (one batch), the unshared pass once per item."""
    seen = []
    layer0 = engine.decoder_layers(models["float64"])[0]

    def count(module, args, kwargs):  # (batch, width) of the states entering the first layer
        seen.append(tuple((args[0] if args else kwargs["hidden_states"]).shape[:2]))

    handle = layer0.register_forward_pre_hook(count, with_kwargs=True)
    try:
        _, off = run(models["float64"], prefix_sharing=False)
        fed_off = sum(a * b for a, b in seen)
        seen.clear()
        _, on = run(models["float64"])
        fed_on = sum(a * b for a, b in seen)
    finally:
        handle.remove()
    prompts = {tuple(p) for p, _ in ITEMS}
    assert on.tokens == sum(len(p) for p in prompts) + sum(len(h) for _, h in ITEMS)
    assert off.tokens == sum(len(p) + len(h) for p, h in ITEMS)
    assert (fed_on, fed_off) == (on.padded_tokens, off.padded_tokens)
    assert on.tokens < 0.6 * off.tokens and on.padded_tokens < 0.6 * off.padded_tokens


def test_rows_respect_the_budget_and_hold_every_item_once():
    for budget in (1, 40, 70, 200, 4096):
        rows = engine.plan_rows(ITEMS, budget, True)
        members = sorted(i for r in rows for i in r.members)
        assert members == list(range(len(ITEMS)))
        for r in rows:
            assert all(ITEMS[i][0] == r.prompt for i in r.members)
            assert r.length == len(r.prompt) + sum(len(ITEMS[i][1]) for i in r.members)
            assert r.length <= budget or len(r.members) == 1
    assert len(engine.plan_rows(ITEMS, 4096, False)) == len(ITEMS)
    lengths = [100, 95, 60, 58, 30]  # packed rows batch with at most 10 % padding
    batches = engine.make_batches(lengths, 4096, max_padding=0.1)
    assert sorted(i for b in batches for i in b) == list(range(5))
    assert all(max(lengths[i] for i in b) * len(b) <= 1.1 * sum(lengths[i] for i in b) for b in batches)
    assert engine.make_batches(lengths, 4096) == [[0, 1, 2, 3, 4]]
    # a sliding-window model: a group whose row would pass the window runs unshared
    rows = engine.plan_rows(ITEMS, 4096, True, window=40)
    assert all(len(r.prompt) + max(len(ITEMS[i][1]) for i in r.members) <= 40 for r in rows if r.packed)
    assert not any(r.packed and len(r.prompt) == 47 for r in rows)


def test_unshared_batches_cap_their_padding(models):
    """Single items batch under the same padding cap as packed rows: lengths 100, 95, 60, 58, 30, 29
    make three batches by hand (one batch would pad 600 slots for 372 tokens, 61 % more); a pass
    with sharing off pads at most 10 % over its tokens and scores as the shared pass does."""
    items = [([5] * (n - 4), [7, 8, 9, 10]) for n in (60, 30, 100, 29, 95, 58)]
    rows = engine.plan_rows(items, 4096, False)
    batches = [[r.members[0] for r in b] for b in engine.batch_rows_of(rows, 4096)]
    assert batches == [[2, 4], [0, 5], [1, 3]]
    ref, _ = run(models["float64"], prefix_sharing=True)
    got, off = run(models["float64"], prefix_sharing=False)
    assert off.batches > 1 and off.padded_tokens <= (1 + engine.MAX_PADDING) * off.tokens
    assert_same(got, ref)


def test_sharing_window_reads_the_config():
    def model(**config):
        return SimpleNamespace(config=SimpleNamespace(**config))

    assert engine.sharing_window(model(_attn_implementation="sdpa", sliding_window=None)) > 1 << 40
    assert engine.sharing_window(model(_attn_implementation="eager", layer_types=["full_attention"] * 2,
                                       sliding_window=512)) > 1 << 40
    assert engine.sharing_window(model(_attn_implementation="sdpa", layer_types=["sliding_attention", "full_attention"],
                                       sliding_window=512)) == 512
    assert engine.sharing_window(model(_attn_implementation="flash_attention_2")) is None
    assert engine.sharing_window(SimpleNamespace()) is None  # not a transformers model: unshared


def test_eager_attention_takes_the_additive_mask(tiny_dirs, f32):
    """Eager attention takes an additive mask. Its softmax runs in float32 even for a float64
    model, so the float32 tolerance applies. Right padding: under eager attention a left-padded
    row's all-masked pad queries give NaN in either path (transformers' 2D mask, not packing)."""
    model = load_model(tiny_dirs.expert, dtype="float64").model
    model.config._attn_implementation = "eager"
    ref, _ = run(model, prefix_sharing=False)
    got, _ = run(model, token_budget=70)
    for h in HEADS:
        for k, t in enumerate(TEMPS):
            tol = f32.logp_tol(ref[h].logp[k], t, typical=f32.typical_logp(ref[h]))
            assert np.all(np.abs(got[h].logp[k] - ref[h].logp[k]) <= tol), (h, t)


def test_model_without_a_custom_mask_runs_unshared(toy_bigram):
    table = torch.randn(12, 12, dtype=torch.float64)
    toy = toy_bigram(table).double()
    items = [([1, 2, 3], [4, 5]), ([1, 2, 3], [6]), ([7], [8, 9])]
    on, r_on = engine.compute(toy, items, temperatures=(1.0,), heads={"m": None})
    off, r_off = engine.compute(toy, items, temperatures=(1.0,), heads={"m": None},
                                options=PassOptions(prefix_sharing=False))
    assert r_on.tokens == r_off.tokens
    np.testing.assert_array_equal(on["m"].logp, off["m"].logp)


def test_cache_keys_tell_the_two_paths_apart(tiny_dirs, tmp_path):
    pair = ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float64")
    cache = StatsCache(tmp_path / "stats")
    prompts, hyps = ["The mayor opened a bridge."] * 3, [" It was new.", " Nobody came.", " The river rose."]
    on = pair.statistics(prompts, hyps, cache=cache)
    off = pair.statistics(prompts, hyps, cache=cache, prefix_sharing=False)
    assert not any(r.cached for r in off.reports.values())  # not the shared entry
    again = pair.statistics(prompts, hyps, cache=cache, prefix_sharing=False)
    assert all(r.cached for r in again.reports.values())
    parts = [cache.meta(k).get("parts", {}) for k in cache.keys()]
    assert len(parts) == 2
    assert sorted("prefix_sharing" in p for p in parts) == [False, True]  # the unshared key is as before
    for name in ("expert", "amateur"):
        np.testing.assert_allclose(on.score("single", model=name), off.score("single", model=name), rtol=0, atol=1e-9)


@pytest.mark.slow
def test_cli_with_and_without_sharing_gives_the_same_scores(tiny_dirs, tmp_path, cscore_main):
    """One two-point multirun (runtime.prefix_sharing=true,false) on a quarter of the demo set's
    groups (shared prompts kept whole), float64: the same scores to 1e-9 (in this process: one
    thread, the suite's)."""
    args = ["run", "-m", f"pair.expert.path={tiny_dirs.expert}", "pair.amateur.early_exit=2", "pair.name=tiny",
            "runtime.progress=false", "runtime.dtype=float64", "cache.enabled=false", "split.use=dev",
            "split.dev_fraction=0.25", "runtime.prefix_sharing=true,false", f"hydra.sweep.dir={tmp_path / 'sw'}"]
    res = cscore_main(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    a, b = (pd.read_parquet(tmp_path / "sw" / k / "scores.parquet") for k in ("0", "1"))
    assert len(a) == len(b) > 0 and list(a["id"]) == list(b["id"])
    assert "prefix_sharing: true" in (tmp_path / "sw" / "0" / "config.yaml").read_text()
    assert "prefix_sharing: false" in (tmp_path / "sw" / "1" / "config.yaml").read_text()
    assert a["prompt"].nunique() < len(a)  # the demo data has shared prompts
    cols = [c for c in a.columns if c.startswith("score.")]
    assert cols
    for col in cols:
        np.testing.assert_allclose(a[col], b[col], rtol=1e-10, atol=1e-9, err_msg=col)  # float64 sums: scale


@pytest.mark.parametrize("prompts", ["never", "always"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_packed_attention_equals_the_dense_block_causal_mask(models, side, prompts, monkeypatch):
    """Packed rows of an SDPA model run through packed_attention (prompt causal on its own, one call
    each or all of a batch's prompts padded into one call as on CUDA; the hypotheses against
    prompt + own keys); the dense mask gives the same numbers, and the sparse path is really taken
    (layouts seen by the attention function, the config restored after)."""
    from cscore.scorers.engine import packed_attention

    model = models["float64"]
    monkeypatch.setattr(packed_attention, "BATCH_PROMPTS", prompts)
    monkeypatch.setattr(engine, "PACKED_CUDA", "sparse")  # where the models load on a GPU, its sparse path too
    sparse, seen = run_spied(model, monkeypatch, packed_attention.Layout, side)
    monkeypatch.setattr(engine, "SPARSE_PACKED", False)
    dense, _ = run(model, token_budget=70, padding_side=side)
    assert seen and model.config._attn_implementation == "sdpa"
    assert_same(sparse, dense, atol=1e-12)


def run_spied(model, monkeypatch, kind: type, side: str):
    """``run`` with packed_attention's registered function spied on: (statistics, whether some call saw
    a layout or mask of type ``kind`` set). The function is looked up by name at each forward."""
    from cscore.scorers.engine import packed_attention

    seen = []
    real = packed_attention.attention

    def spy(*args, **kwargs):
        seen.append(isinstance(packed_attention._PACKED.get(), kind))
        return real(*args, **kwargs)

    monkeypatch.setattr(packed_attention, "attention", spy)
    packed_attention.register()
    try:
        got, _ = run(model, token_budget=70, padding_side=side)
    finally:
        monkeypatch.setattr(packed_attention, "attention", real)
        packed_attention.register()
    return got, any(seen)


def test_sparse_path_builds_no_row_by_row_mask(models):
    """For a model that takes packed_attention, pad_rows gives only the key padding
    [rows, 1, 1, width] (no [rows, width, width] tensor); the model's output on it equals the
    dense block-causal mask's, and a model that needs the dense mask refuses the short one."""
    model = models["float64"]
    rows = [r for r in engine.plan_rows(ITEMS, 70, True) if r.packed][:3]
    width = max(r.length for r in rows)
    args = (ITEMS, rows, 0, "left", torch.device("cpu"), torch.float64, "sdpa")
    ids, short, pos, where = engine.pad_rows(*args, dense_mask=False)
    ids2, full, pos2, where2 = engine.pad_rows(*args)
    assert short.shape == (len(rows), 1, 1, width) and full.shape == (len(rows), 1, width, width)
    assert torch.equal(ids, ids2) and torch.equal(pos, pos2) and where == where2
    real = torch.zeros(ids.shape, dtype=torch.bool)  # prompt and hypothesis columns
    for i, (r, last_prompt, first) in where.items():
        real[r, last_prompt + 1 - len(rows[r].prompt):last_prompt + 1] = True
        real[r, first:first + len(ITEMS[i][1])] = True
    assert torch.equal(short[:, 0, 0], real) and not real.all()  # left padding: some columns are pads
    got = engine.run_base(model, ids, short, pos, ITEMS, rows, where)
    ref = engine.run_base(model, ids, full, pos, ITEMS, rows, where)
    torch.testing.assert_close(got[real], ref[real], rtol=0, atol=1e-12)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "SPARSE_PACKED", False)
        with pytest.raises(ValueError, match="key-padding"):
            engine.run_base(model, ids, short, pos, ITEMS, rows, where)


def test_flat_rows_lay_a_batch_end_to_end_without_padding(models):
    """``flat_rows``: the packed rows of a batch in one unpadded sequence (several prompts in row
    0): every token the items read is where ``where`` says, with the position it has in its own
    row, and the hidden states of the prompts and hypotheses equal those of the padded batch
    (float32, bit for bit), so the engine's statistics are unchanged."""
    model = models["float32"]
    rows = [r for r in engine.plan_rows(ITEMS, 70, True) if r.packed][:3]
    assert len({r.length for r in rows}) == 3  # rows of unequal length: the padded batch has pads
    ids, mask, pos, where = engine.flat_rows(ITEMS, rows, torch.device("cpu"))
    assert ids.shape == (1, sum(r.length for r in rows)) and mask.shape == (1, 1, 1, ids.shape[1]) and mask.all()
    pids, pmask, ppos, pwhere = engine.pad_rows(ITEMS, rows, 0, "right", torch.device("cpu"), torch.float32, "sdpa",
                                                dense_mask=False)
    assert pids.numel() > ids.numel() and sorted(where) == sorted(pwhere)
    got = engine.run_base(model, ids, mask, pos, ITEMS, rows, where)
    ref = engine.run_base(model, pids, pmask, ppos, ITEMS, rows, pwhere)
    for i, (r, last_prompt, first) in where.items():
        pr, plast, pfirst = pwhere[i]
        n_p, n_h = len(ITEMS[i][0]), len(ITEMS[i][1])
        assert ids[0, first:first + n_h].tolist() == ITEMS[i][1] and r == 0
        assert ids[0, last_prompt + 1 - n_p:last_prompt + 1].tolist() == ITEMS[i][0]
        assert pos[0, first:first + n_h].tolist() == list(range(n_p, n_p + n_h))
        assert torch.equal(got[0, last_prompt + 1 - n_p:last_prompt + 1], ref[pr, plast + 1 - n_p:plast + 1])
        assert torch.equal(got[0, first:first + n_h], ref[pr, pfirst:pfirst + n_h])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_packs_rows_under_the_dense_mask(models, monkeypatch):
    """On CUDA packed rows take the dense block-causal mask (measured faster there), on the CPU
    packed_attention; both give the dense mask's numbers."""
    model = models["float64"].to("cuda")
    try:
        assert not engine.sparse_packed(model)
        monkeypatch.setattr(engine, "PACKED_CUDA", "sparse")
        assert engine.sparse_packed(model)
        sparse, _ = run(model, token_budget=70)
        monkeypatch.setattr(engine, "PACKED_CUDA", "dense")
        dense, _ = run(model, token_budget=70)
        assert_same(sparse, dense, atol=1e-12)
    finally:
        model.to("cpu")


@pytest.mark.parametrize("side", ["left", "right"])
def test_flex_attention_block_mask_equals_the_dense_mask(models, side, monkeypatch):
    """packed_path "flex" (flex_attention under a BlockMask of the block-causal pattern; on CUDA
    compiled, here its eager reference form): the dense mask's numbers, and the flex path is
    really taken for the packed batches."""
    from torch.nn.attention.flex_attention import BlockMask

    model = models["float64"]
    monkeypatch.setattr(engine, "PACKED_CPU", "flex")
    monkeypatch.setattr(engine, "PACKED_CUDA", "flex")
    assert engine.packed_path(model) == "flex" and engine.sparse_packed(model)
    flex, seen = run_spied(model, monkeypatch, BlockMask, side)
    monkeypatch.setattr(engine, "SPARSE_PACKED", False)
    dense, _ = run(model, token_budget=70, padding_side=side)
    assert seen and model.config._attn_implementation == "sdpa"
    assert_same(flex, dense, atol=1e-12)


def test_flex_mask_is_the_block_causal_pattern():
    """The BlockMask's mask function, evaluated at every (query, key), is the dense mask of pad_rows."""
    rows = [r for r in engine.plan_rows(ITEMS, 70, True) if r.packed][:3]
    ids, full, _, where = engine.pad_rows(ITEMS, rows, 0, "left", torch.device("cpu"), torch.float32, "sdpa")
    from cscore.scorers.engine import packed_attention

    prompts = sorted({(r, lp - len(rows[r].prompt) + 1, len(rows[r].prompt)) for r, lp, _ in where.values()})
    hyps = [(r, first, len(ITEMS[i][1])) for i, (r, _, first) in where.items()]
    block = packed_attention.flex_mask(prompts, hyps, tuple(ids.shape), ids.device)
    b, w = ids.shape
    q = torch.arange(w)[:, None].expand(w, w)
    kv = torch.arange(w)[None, :].expand(w, w)
    for r in range(b):
        got = block.mask_mod(torch.tensor(r), torch.tensor(0), q, kv)
        assert torch.equal(got, full[r, 0])


@pytest.fixture(scope="module")
def gemma_like():
    """A tiny random Gemma 3 text model: two sliding-window layers (window 6) and a full one."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=6,
                              layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                              max_position_embeddings=256, attn_implementation="sdpa")
    return Gemma3ForCausalLM(config).double().eval()


def window_items():
    """A prompt of 3 tokens with hypotheses of 1-3 (each within the window), prompts of 9 and 14
    tokens (longer than it) with 1-7, and a singleton."""
    rng = np.random.default_rng(3)
    items = []
    for n, k, most in ((3, 4, 3), (9, 5, 7), (14, 4, 7)):
        p = [int(x) for x in rng.integers(4, 390, n)]
        items += [(p, [int(x) for x in rng.integers(4, 390, rng.integers(1, most + 1))]) for _ in range(k)]
    items.append(([int(x) for x in rng.integers(4, 390, 11)], [5, 6, 7]))
    return [items[i] for i in rng.permutation(len(items))]


@pytest.mark.parametrize("prompts", ["never", "always"])
@pytest.mark.parametrize("budget", [4096, 20])
def test_sliding_window_rows_are_shared_and_exact(gemma_like, monkeypatch, prompts, budget):
    """Packed rows of a sliding-window model give the unshared pass's log-probs (float64), rows
    longer than the window included: packed_attention applies each window layer's window to the
    positions of the unpacked sequence. The prompts as one batch or one call each."""
    from cscore.scorers.engine import packed_attention

    monkeypatch.setattr(packed_attention, "BATCH_PROMPTS", prompts)
    items = window_items()
    assert engine.sharing_window(gemma_like) == 6 and engine.row_window(gemma_like) == engine.UNBOUNDED
    heads = {"model": None}
    ref, off = engine.compute(gemma_like, items, temperatures=TEMPS, heads=heads,
                              options=PassOptions(prefix_sharing=False))
    got, on = engine.compute(gemma_like, items, temperatures=TEMPS, heads=heads,
                             options=PassOptions(token_budget=budget))
    np.testing.assert_allclose(got["model"].logp, ref["model"].logp, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got["model"].logp_max, ref["model"].logp_max, rtol=0, atol=1e-9)
    rows = engine.plan_rows(items, budget, True)
    assert any(r.packed and len(r.prompt) + sum(len(items[i][1]) for i in r.members) > 6 for r in rows)
    assert on.tokens == sum(r.length for r in rows) < off.tokens == sum(len(p) + len(h) for p, h in items)


def test_sliding_window_matters_here(gemma_like):
    """The check above can fail: the same model with its window ignored in packed rows (the mask
    of every layer full) scores the rows longer than the window differently."""
    items = window_items()
    ref, _ = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None},
                            options=PassOptions(prefix_sharing=False))
    gemma_like.config.sliding_window = 10_000
    try:
        wide, _ = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None},
                                 options=PassOptions(prefix_sharing=False))
    finally:
        gemma_like.config.sliding_window = 6
    assert np.abs(wide["model"].logp - ref["model"].logp).max() > 1e-3


def test_dense_path_keeps_long_rows_unshared(gemma_like, monkeypatch):
    """The dense packed mask (CUDA's path; SPARSE_PACKED=False here) makes transformers drop the
    window: rows whose prompt + hypothesis passes it run unshared there, and the log-probs stay
    those of the unshared pass."""
    items = window_items()
    ref, _ = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None},
                            options=PassOptions(prefix_sharing=False))
    monkeypatch.setattr(engine, "SPARSE_PACKED", False)
    assert engine.row_window(gemma_like) == 6
    got, on = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None})
    np.testing.assert_allclose(got["model"].logp, ref["model"].logp, rtol=0, atol=1e-9)
    rows = engine.plan_rows(items, PassOptions().token_budget, True, window=6)
    assert on.tokens == sum(r.length for r in rows)
    assert {len(r.prompt) for r in rows if r.packed} == {3}


def test_flex_path_keeps_long_rows_unshared(gemma_like, monkeypatch):
    """The flex block mask has no sliding window: there, as on the dense path, rows whose prompt +
    hypothesis passes the window run unshared, and the log-probs stay those of the unshared pass."""
    items = window_items()
    ref, _ = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None},
                            options=PassOptions(prefix_sharing=False))
    monkeypatch.setattr(engine, "PACKED_CPU", "flex")
    assert engine.row_window(gemma_like) == 6
    got, _ = engine.compute(gemma_like, items, temperatures=TEMPS, heads={"model": None})
    np.testing.assert_allclose(got["model"].logp, ref["model"].logp, rtol=0, atol=1e-9)


def test_judge_statistics_of_a_sliding_window_model_shared_and_exact(gemma_like):
    """The judge's pass (scorers/judge/judge.py) packs a sliding-window model's contexts past the window
    too, with the unshared statistics (float64): main model and an early exit after 2 layers."""
    from cscore.scorers.judge import judge

    rng = np.random.default_rng(5)
    docs = [[int(x) for x in rng.integers(4, 390, n)] for n in (12, 8)]
    contexts = [d + [int(x) for x in rng.integers(4, 390, 3)] + [20, 21] for d in docs for _ in range(3)]
    contexts = contexts + [c + [9] for c in contexts]
    scale = judge.Scale([1, 2, 3], [(5,), (6,), (7, 9)], [(9,)], 6, str)
    plain, plain_rep = judge.compute(gemma_like, contexts, scale, asst=2, options=PassOptions(prefix_sharing=False))
    got, rep = judge.compute(gemma_like, contexts, scale, asst=2, options=PassOptions(prefix_sharing=True))
    np.testing.assert_array_equal(got.main_top, plain.main_top)
    np.testing.assert_array_equal(got.front_ids, plain.front_ids)
    np.testing.assert_allclose(got.front_a, plain.front_a, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.front_z, plain.front_z, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.score_a, plain.score_a, rtol=0, atol=1e-9, equal_nan=True)
    assert rep.tokens < plain_rep.tokens * 0.7  # each document once per row, though longer than the window
