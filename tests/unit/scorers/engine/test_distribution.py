"""The distributional statistics (issue 49 item 1) against a float64 reference computed from the full
distributions of a plain forward pass of each model, on tiny random llamas: every head, every kept
temperature, whatever the batching, padding, prefix sharing or the amateur's kind (another model, an
early exit of the expert)."""

import numpy as np
import pytest
import torch

from cscore import ModelPair
from cscore.errors import ConfigError
from cscore.scorers.engine.stats import DIST_NAMES

PROMPT = "Summarise the following text:\nThe council opened a new bridge over the river.\nSummary:\n"
PROMPTS = [PROMPT, PROMPT, PROMPT, "Translate the following sentence:\nThe team won the final.\n", "Researchers found"]
HYPS = ["A bridge was opened.", "The council opened a bridge.", "A new bridge.", "The team won the final match.",
        " that the river rose"]
TEMPS = (0.5, 1.0, 1.5)


def full_logprobs(model, tok, prompt: str, hyp: str, t: float) -> torch.Tensor:
    """float64 log p_T over the whole vocabulary at each position that predicts a hypothesis token."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    h = tok(hyp, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([p + h])).logits[0].double()
    return torch.log_softmax(logits[len(p) - 1:len(p) - 1 + len(h)] / t, dim=-1)


def reference(le: torch.Tensor, la: torch.Tensor) -> dict[str, np.ndarray]:
    """Each statistic from its textbook definition over the full distributions (float64)."""
    pe, pa = le.exp(), la.exp()
    m = (pe + pa) / 2
    out = {"entropy_e": -(pe * le).sum(-1), "entropy": -(pa * la).sum(-1),
           "xent_ea": -(pe * la).sum(-1), "xent_ae": -(pa * le).sum(-1),
           "kl_ea": (pe * (le - la)).sum(-1), "kl_ae": (pa * (la - le)).sum(-1),
           "jsd": 0.5 * (pe * (pe / m).log()).sum(-1) + 0.5 * (pa * (pa / m).log()).sum(-1)}
    return {k: v.numpy() for k, v in out.items()}


@pytest.fixture(scope="module")
def pair32(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32")


def check_against_reference(st, expert_model, amateur_model, tok, rtol=1e-5):
    for i, (p, h) in enumerate(zip(PROMPTS, HYPS)):
        for t in TEMPS:
            want = reference(full_logprobs(expert_model, tok, p, h, t), full_logprobs(amateur_model, tok, p, h, t))
            sl = st.stats["expert"].item(i)
            np.testing.assert_allclose(st.stats["expert"].statistic("entropy", t)[sl], want["entropy_e"], rtol=rtol)
            for name in DIST_NAMES:
                np.testing.assert_allclose(st.stats["amateur"].statistic(name, t)[sl], want[name], rtol=rtol,
                                           err_msg=f"{name} at T={t}, item {i}")


@pytest.mark.parametrize("budget, side, sharing", [(1, "right", False), (64, "left", True),
                                                    (100000, "right", True), (100000, "left", False)])
def test_every_statistic_equals_the_full_distributions(pair32, budget, side, sharing):
    """float32 models, relative error <= 1e-5 against float64 sums over the full vocabulary, for every
    batch size (one item per batch to all at once), padding side and with or without prefix sharing
    (three of the items share their prompt)."""
    st = pair32.statistics(PROMPTS, HYPS, temperatures=TEMPS, token_budget=budget, padding_side=side,
                           prefix_sharing=sharing, distribution=True)
    check_against_reference(st, pair32.expert.model, pair32.amateur.model, pair32.tokenizer)


def test_the_joint_pass_keeps_the_plain_statistics(pair32):
    """The log-probabilities of a joint pass are those of the separate passes (float32 rounding)."""
    plain = pair32.statistics(PROMPTS, HYPS, temperatures=TEMPS)
    joint = pair32.statistics(PROMPTS, HYPS, temperatures=TEMPS, distribution=True)
    for role in ("expert", "amateur"):
        for t in TEMPS:
            np.testing.assert_allclose(joint.stats[role].lp(t), plain.stats[role].lp(t), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(joint.stats[role].lp_max(t), plain.stats[role].lp_max(t), rtol=1e-5, atol=1e-6)
        assert not plain.stats[role].dist


def test_an_early_exit_amateur_rides_on_the_expert_pass(tiny_dirs):
    pair = ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, dtype="float32")
    st = pair.statistics(PROMPTS, HYPS, temperatures=TEMPS, distribution=True)
    exit_model = pair.amateur.model
    check_against_reference(st, pair.expert.model, exit_model, pair.tokenizer)


def test_a_plain_pass_refuses_to_read_them_in_one_line(pair32):
    st = pair32.statistics(PROMPTS[:1], HYPS[:1], temperatures=(1.0,))
    with pytest.raises(ConfigError) as err:
        st.stats["amateur"].statistic("jsd", 1.0)
    assert "\n" not in str(err.value) and "binoculars" in str(err.value)


def test_sharded_and_cached_they_are_bit_identical(pair32, tmp_path):
    """2 or 3 shards (each its partials, merged by the last) equal the unsharded pass bit for bit,
    the distributional statistics included; the entry reads back whole, under a key of its own
    beside the plain pass's."""
    from cscore.errors import ShardsPending
    from cscore.scorers.store.cache import StatsCache
    from cscore.scorers.store.runner import InProcess

    prompts, hyps = PROMPTS * 4, [h + " again" * (i % 3) for i, h in enumerate(HYPS * 4)]
    inputs = pair32.encode(prompts, hyps)
    kw = dict(inputs=inputs, temperatures=(0.5, 1.0), token_budget=48, distribution=True)
    want = pair32.statistics(cache=StatsCache(tmp_path / "one"), **kw)
    (key,) = StatsCache(tmp_path / "one").keys()  # one joint pass: its entry names both models
    meta = StatsCache(tmp_path / "one").meta(key)
    assert meta["heads"] == ["expert", "amateur"]
    assert meta["extra"]["models"] == [f"expert: {pair32.expert.name}", f"amateur: {pair32.amateur.name}"]
    for count in (2, 3):
        cache = StatsCache(tmp_path / f"s{count}", checkpoint_seconds=0)
        for k in range(count - 1):
            with pytest.raises(ShardsPending):
                pair32.statistics(cache=cache, coordinator=InProcess(count, k), **kw)
        got = pair32.statistics(cache=cache, coordinator=InProcess(count, count - 1), **kw)
        for role in ("expert", "amateur"):
            assert sorted(got.stats[role].dist) == sorted(want.stats[role].dist)
            for name, arr in want.stats[role].dist.items():
                assert np.array_equal(got.stats[role].dist[name], arr), (count, role, name)
            assert np.array_equal(got.stats[role].logp, want.stats[role].logp)
    again = pair32.statistics(cache=StatsCache(tmp_path / "one"), **kw)
    assert all(r.cached for r in again.reports.values())
    assert np.array_equal(again.stats["amateur"].dist["jsd"], want.stats["amateur"].dist["jsd"])
    plain = pair32.statistics(cache=StatsCache(tmp_path / "one"), **{**kw, "distribution": False})
    assert not any(r.cached for r in plain.reports.values()) and not plain.stats["amateur"].dist
    assert len(StatsCache(tmp_path / "one").keys()) == 3  # the joint pass; the expert's and the amateur's own


