"""Method formulas against hand-computed values, on toy bigram models with chosen logits."""

import math
import re

import numpy as np
import pytest
import torch

from cscore.errors import ConfigError
from cscore.scorers import methods
from cscore.scorers.engine import engine
from cscore.scorers.methods.common import aggregate
from cscore.scorers.methods.contrast import log_abs_diff
from cscore.tests.support import REPO

V = 4
# Expert / amateur next-token probabilities (rows: previous token), chosen by hand.
P_EXP = [[0.70, 0.10, 0.10, 0.10],
         [0.05, 0.80, 0.10, 0.05],
         [0.25, 0.25, 0.25, 0.25],
         [0.10, 0.20, 0.30, 0.40]]
P_AMA = [[0.40, 0.30, 0.20, 0.10],
         [0.10, 0.10, 0.70, 0.10],
         [0.25, 0.25, 0.25, 0.25],
         [0.40, 0.30, 0.20, 0.10]]
# Two items: prompt [0] then hypothesis [0, 1, 2]; prompt [3, 3] then hypothesis [1].
ITEMS = [([0], [0, 1, 2]), ([3, 3], [1])]
# The (prev, target) pairs each hypothesis token is scored on:
SCORED = [[(0, 0), (0, 1), (1, 2)], [(3, 1)]]


def prob(table, prev, tok, t=1.0):
    """p_T(tok | prev) = softmax(log p / T)."""
    w = [table[prev][v] ** (1.0 / t) for v in range(V)]
    return w[tok] / sum(w)


@pytest.fixture
def stats(toy_bigram):
    out = {}
    for name, table in (("expert", P_EXP), ("amateur", P_AMA)):
        model = toy_bigram(torch.log(torch.tensor(table, dtype=torch.float64)))
        model.double()
        got, _ = engine.compute(model, ITEMS, temperatures=(0.5, 1.0, 1.5), heads={name: None})
        out.update(got)
    return out


def per_item(fn):
    return [sum(fn(prev, tok) for prev, tok in item) for item in SCORED]


def test_engine_logprobs_match_hand_values(stats):
    for t in (0.5, 1.0, 1.5):
        want = [math.log(prob(P_EXP, p, y, t)) for item in SCORED for p, y in item]
        np.testing.assert_allclose(stats["expert"].lp(t), want, atol=1e-12)
        want_max = [math.log(max(prob(P_EXP, p, v, t) for v in range(V))) for item in SCORED for p, _ in item]
        np.testing.assert_allclose(stats["expert"].lp_max(t), want_max, atol=1e-12)


def test_single_sum_mean_sqrt(stats):
    want = per_item(lambda p, y: math.log(P_EXP[p][y]))
    np.testing.assert_allclose(methods.score("single", stats), want, atol=1e-12)
    np.testing.assert_allclose(methods.score("single", stats, norm="mean"), [want[0] / 3, want[1]], atol=1e-12)
    np.testing.assert_allclose(methods.score("single", stats, norm="sqrt"), [want[0] / math.sqrt(3), want[1]],
                               atol=1e-12)
    amateur = per_item(lambda p, y: math.log(prob(P_AMA, p, y, 1.5)))
    np.testing.assert_allclose(methods.score("single", stats, model="amateur", t=1.5), amateur, atol=1e-12)


def test_contrast_eq5_paper_defaults(stats):
    def token(p, y):
        return math.log(abs(prob(P_EXP, p, y, 0.5) - 0.1 * prob(P_AMA, p, y, 1.5)))

    np.testing.assert_allclose(methods.score("contrast", stats), per_item(token), atol=1e-12)
    # gamma = 0 reduces to the expert's own score at t_exp
    np.testing.assert_allclose(methods.score("contrast", stats, gamma=0.0, t_exp=1.0),
                               methods.score("single", stats), atol=1e-12)


