"""dola (issue 49 item 2) against a direct float64 implementation of the paper's rule on a tiny random
llama: every hidden state of a plain forward pass (output_hidden_states=True), each through the final
norm and the LM head, the full softmaxes, the JSD of each candidate layer to the final layer, the
argmax layer and log q_N - log q_M over the adaptive plausibility set; for every batching and
padding, and an alpha sweep that runs no model after the first pass."""

import numpy as np
import pytest
import torch

from cscore import ModelPair
from cscore.errors import ConfigError
from cscore.scorers import methods
from cscore.scorers.methods.dola import bucket, chosen

PROMPT = "Summarise the following text:\nThe council opened a new bridge over the river.\nSummary:\n"
PROMPTS = [PROMPT, PROMPT, PROMPT, "Translate the following sentence:\nThe team won the final.\n", "Researchers found"]
HYPS = ["A bridge was opened.", "The council opened a bridge.", "A new bridge.", "The team won the final match.",
        " that the river rose"]
LAYERS = (0, 1, 2, 3)  # the expert has 4 layers: every early exit, the embedding output included


@pytest.fixture(scope="module")
def pair32(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, dtype="float32")


def direct(model, tok, prompt: str, hyp: str, layers, alpha: float):
    """(M, score, inside) per hypothesis token from the full float64 distributions of every layer."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    h = tok(hyp, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model(torch.tensor([p + h]), output_hidden_states=True)
        rows = slice(len(p) - 1, len(p) - 1 + len(h))
        states = out.hidden_states  # [0]: embeddings; the last is already normed
        final = torch.log_softmax(out.logits[0, rows].double(), -1)
        early = [torch.log_softmax(model.lm_head(model.model.norm(states[k]))[0, rows].double(), -1) for k in layers]
    target = torch.tensor(h)[:, None]
    pn = final.exp()
    jsd = []
    for lq in early:
        q = lq.exp()
        m = (pn + q) / 2
        jsd.append(0.5 * (pn * (final - m.log())).sum(-1) + 0.5 * (q * (lq - m.log())).sum(-1))
    pick = torch.stack(jsd).argmax(0)
    lq_m = torch.stack([early[int(j)][t, h[t]] for t, j in enumerate(pick)])
    lq_n = final.gather(1, target)[:, 0]
    inside = pn.gather(1, target)[:, 0] >= alpha * pn.max(-1).values
    return np.asarray(layers)[pick.numpy()], (lq_n - lq_m).numpy(), inside.numpy(), lq_n.numpy()


@pytest.mark.parametrize("budget, side, sharing", [(1, "right", False), (64, "left", True), (100000, "right", True)])
def test_dola_picks_the_layers_of_the_papers_rule(pair32, budget, side, sharing):
    """The chosen layer per token is the direct implementation's and the score equals it to a relative
    error of 1e-5, whatever the batch size, padding side or prefix sharing; outside the plausible set
    the score is the expert's log q_N (outside=expert) or -1000 (outside=released)."""
    st = pair32.statistics(PROMPTS, HYPS, temperatures=(1.0,), token_budget=budget, padding_side=side,
                           prefix_sharing=sharing, distribution=True, exits=LAYERS)
    p = methods.params("dola", {"layers": "0-3", "alpha": 0.1})
    got_layers, _ = chosen(st.stats, p)
    scores = methods.token_scores("dola", st.stats, layers="0-3", alpha=0.1)
    released = methods.token_scores("dola", st.stats, layers="0-3", alpha=0.1, outside="released")
    n_outside = 0
    for i, (pr, h) in enumerate(zip(PROMPTS, HYPS)):
        m, score, inside, lq_n = direct(pair32.expert.model, pair32.tokenizer, pr, h, LAYERS, 0.1)
        sl = st.stats["expert"].item(i)
        assert np.array_equal(got_layers[sl], m), i
        np.testing.assert_allclose(scores[sl][inside], score[inside], rtol=1e-5)
        np.testing.assert_allclose(scores[sl][~inside], lq_n[~inside], rtol=1e-5)
        assert np.all(released[sl][~inside] == -1000.0)
        n_outside += int((~inside).sum())
    assert n_outside > 0 and n_outside < len(scores)  # both branches are exercised
    assert len(set(got_layers.tolist())) > 1  # the choice varies by token


def test_the_bucket_restricts_the_choice(pair32):
    """A bucket of two layers picks among those two only, as the direct rule over that bucket does."""
    st = pair32.statistics(PROMPTS, HYPS, temperatures=(1.0,), distribution=True, exits=(0, 2))
    got_layers, _ = chosen(st.stats, methods.params("dola", {"layers": "0-2/2"}))
    want = np.concatenate([direct(pair32.expert.model, pair32.tokenizer, p, h, (0, 2), 0.1)[0]
                           for p, h in zip(PROMPTS, HYPS)])
    assert np.array_equal(got_layers, want) and set(got_layers) <= {0, 2}
    with pytest.raises(ConfigError, match="candidate layer"):
        methods.token_scores("dola", st.stats, layers="1")