@pytest.fixture(params=["native", "torch"])
def kernel(request, monkeypatch):
    """A kernel-level test on both CPU kernels: the fused C one (``native``, checked to have run) and torch's."""
    from cscore.scorers.engine import native

    if request.param == "torch":
        monkeypatch.setattr(native, "usable", lambda blocks: False)
        yield request.param
        return
    if native.library() is None:
        pytest.skip("no C compiler here: the torch kernel is the one that runs")
    calls = []
    run = native.statistics
    monkeypatch.setattr(native, "statistics", lambda *a: calls.append(1) or run(*a))
    yield request.param
    assert calls, "the native kernel did not run"


def test_probabilities_that_underflow_count_as_zero(kernel):
    """Logits 2000 apart at T = 0.5: most of both distributions underflow float64 to 0; every
    statistic stays finite and equals the sums over the tokens that carry probability."""
    from cscore.scorers.engine import divergence

    z_e = torch.tensor([[0.0, -1.0, -2000.0, -3000.0, -2.5]])
    z_a = torch.tensor([[-0.5, 0.0, -3000.0, -2000.0, -1.0]])
    got = divergence.statistics({"expert": z_e, "amateur": z_a}, {}, (0.5,), "expert")
    keep = [0, 1, 4]  # the rest have probability 0 in both
    le, la = (torch.log_softmax(z[0, keep].double() / 0.5, -1) for z in (z_e, z_a))
    want = reference(le[None], la[None])
    assert got["expert"]["entropy"][0].item() == pytest.approx(float(want["entropy_e"][0]), rel=1e-12)
    for name in DIST_NAMES:
        assert np.isfinite(got["amateur"][name][0].item())
        assert got["amateur"][name][0].item() == pytest.approx(float(want[name][0]), rel=1e-9), name