def test_contrast_absolute_value_when_amateur_dominates(stats):
    # gamma = 1, T = 1: token (0 -> 0): |0.7 - 0.4| ; token (1 -> 2): |0.1 - 0.7| = 0.6 (amateur larger)
    got = methods.token_scores("contrast", stats, gamma=1.0, t_exp=1.0, t_ama=1.0)
    assert got[0] == pytest.approx(math.log(0.3))
    assert got[2] == pytest.approx(math.log(0.6))


def test_contrast_floor_guards_log_zero():
    a = np.log(np.array([0.5, 0.2]))
    b = np.log(np.array([0.5, 0.1]))
    out = log_abs_diff(a, b)
    assert np.isneginf(out[0]) and out[1] == pytest.approx(math.log(0.1))
    from cscore.scorers.methods.common import floor_log
    assert floor_log(out, 1e-30)[0] == pytest.approx(math.log(1e-30))


def test_ensemble_eq6_and_eq8(stats):
    eq6 = per_item(lambda p, y: math.log(0.5 * P_EXP[p][y] + 0.5 * P_AMA[p][y]))
    np.testing.assert_allclose(methods.score("ensemble", stats), eq6, atol=1e-12)
    eq8 = per_item(lambda p, y: math.log(0.8 * P_EXP[p][y] + 0.2 * P_AMA[p][y]))
    np.testing.assert_allclose(methods.score("ensemble", stats, gamma=0.8), eq8, atol=1e-12)


def test_division_and_cd_score(stats):
    div = per_item(lambda p, y: math.log(prob(P_EXP, p, y, 0.5) / prob(P_AMA, p, y, 1.5)))
    np.testing.assert_allclose(methods.score("division", stats), div, atol=1e-12)

    # alpha = 0.3 at T = 1: the head of row 0 is {0} (0.1 < 0.21), row 1 is {1}, row 3 is {1, 2, 3}.
    got = methods.token_scores("cd_score", stats, alpha=0.3, t_exp=1.0, t_ama=1.0, outside=-50.0)
    want = [math.log(0.7 / 0.4), -50.0, -50.0, math.log(0.2 / 0.3)]
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert np.isneginf(methods.score("cd_score", stats, alpha=0.3, t_exp=1.0, t_ama=1.0)[0])


def test_released_preset_matches_its_own_recipe(stats):
    """The released code: probs from log-probs clamped to [-20, 0], |p1 - g p2| floored at
    1e-10, first hypothesis token skipped, sum / sqrt(#scored)."""
    def released(item):
        vals = []
        for p, y in item[1:]:
            p1 = math.exp(max(math.log(P_EXP[p][y]), -20))
            p2 = math.exp(max(math.log(P_AMA[p][y]), -20))
            vals.append(math.log(max(abs(p1 - 0.1 * p2), 1e-10)))
        return sum(vals) / math.sqrt(max(len(vals), 1))

    got = methods.score("contrast", stats, gamma=0.1, t_exp=1.0, t_ama=1.0, clamp=-20.0, floor=1e-10,
                        norm="sqrt", skip_first=True)
    np.testing.assert_allclose(got, [released(SCORED[0]), released(SCORED[1])], atol=1e-12)
    assert got[1] == 0.0  # one-token hypothesis: nothing left to score, as in the released code


def test_clamp_and_floor_bind_on_tiny_probabilities():
    from cscore.scorers.engine.stats import TokenStats

    lp = np.array([[-30.0, -1.0]], dtype=np.float32)
    st = TokenStats((1.0,), np.array([0, 2]), np.array([1, 2]), lp, lp.copy())
    pair = {"expert": st, "amateur": st}
    assert methods.score("single", pair, clamp=-20.0)[0] == pytest.approx(-21.0)
    # |p - 0.1 p| = 0.9 p; with p = e^-30 that is below 1e-10, so the floor binds
    got = methods.token_scores("contrast", pair, t_exp=1.0, t_ama=1.0, floor=1e-10)
    assert got[0] == pytest.approx(math.log(1e-10))
    assert got[1] == pytest.approx(math.log(0.9) - 1.0)


