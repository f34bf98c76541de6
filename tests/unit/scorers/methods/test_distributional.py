"""The methods on the distributional statistics (issue 49 item 2): binoculars against the released
code's formula (ahans30/Binoculars, metrics.py: perplexity / entropy) written here from its
definition and applied to the full logits of a plain forward pass of each tiny model; the
divergence rows and the JSD-weighted contrast against the full distributions; a cross-family
pair's one-line refusal; a sweep of their parameters from the cache with no model run."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from cscore import ModelPair
from cscore.scorers import methods
from cscore.scorers.engine import engine
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.cli import tiny_args

PROMPTS = ["Summarise the following text:\nThe council opened a new bridge over the river.\nSummary:\n",
           "Summarise the following text:\nThe council opened a new bridge over the river.\nSummary:\n",
           "Translate the following sentence:\nThe team won the final.\n"]
HYPS = ["A bridge was opened.", "The council opened a bridge over it.", "The team won the final match."]


@pytest.fixture(scope="module")
def pair(tiny_dirs):
    return ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur, dtype="float32")


@pytest.fixture(scope="module")
def joint(pair):
    return pair.statistics(PROMPTS, HYPS, temperatures=(0.5, 1.0, 1.5), distribution=True)


def logits_of(model, tok, prompt: str, hyp: str):
    """(float64 logits at the positions that predict the hypothesis tokens, those tokens)."""
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    h = tok(hyp, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([p + h])).logits[0].double()
    return logits[len(p) - 1:len(p) - 1 + len(h)], torch.tensor(h)


def released_binoculars(observer_logits, performer_logits, targets, temperature=1.0) -> float:
    """metrics.py: ppl = mean CrossEntropyLoss(performer logits / T, next tokens); x_ppl = mean
    CrossEntropyLoss(input=performer logits / T, target=softmax(observer logits / T)); B = ppl / x_ppl.
    Here both means over the same positions (those that predict the scored tokens)."""
    ce = torch.nn.CrossEntropyLoss(reduction="none")
    ppl = ce(performer_logits / temperature, targets).mean()
    x_ppl = ce(performer_logits / temperature, torch.softmax(observer_logits / temperature, dim=-1)).mean()
    return float(ppl / x_ppl)


@pytest.mark.parametrize("performer", ["expert", "amateur"])
@pytest.mark.parametrize("t", [1.0, 1.5])
def test_binoculars_equals_the_released_formula(pair, joint, performer, t):
    observer = "amateur" if performer == "expert" else "expert"
    got = joint.score("binoculars", performer=performer, t=t)
    for i, (p, h) in enumerate(zip(PROMPTS, HYPS)):
        perf, targets = logits_of(pair.models[performer].model, pair.tokenizer, p, h)
        obs, _ = logits_of(pair.models[observer].model, pair.tokenizer, p, h)
        assert got[i] == pytest.approx(released_binoculars(obs, perf, targets, t), rel=1e-5)
    assert not np.allclose(got, joint.score("binoculars", performer=observer, t=t))  # the roles matter


def full(pair, i, t):
    le, targets = logits_of(pair.expert.model, pair.tokenizer, PROMPTS[i], HYPS[i])
    la, _ = logits_of(pair.amateur.model, pair.tokenizer, PROMPTS[i], HYPS[i])
    return torch.log_softmax(le / t, -1), torch.log_softmax(la / t, -1), targets


@pytest.mark.parametrize("statistic", ["entropy", "kl_ea", "kl_ae", "jsd", "xent_ea"])
def test_divergence_rows_are_means_of_the_full_distributions(pair, joint, statistic):
    got = joint.score("divergence", statistic=statistic, model="amateur", t=0.5)
    for i in range(len(HYPS)):
        le, la, _ = full(pair, i, 0.5)
        pe, pa = le.exp(), la.exp()
        m = (pe + pa) / 2
        want = {"entropy": -(pa * la).sum(-1), "kl_ea": (pe * (le - la)).sum(-1), "kl_ae": (pa * (la - le)).sum(-1),
                "jsd": 0.5 * (pe * (pe / m).log()).sum(-1) + 0.5 * (pa * (pa / m).log()).sum(-1),
                "xent_ea": -(pe * la).sum(-1)}[statistic]
        assert got[i] == pytest.approx(float(want.mean()), rel=1e-5)


def test_the_jsd_weighted_contrast_weighs_each_token_by_its_jsd(pair, joint):
    got = joint.score("contrast", weight="jsd", t_weight=1.0)
    for i in range(len(HYPS)):
        le, la, _ = full(pair, i, 1.0)
        pe, pa = le.exp(), la.exp()
        m = (pe + pa) / 2
        jsd = 0.5 * (pe * (pe / m).log()).sum(-1) + 0.5 * (pa * (pa / m).log()).sum(-1)
        e5, _, targets = full(pair, i, 0.5)
        _, a15, _ = full(pair, i, 1.5)
        pick = torch.arange(len(targets))
        term = torch.log(torch.abs(e5[pick, targets].exp() - 0.1 * a15[pick, targets].exp()))
        assert got[i] == pytest.approx(float((jsd * term).sum()), rel=1e-5)
    assert not np.allclose(got, joint.score("contrast"))


def test_a_cross_family_pair_refuses_them_in_one_line_naming_what_runs():
    aligned = ", ".join(methods.aligned_methods())
    for name, settings in (("binoculars", {}), ("divergence", {"statistic": "kl_ea"}),
                           ("contrast", {"weight": "jsd"})):
        why = methods.cross_family_refusal(name, {"name": name, **settings})
        assert why is not None and "\n" not in why and aligned in why and "distributional" in why
    assert methods.cross_family_refusal("contrast", {"name": "contrast", "weight": "none"}) is None


def test_the_cli_refuses_a_cross_family_pair_before_any_model_loads(tiny_dirs, tmp_path, cscore_main, monkeypatch):
    def no_load(*a, **k):
        raise AssertionError("a model loaded")

    monkeypatch.setattr(engine, "compute", no_load)
    for method in (["method=binoculars"], ["method=contrast", "method.weight=jsd"]):
        args = [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.other}",
                "pair.amateur.early_exit=null", "pair.name=x", "runtime.progress=false", "data=demo", *method]
        res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / method[-1]}", cwd=tmp_path)
        assert res.returncode != 0
        assert re.search(r"distributional statistics .*use one of .*contrast, ", res.stderr + res.stdout)


@pytest.mark.slow
def test_a_sweep_of_the_new_methods_runs_no_model_after_the_first_pass(tiny_dirs, tmp_path, cscore_main,
                                                                      monkeypatch):
    cache = tmp_path / "stats"

    def run(name, *extra):
        res = cscore_main("run", *tiny_args(tiny_dirs, "data=demo", f"cache.dir={cache}"), *extra,
                          f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        out = tmp_path / name
        return pd.read_parquet(out / "scores.parquet"), json.loads((out / "metrics.json").read_text())

    scores, metrics = run("first", "method=binoculars")
    assert not metrics["speed"]["from_cache"]
    (key,) = StatsCache(cache).keys()  # one joint pass of the pair
    cached = StatsCache(cache).load(key, TokenStats).stats
    assert sorted(cached) == ["amateur", "expert"] and "jsd" in cached["amateur"].dist

    def no_forward(*a, **k):
        raise AssertionError("a forward pass ran on a cache hit")

    monkeypatch.setattr(engine, "compute", no_forward)
    for name, extra, column, method, params in (
            ("performer", ["method=binoculars", "method.performer=amateur"], "binoculars", "binoculars",
             {"performer": "amateur"}),
            ("kl", ["method=divergence", "method.statistic=kl_ae"], "kl_ae", "divergence", {"statistic": "kl_ae"}),
            ("weighted", ["method=contrast", "method.weight=jsd", "method.gamma=0.3"], "contrast", "contrast",
             {"weight": "jsd", "gamma": 0.3})):
        got, m = run(name, *extra)
        assert m["speed"]["from_cache"], name
        np.testing.assert_array_equal(got[f"score.{column}"], methods.score(method, cached, **params))
    assert not np.allclose(got["score.contrast"], methods.score("contrast", cached, gamma=0.3))  # the weight counts