def assert_reference(got: dict, le: torch.Tensor, la: torch.Tensor, temps) -> None:
    """Every statistic of ``divergence.statistics`` against log_softmax's float64 reference (0 log 0 = 0
    where a probability underflows)."""
    for j, t in enumerate(temps):
        lpe, lpa = torch.log_softmax(le.double() / t, -1), torch.log_softmax(la.double() / t, -1)
        want = reference(lpe, lpa)
        pe, pa = lpe.exp(), lpa.exp()
        m = (pe + pa) / 2
        want["jsd"] = (0.5 * torch.where(pe > 0, pe * (pe / m).log(), 0.0).sum(-1)
                       + 0.5 * torch.where(pa > 0, pa * (pa / m).log(), 0.0).sum(-1)).numpy()
        np.testing.assert_allclose(got["expert"]["entropy"][j].numpy(), want["entropy_e"], rtol=1e-9, atol=1e-13)
        for name in DIST_NAMES:
            np.testing.assert_allclose(got["amateur"][name][j].numpy(), want[name], rtol=1e-9, atol=1e-13,
                                       err_msg=f"{name} T={t}")


@pytest.mark.parametrize("temps", [(0.25, 0.5, 1.0, 2.0), (1.0 / 3, 1.0), (0.7, 1.3), (1.0, 0.5, 1.0)])
def test_temperatures_read_as_powers_equal_their_own_exp(temps, kernel):
    """Temperatures whose 1/T are multiples of one base read exp once and its powers (``divergence.groups``),
    a temperature twice reads it once; every statistic still equals log_softmax's float64 reference,
    including rows that underflow in places (logits 900 apart)."""
    from cscore.scorers.engine import divergence

    g = torch.Generator().manual_seed(3)
    le = torch.randn(7, 300, generator=g) * 4
    la = le + torch.randn(7, 300, generator=g)
    le[0, :5] -= 900.0
    assert_reference(divergence.statistics({"expert": le, "amateur": la}, {}, temps, "expert"), le, la, temps)


def test_bfloat16_logits_read_as_their_float32_values(kernel):
    """A bfloat16 head's logits (one head bfloat16, the other float32) give what their float32 values give."""
    from cscore.scorers.engine import divergence

    g = torch.Generator().manual_seed(13)
    le = (torch.randn(4, 1000, generator=g) * 4).bfloat16()
    la = torch.randn(4, 1000, generator=g) * 4
    targets = torch.randint(0, 1000, (4,), generator=g)
    half = divergence.statistics({"expert": list(le.split(300, 1)), "amateur": la}, {}, TEMPS, "expert", targets)
    full = divergence.statistics({"expert": list(le.float().split(300, 1)), "amateur": la}, {}, TEMPS, "expert",
                                 targets)
    assert_reference(half, le.float(), la, TEMPS)
    for h in half:
        for name, value in half[h].items():
            assert torch.equal(value, full[h][name]), (h, name)


def test_one_exp_per_group_of_temperatures():
    """The default temperatures are one group (1/T = 2, 3, 6 times 1/3); 0.7 and 1.3 share no small base."""
    from cscore.scorers.engine.divergence import groups

    (base, powers), = groups((0.5, 1.0, 1.5))
    assert base == pytest.approx(1 / 3) and powers == {2: [2], 3: [1], 6: [0]}
    (base, powers), = groups((0.25, 0.5, 1.0, 2.0))
    assert base == 0.5 and powers == {1: [3], 2: [2], 4: [1], 8: [0]}
    assert [p for _, p in groups((0.7, 1.3))] == [{1: [1]}, {1: [0]}]
    assert groups((1.0, 1.0)) == [(1.0, {1: [0, 1]})]