def test_aggregate_skip_first_and_empty_items():
    values = np.array([1.0, 2.0, 3.0, 4.0])
    offsets = np.array([0, 3, 3, 4])
    np.testing.assert_allclose(aggregate(values, offsets), [6.0, 0.0, 4.0])
    np.testing.assert_allclose(aggregate(values, offsets, skip_first=True), [5.0, 0.0, 0.0])
    np.testing.assert_allclose(aggregate(values, offsets, norm="mean"), [2.0, 0.0, 4.0])


def test_unknown_method_and_parameter_are_clear_errors(stats):
    with pytest.raises(ValueError, match="unknown method"):
        methods.score("nope", stats)
    with pytest.raises(ValueError, match="has no parameter 'beta'"):
        methods.score("contrast", stats, beta=1)
    with pytest.raises(ConfigError, match="temperature 0.7 was not computed"):
        methods.score("contrast", stats, t_exp=0.7)
    with pytest.raises(ValueError, match="gamma"):
        methods.score("contrast", stats, gamma=1.5)


def test_float32_tolerance_follows_the_methods_sensitivity(f32):
    """conftest.f32_token_tol: `single` moves by its input bound, ContrastScore by
    (p delta_a + gamma q delta_b) / |p - gamma q| (its derivative, README "Numerics"), down to
    the floor when p_exp = gamma p_ama lies within the bounds."""
    from cscore.scorers.engine.stats import TokenStats

    p = np.array([0.7, 0.41, 0.2, 0.4 + 1e-9])  # expert
    q = np.array([0.4, 0.4, 0.3, 0.4])  # amateur
    offsets = np.array([0, 4])
    ids = np.zeros(4, dtype=np.int64)
    stats = {"expert": TokenStats((1.0,), offsets, ids, np.log(p)[None], np.log(p)[None]),
             "amateur": TokenStats((1.0,), offsets, ids, np.log(q)[None], np.log(q)[None])}
    d_a = f32.logp_tol(np.log(p), typical=f32.typical_logp(stats["expert"]))
    d_b = f32.logp_tol(np.log(q), typical=f32.typical_logp(stats["amateur"]))

    dev, amp = f32.token_tol(stats, "single")
    np.testing.assert_allclose(dev, d_a, rtol=1e-6)
    np.testing.assert_allclose(amp, 1.0, rtol=1e-6)

    dev, amp = f32.token_tol(stats, "contrast", gamma=1.0, t_exp=1.0, t_ama=1.0)
    first_order = (p * d_a + q * d_b) / np.abs(p - q)
    np.testing.assert_allclose(dev[:3], first_order[:3], rtol=1e-2)  # exact box vs first order
    assert amp[1] > 30 > 3 > amp[0]  # |0.41 - 0.40| = 0.01: amplified ~40x (0.7 vs 0.4: ~2x)
    assert dev[3] == pytest.approx(np.log(1e-9) - np.log(1e-30))  # within the bounds of p = q: the floor


