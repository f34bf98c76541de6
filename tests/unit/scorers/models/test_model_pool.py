"""Models load lazily and once per process: a pass read from the statistics cache loads no
weights, the jobs of an in-process multirun share the models, and the cache key computed
before loading equals the one computed from the loaded model."""

import json

import numpy as np
import pandas as pd
import pytest

from cscore.scorers.api import ModelPair
from cscore.scorers.models import models
from cscore.scorers.models.identity import model_identity
from cscore.scorers.store.cache import StatsCache

PROMPTS = ["The mayor opened a new bridge over the river on Monday. Summary:"] * 3 + ["The team won the final."]
HYPS = ["A bridge was opened.", "The mayor opened a bridge.", "The council said the bridge cost five million.",
        "The team won."]


@pytest.fixture(autouse=True)
def empty_pool():
    models.retain([])
    yield
    models.retain([])


def test_lazy_identity_equals_the_loaded_models(tiny_dirs):
    lazy = models.load_model(tiny_dirs.expert, lazy=True)
    assert not lazy.loaded and lazy.info["class"] == "LlamaForCausalLM" and lazy.info["layers"] == 4
    before = model_identity(lazy)
    assert not lazy.loaded  # a directory is identified by its files, not its tensors
    eager = models.load_model(tiny_dirs.expert)
    assert eager.loaded and model_identity(eager) == before
    cut_lazy, cut_eager = models.early_exit(lazy, 2), models.early_exit(eager, 2)
    assert not lazy.loaded and model_identity(cut_lazy) == model_identity(cut_eager)
    assert len(cut_lazy.model.model.layers) == 2 and lazy.loaded  # cutting loads the parent's weights once
    assert cut_lazy.model.model.layers[0] is lazy.model.model.layers[0]  # shared, not copied


def test_a_cached_pass_loads_no_weights(tiny_dirs, tmp_path):
    cache = StatsCache(tmp_path / "stats")
    first = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, lazy=True)
    want = first.statistics(PROMPTS, HYPS, cache=cache, token_budget=64)
    assert first.expert.loaded and first.amateur.loaded
    again = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, lazy=True)
    got = again.statistics(PROMPTS, HYPS, cache=cache, token_budget=64)
    assert all(r.cached for r in got.reports.values())
    assert not again.expert.loaded and not again.amateur.loaded
    assert again.expert.status() == "not loaded"
    np.testing.assert_array_equal(got.score("contrast"), want.score("contrast"))
    # a pass that is not cached (another temperature set) loads the weights then
    more = again.statistics(PROMPTS, HYPS, cache=cache, token_budget=64, temperatures=(0.7, 1.0))
    assert not any(r.cached for r in more.reports.values()) and again.expert.loaded


def test_early_exit_amateur_of_a_cached_pair_loads_nothing(tiny_dirs, tmp_path):
    cache = StatsCache(tmp_path / "stats")
    ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, lazy=True).statistics(PROMPTS, HYPS, cache=cache)
    pair = ModelPair.load(tiny_dirs.expert, amateur_early_exit=2, lazy=True)
    pair.statistics(PROMPTS, HYPS, cache=cache)
    assert not pair.expert.loaded and pair.amateur.status() == "not loaded"


def test_the_pool_hands_out_one_model_per_spec_and_drops_the_unused(tiny_dirs):
    a = ModelPair.pooled(tiny_dirs.expert, tiny_dirs.amateur)
    b = ModelPair.pooled(tiny_dirs.expert, tiny_dirs.amateur)
    assert b.expert is a.expert and b.amateur is a.amateur
    b.expert.model  # loads
    c = ModelPair.pooled(tiny_dirs.expert, tiny_dirs.amateur)
    assert c.expert.status() == "not used" and c.amateur.status() == "not loaded"
    c.expert.model
    assert c.expert.status() == "reused"
    # another pair: the amateur no longer wanted is dropped (its memory freed), the expert kept
    d = ModelPair.pooled(tiny_dirs.expert, amateur_early_exit=1)
    assert d.expert is a.expert and not a.amateur.loaded
    with pytest.raises(RuntimeError, match="released"):
        a.amateur.model


def test_a_model_saved_again_in_place_is_loaded_again(tiny_dirs, tmp_path):
    import shutil

    path = tmp_path / "m"
    shutil.copytree(tiny_dirs.expert, path)
    first = models.pooled(str(path))
    assert models.pooled(str(path)) is first
    weights = next(path.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes())  # same bytes, new mtime: another model as far as the pool knows
    import os
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    assert models.pooled(str(path)) is not first


@pytest.mark.slow
def test_multirun_jobs_share_the_models_and_cached_points_load_nothing(tiny_dirs, tmp_path, cscore_cli):
    # one process, three jobs: gamma 0.2 computes (loads), gamma 0.6 reads the cache (the weights
    # stay unused), t_exp=0.7 recomputes with the models the first job loaded
    res = cscore_cli("run", "-m", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                     "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false",
                     f"cache.dir={tmp_path / 'stats'}", "method.t_exp=0.5,0.7", "method.gamma=0.2,0.6",
                     f"hydra.sweep.dir={tmp_path}/sw", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    speed = [json.loads((tmp_path / "sw" / str(j) / "metrics.json").read_text())["speed"] for j in range(4)]
    assert speed[0]["weights"] == {"expert": "loaded", "amateur": "loaded"}
    assert speed[1]["weights"] == {"expert": "not used", "amateur": "not used"}
    assert speed[2]["weights"] == {"expert": "reused", "amateur": "reused"}
    assert speed[0]["load_seconds"]["expert"] > 0 and speed[2]["load_seconds"] == {"expert": 0.0, "amateur": 0.0}
    assert "weights: expert not used, amateur not used" in res.stdout
    assert (res.stdout + res.stderr).count("weights loaded in") == 2  # expert and amateur, once each
    # and a fresh process whose statistics are all cached loads no weights at all
    res = cscore_cli("run", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                     "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false",
                     f"cache.dir={tmp_path / 'stats'}", "method.gamma=0.3", f"hydra.run.dir={tmp_path}/one",
                     cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    metrics = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert metrics["speed"]["weights"] == {"expert": "not loaded", "amateur": "not loaded"}
    assert "weights loaded in" not in res.stderr + res.stdout
    direct = pd.read_parquet(tmp_path / "sw" / "0" / "scores.parquet")
    got = pd.read_parquet(tmp_path / "one" / "scores.parquet")
    np.testing.assert_array_equal(got["score.expert"], direct["score.expert"])