def test_column_blocks_and_a_larger_logit_past_the_first_block(monkeypatch, kernel):
    """Logits as column blocks (a joint pass's linear heads on a CPU), read in chunks that span blocks,
    give what the whole logits give, rows whose largest logit lies far past their first block
    included; every statistic equals the float64 reference; logp and logp_max equal
    ``token_statistics``'s, and every row's numbers are the same bits whatever rows it is computed with."""
    from cscore.scorers.engine import divergence
    from cscore.scorers.engine.head import token_statistics

    g = torch.Generator().manual_seed(11)
    le = torch.randn(6, 2077, generator=g) * 4
    la = le + torch.randn(6, 2077, generator=g)
    le[2, 1800] += 3000.0  # a point mass in the expert: entropy 0
    la[4, 1500] += 800.0  # the amateur's mass on one token: the rest underflow at T = 0.5
    targets = torch.randint(0, 2077, (6,), generator=g)
    targets[4] = 1500
    as_blocks = {h: [z[:, c:c + 700].contiguous() for c in range(0, 2077, 700)] for h, z in (("expert", le),
                                                                                            ("amateur", la))}
    whole = divergence.statistics({"expert": le, "amateur": la}, {}, TEMPS, "expert", targets)
    blocked = divergence.statistics(as_blocks, {}, TEMPS, "expert", targets)
    assert_reference(blocked, le, la, TEMPS)
    monkeypatch.setattr(divergence, "CPU_CHUNK", 500)  # chunks 0-500, ..., 2000-2077 across the edges at 700, 1400
    chunked = divergence.statistics(as_blocks, {}, TEMPS, "expert", targets)
    for h in chunked:
        for name, value in chunked[h].items():
            np.testing.assert_allclose(value.numpy(), whole[h][name].numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    monkeypatch.setattr(divergence, "CPU_CHUNK", 16384)
    for h, z in (("expert", le), ("amateur", la)):
        lp, lpm = token_statistics(z, targets, TEMPS)
        np.testing.assert_allclose(blocked[h]["logp"].numpy(), lp.double().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(blocked[h]["logp_max"].numpy(), lpm.double().numpy(), rtol=1e-6, atol=1e-6)
        for name, value in blocked[h].items():
            np.testing.assert_allclose(value.numpy(), whole[h][name].numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    for rows in ([4], [1, 2]):
        part = divergence.statistics({h: [b[rows] for b in bs] for h, bs in as_blocks.items()}, {}, TEMPS, "expert",
                                     targets[rows])
        for h in part:
            for name, value in part[h].items():
                assert torch.equal(value, blocked[h][name][:, rows]), (rows, h, name)


def test_the_accelerator_path_blocks_of_rows_over_the_whole_vocabulary(monkeypatch):
    """On an accelerator rows go in blocks over the whole vocabulary (``divergence.by_blocks``), a row
    whose exp underflows in both models again on its own; run here on the CPU, every statistic
    equals the float64 reference and the one-row path."""
    from cscore.scorers.engine import divergence

    g = torch.Generator().manual_seed(7)
    le = torch.randn(9, 500, generator=g) * 4
    la = le + torch.randn(9, 500, generator=g)
    le[3, :4] -= 2000.0
    la[3, :4] -= 2000.0  # both underflow there at every temperature: row 3 runs again, floored
    targets = torch.randint(0, 500, (9,), generator=g)
    one_row = divergence.statistics({"expert": le, "amateur": la}, {}, TEMPS, "expert", targets)
    monkeypatch.setattr(divergence, "by_blocks", lambda device: True)
    monkeypatch.setattr(divergence, "BLOCK_ELEMENTS", 4 * 500)  # blocks of 4 rows: 4, 4 and 1
    blocks = divergence.statistics({"expert": le, "amateur": la}, {}, TEMPS, "expert", targets)
    keep = torch.ones(500, dtype=torch.bool)
    keep[:4] = False
    assert_reference({h: {k: v[:, [3]] for k, v in d.items()} for h, d in blocks.items()},
                     le[[3]][:, keep], la[[3]][:, keep], TEMPS)
    rest = [0, 1, 2, 4, 5, 6, 7, 8]
    assert_reference({h: {k: v[:, rest] for k, v in d.items()} for h, d in blocks.items()}, le[rest], la[rest], TEMPS)
    for h in blocks:
        for name, value in blocks[h].items():
            np.testing.assert_allclose(value.numpy(), one_row[h][name].numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


def test_both_kernels_agree_and_without_a_compiler_the_torch_one_runs(monkeypatch, tmp_path, caplog):
    """The fused C kernel and torch's give the same statistics (to float64 rounding); where the C kernel
    cannot be built (here: a compiler that fails) one warning says so and the torch kernel runs."""
    from cscore.scorers.engine import divergence, native

    g = torch.Generator().manual_seed(5)
    le = torch.randn(5, 3000, generator=g) * 3
    la = le + torch.randn(5, 3000, generator=g) * 0.01  # close distributions: KL and JSD ~1e-5 of H
    targets = torch.randint(0, 3000, (5,), generator=g)
    monkeypatch.setenv("CSCORE_NATIVE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")
    native.library.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=native.__name__):
            assert native.library() is None and not native.usable({"expert": [le]})
            fallback = divergence.statistics({"expert": le, "amateur": la}, {}, TEMPS, "expert", targets)
        assert "the torch kernel runs instead" in caplog.text and "false failed" in caplog.text
        monkeypatch.setenv("CSCORE_NATIVE", "0")
        native.library.cache_clear()
        assert native.library() is None
    finally:
        native.library.cache_clear()
    monkeypatch.undo()
    if native.library() is None:
        pytest.skip("no C compiler here")
    fused = divergence.statistics({"expert": le, "amateur": la}, {}, TEMPS, "expert", targets)
    assert_reference(fused, le, la, TEMPS)
    for h in fused:
        for name, value in fused[h].items():
            np.testing.assert_allclose(value.numpy(), fallback[h][name].numpy(), rtol=1e-10, atol=1e-14, err_msg=name)