def test_a_new_method_is_one_registered_class(stats, monkeypatch):
    """A method class registered by decorator is found by name, reads its typed settings, is scored
    with the shared length handling through the Python API, and a second one under its name is refused."""
    from dataclasses import dataclass

    from cscore.errors import CscoreError
    from cscore.scorers.methods.params import Param, common, setting

    monkeypatch.setattr(methods.METHODS, "entries", dict(methods.METHODS.entries))

    @dataclass
    class HalfwayParams(methods.MethodParams):
        name: str = setting("halfway", doc="the method")
        variant: str = setting("halfway", doc="the score column and label: score.<variant>")
        weight: float = setting(0.5, Param(float, lo=0.0, hi=1.0), "the expert's share")
        norm: str = common("norm", "sum")
        skip_first: bool = common("skip_first", False)

    @methods.METHODS
    class Halfway(methods.Method):
        name = "halfway"
        Params = HalfwayParams
        aligned = True

        @classmethod
        def token_scores(cls, stats, p):
            return p.weight * stats["expert"].lp(1.0) + (1 - p.weight) * stats["amateur"].lp(1.0)

    assert methods.get("halfway") is Halfway and methods.defaults("halfway") == {
        "weight": 0.5, "norm": "sum", "skip_first": False}
    assert "halfway" in methods.aligned_methods() and methods.cross_family_refusal("halfway") is None
    assert "use one of cd_score, cdm, contrast, division, ensemble, halfway, single," in methods.cross_family_refusal(
        "cdm_gen")  # no list edited: its class says it
    p = methods.params("halfway", {"weight": 0.25})
    assert isinstance(p, HalfwayParams) and p.weight == 0.25 and p.name == "halfway"
    want = per_item(lambda q, y: 0.25 * math.log(P_EXP[q][y]) + 0.75 * math.log(P_AMA[q][y]))
    np.testing.assert_allclose(methods.score("halfway", stats, weight=0.25), want, atol=1e-12)
    np.testing.assert_allclose(Halfway.score(stats, p), want, atol=1e-12)
    np.testing.assert_allclose(methods.score("halfway", stats, weight=0.25, norm="mean"),
                               [want[0] / 3, want[1]], atol=1e-12)
    with pytest.raises(ConfigError, match=r"halfway\.weight must be a number in \[0, 1\], got 2"):
        methods.score("halfway", stats, weight=2)
    with pytest.raises(CscoreError, match=r"^method 'halfway' is registered twice: .*Halfway and .*Again$"):
        methods.METHODS(type("Again", (methods.Method,), {"name": "halfway", "Params": HalfwayParams}))
    with pytest.raises(CscoreError, match="is not a Method subclass"):
        methods.METHODS.register("other")(HalfwayParams)
    with pytest.raises(ConfigError, match=r"^unknown method 'halfwya' \(did you mean halfway\?\); known: "):
        methods.score("halfwya", stats)


# --- what a cross-family pair (two tokenizers) computes: each method's class says (``aligned``) ------


def test_every_method_states_whether_a_cross_family_pair_computes_it():
    """Each registered method's own class sets ``aligned`` (none inherits the default); the
    aligned ones are token methods, which the pair computes on aligned units' statistics."""
    for name, cls in methods.METHODS.items():
        assert isinstance(vars(cls).get("aligned"), bool), f"method {name!r}: set aligned = True or False on its class"
    aligned = methods.aligned_methods()
    assert aligned == [n for n, cls in methods.METHODS.items() if cls.aligned] == sorted(aligned)
    assert aligned and all(methods.get(n).kind == "token" for n in aligned)


def test_a_cross_family_pair_refuses_exactly_the_methods_not_aligned():
    """None for an aligned method; the one line naming the aligned ones for any other, with its
    defaults or as a score of token statistics; cd_judge by its decode (values: any pair)."""
    listed = ", ".join(methods.aligned_methods())
    for name, cls in methods.METHODS.items():
        run = {"name": name, **methods.defaults(name)}
        if cls.aligned:
            assert methods.cross_family_refusal(name) is None and methods.cross_family_refusal(name, run) is None
            methods.check_aligned(name, run)
            continue
        if cls.distributional(run):  # tests/unit/scorers/methods/test_distributional.py
            continue
        generic = (f"method {name!r} needs expert and amateur to share a tokenizer; with a cross-family pair "
                   f"(units=aligned) use one of {listed}, or cd_judge with method.decode=values")
        assert methods.cross_family_refusal(name) == generic
        with pytest.raises(ConfigError, match="^" + re.escape(generic if name != "cd_judge" else
                                                              "method.decode=greedy reads the judge's text")):
            methods.check_aligned(name, run)
    assert methods.cross_family_refusal("cd_judge", {"name": "cd_judge", "decode": "values"}) is None
    assert "set method.decode=values" in methods.cross_family_refusal("cd_judge", {"decode": "first_token"})


def test_the_cross_family_page_names_the_aligned_methods():
    """docs/cross-family.md quotes the refusal line and names the methods computed on units."""
    page = " ".join((REPO / "docs" / "cross-family.md").read_text().split())
    assert methods.cross_family_refusal("cdm_classifier") in page
    accepts = page.split("## Which methods accept it", 1)[1].split(", and `cd_judge`", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", accepts)) == methods.aligned_methods()
