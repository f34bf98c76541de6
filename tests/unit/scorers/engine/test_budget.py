"""``runtime.token_budget=auto`` and the out-of-memory retry: a batch that does not fit is run
again with half the budget (the same statistics, float64 to 1e-9); one item that does not fit
alone is a one-line error. The device limit is injected: a forward pre-hook on the real model
raises torch's own OutOfMemoryError for batches over a size, as a GPU allocator would."""

import numpy as np
import pytest
import torch

from cscore.errors import CscoreError
from cscore.scorers.engine import budget, engine
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.models.models import load_model

TEMPS = (0.5, 1.0)
HEADS = {"expert": None, "amateur": 2}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tiny_dirs):
    return load_model(tiny_dirs.expert, dtype="float64").model


def items(seed=0):
    rng = np.random.default_rng(seed)
    prompts = [[int(x) for x in rng.integers(4, 390, n)] for n in (40, 25)]
    out = [(p, [int(x) for x in rng.integers(4, 390, rng.integers(2, 15))]) for p in prompts for _ in range(6)]
    out += [([int(x) for x in rng.integers(4, 390, n)], [int(x) for x in rng.integers(4, 390, 4)]) for n in (30, 8)]
    return out


class DeviceLimit:
    """Raise torch.OutOfMemoryError for any forward batch of more than ``limit`` token positions."""

    def __init__(self, model, limit):
        self.limit, self.refused = limit, 0
        self.handle = engine.decoder_base(model).register_forward_pre_hook(self.check, with_kwargs=True)

    def check(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids.numel() > self.limit:
            self.refused += 1
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a batch of {ids.numel()} tokens")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def assert_same(a, b):
    """Statistics of the float64 model (the ``model`` fixture): batching changes them by ~1e-15 here;
    transformers' RMSNorm reduces in float32 even in float64, so the bound scales with the value."""
    for h in HEADS:
        np.testing.assert_array_equal(a[h].token_ids, b[h].token_ids)
        np.testing.assert_allclose(a[h].logp, b[h].logp, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(a[h].logp_max, b[h].logp_max, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("share", [True, False])
def test_out_of_memory_halves_the_budget_and_gives_the_same_statistics(model, share):
    data = items()
    want, plain = engine.compute(model, data, temperatures=TEMPS, heads=HEADS,
                                 options=PassOptions(token_budget=4096, prefix_sharing=share))
    assert plain.oom_retries == 0 and plain.token_budget == 4096
    with DeviceLimit(model, 120) as limit:
        got, report = engine.compute(model, data, temperatures=TEMPS, heads=HEADS,
                                     options=PassOptions(token_budget=4096, prefix_sharing=share))
    assert limit.refused == report.oom_retries > 0
    assert report.token_budget <= 128 and report.token_budget == 4096 >> report.oom_retries
    assert_same(got, want)


def test_one_item_too_large_alone_is_a_clear_error(model):
    data = items()
    with DeviceLimit(model, 20), pytest.raises(budget.OutOfMemory, match="one item of .* tokens alone") as err:
        engine.compute(model, data, temperatures=TEMPS, heads=HEADS,
                       options=PassOptions(token_budget=4096, prefix_sharing=False))
    assert isinstance(err.value, CscoreError)  # the CLI prints one line and exits non-zero


def test_other_errors_are_not_retried(model):
    handle = engine.decoder_base(model).register_forward_pre_hook(lambda *a: (_ for _ in ()).throw(KeyError("x")))
    try:
        with pytest.raises(KeyError):
            engine.compute(model, items(), temperatures=TEMPS, heads=HEADS, options=PassOptions(token_budget=4096))
    finally:
        handle.remove()


def test_auto_on_the_cpu_is_estimated_once_and_scores_the_same(model):
    data = items()
    want, _ = engine.compute(model, data, temperatures=TEMPS, heads=HEADS, options=PassOptions(token_budget=4096))
    got, report = engine.compute(model, data, temperatures=TEMPS, heads=HEADS, options=PassOptions(token_budget="auto"))
    assert budget.MIN_BUDGET <= report.token_budget <= budget.CPU_MAX
    assert report.token_budget & (report.token_budget - 1) == 0  # a power of two
    assert_same(got, want)
    assert budget.resolve(model, longest_row=10) == report.token_budget  # found once per model and device


def test_the_estimate_shrinks_with_free_memory(model, monkeypatch):
    import psutil

    class Mem:
        def __init__(self, available):
            self.available = available

    budget._FOUND.clear()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: Mem(64 * 2**30))
    roomy = budget._estimate(model, 1 << 62)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: Mem(200 * 2**20))
    tight = budget._estimate(model, 1 << 62)
    assert roomy == budget.CPU_MAX and budget.MIN_BUDGET <= tight < roomy


@pytest.mark.parametrize("value,ok", [("auto", True), (1, True), (4096, True), (0, False), ("big", False),
                                      (True, False), (2.5, False)])
def test_config_check(value, ok):
    from cscore.config.run import check_budget
    from cscore.errors import ConfigError

    if ok:
        check_budget(value)
    else:
        with pytest.raises(ConfigError, match="integer >= 1 or auto"):
            check_budget(value)


@pytest.mark.slow
def test_cli_runs_with_auto(tiny_dirs, tmp_path, cscore_main):
    import json

    res = cscore_main("run", f"pair.expert.path={tiny_dirs.expert}", "pair.amateur.path=null",
                      "pair.amateur.early_exit=2", "pair.name=tiny", "runtime.progress=false", "cache.enabled=false",
                      "runtime.token_budget=auto", "split.use=dev", f"hydra.run.dir={tmp_path}/r", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    passes = json.loads((tmp_path / "r" / "metrics.json").read_text())["speed"]["passes"]
    got = passes["expert+amateur"]
    assert got["token_budget"] <= budget.CPU_MAX and got["oom_retries"] == 0