def test_an_alpha_sweep_runs_no_model(pair32, monkeypatch):
    """After the one pass every alpha is a function of the kept statistics: the engine is not called."""
    st = pair32.statistics(PROMPTS, HYPS, temperatures=(1.0,), distribution=True, exits=LAYERS)
    from cscore.scorers.engine import engine

    def no_pass(*args, **kwargs):
        raise AssertionError("a forward pass ran")

    monkeypatch.setattr(engine, "compute", no_pass)
    scores = {a: st.score("dola", layers="0-3", alpha=a) for a in (0.0, 0.1, 0.5, 1.0)}
    assert len({tuple(np.round(s, 9)) for s in scores.values()}) > 1  # alpha changes the scores
    everything = methods.token_scores("dola", st.stats, layers="0-3", alpha=0.0)
    lq_n = st.stats["expert"].lp(1.0)
    _, lq_m = chosen(st.stats, methods.params("dola", {"layers": "0-3"}))
    np.testing.assert_array_equal(everything, lq_n - lq_m)  # alpha = 0: every token is plausible


def test_the_one_call_score_runs_the_candidate_layers(pair32):
    """ModelPair.score runs the pass with the method's candidate layers as heads of the expert's pass."""
    got = pair32.score(PROMPTS, HYPS, method="dola", layers="1,3", alpha=0.2)
    st = pair32.statistics(PROMPTS, HYPS, temperatures=(1.0,), distribution=True, exits=(1, 3))
    assert sorted(st.stats) == ["expert", "layer_1", "layer_3"]
    np.testing.assert_array_equal(got, st.score("dola", layers="1,3", alpha=0.2))


def test_a_layer_past_the_experts_depth_is_refused(pair32):
    with pytest.raises(ConfigError, match="candidate layer 4"):
        pair32.score(PROMPTS[:1], HYPS[:1], method="dola", layers="2-4")


def test_bucket_spec():
    assert bucket("0-14/2") == (0, 2, 4, 6, 8, 10, 12, 14)
    assert bucket("3, 1-2,3") == (3, 1, 2)
    assert bucket(5) == (5,)
    for bad in ("", "a", "4-2", "0-4/0", "1;2"):
        with pytest.raises(ConfigError):
            bucket(bad)


def test_sharded_and_cached_the_candidate_heads_are_bit_identical(pair32, tmp_path):
    """2 shards merged equal the unsharded pass bit for bit, the candidate heads included; the entry
    reads back whole under a key of its own (a plain pass of the expert gets another)."""
    from cscore.errors import ShardsPending
    from cscore.scorers.store.cache import StatsCache
    from cscore.scorers.store.runner import InProcess

    kw = dict(inputs=pair32.encode(PROMPTS * 2, HYPS * 2), temperatures=(1.0,), token_budget=48, distribution=True,
              exits=(0, 2))
    want = pair32.statistics(cache=StatsCache(tmp_path / "one"), **kw)
    cache = StatsCache(tmp_path / "two", checkpoint_seconds=0)
    with pytest.raises(ShardsPending):
        pair32.statistics(cache=cache, coordinator=InProcess(2, 0), **kw)
    got = pair32.statistics(cache=cache, coordinator=InProcess(2, 1), **kw)
    again = pair32.statistics(cache=StatsCache(tmp_path / "one"), **kw)
    assert all(r.cached for r in again.reports.values())
    for st in (got, again):
        assert sorted(st.stats) == ["expert", "layer_0", "layer_2"]
        for head in ("layer_0", "layer_2"):
            assert np.array_equal(st.stats[head].dist["jsd"], want.stats[head].dist["jsd"])
            assert np.array_equal(st.stats[head].logp, want.stats[head].logp)
        assert np.array_equal(st.score("dola", layers="0,2"), want.score("dola", layers="0,2"))
    plain = pair32.statistics(cache=StatsCache(tmp_path / "one"), inputs=kw["inputs"], temperatures=(1.0,),
                              token_budget=48)
    assert not any(r.cached for r in plain.reports.values()) and sorted(plain.stats) == ["expert"]


def test_the_cli_runs_dola_and_sweeps_alpha_from_the_cache(tiny_dirs, tmp_path, cscore_main, monkeypatch):
    """`cscore run method=dola`: the scores are the method's on the cached statistics; a second run
    with another alpha is served from the cache (no forward pass) and its scores differ."""
    import pandas as pd

    from cscore.scorers.engine import engine
    from cscore.scorers.engine.stats import TokenStats
    from cscore.scorers.store.cache import StatsCache
    from cscore.tests.support.cli import tiny_args

    cache = tmp_path / "stats"

    def run(name, *extra):
        res = cscore_main("run", *tiny_args(tiny_dirs, "data=demo", f"cache.dir={cache}"), "method=dola",
                          "method.layers=0-3", *extra, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        return pd.read_parquet(tmp_path / name / "scores.parquet")

    first = run("first")
    (key,) = [k for k in StatsCache(cache).keys() if "layer_0" in StatsCache(cache).meta(k)["heads"]]
    cached = StatsCache(cache).load(key, TokenStats).stats
    np.testing.assert_array_equal(first["score.dola"], methods.score("dola", cached, layers="0-3"))

    def no_forward(*a, **k):
        raise AssertionError("a forward pass ran on a cache hit")

    monkeypatch.setattr(engine, "compute", no_forward)
    swept = run("alpha", "method.alpha=0.5")
    np.testing.assert_array_equal(swept["score.dola"], methods.score("dola", cached, layers="0-3", alpha=0.5))
    assert not np.allclose(swept["score.dola"], first["score.dola"])
