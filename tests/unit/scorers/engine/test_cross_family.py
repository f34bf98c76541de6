"""Cross-family pairs beyond aligned units (tests/unit/scorers/engine/test_align.py): the reverse pair reads the
statistics cache of the forward one, and CD-judge over the range's score values
(``method.decode=values``, ``scorers/judge/values.py``)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = ["Summarise: The mayor opened a new bridge.\nSummary:", "Summarise: The team won the final.\nSummary:"]
HYPS = ["A bridge was opened.", "The team won the match in extra time."]


def forward_counter(pair):
    """A list that gets one entry per forward call of any model of ``pair`` (a hook on its input
    embedding, which every forward pass goes through)."""
    calls: list[str] = []
    for role, m in pair.models.items():
        m.model.get_input_embeddings().register_forward_hook(lambda *_, role=role: calls.append(role))
    return calls


def test_reverse_pair_reads_the_forward_pairs_statistics(tiny_dirs, tmp_path):
    """A,B then B,A: the second pair runs no forward pass and gets, per model, the same statistics
    (A's as amateur are A's as expert); a model alone reads its own pass too."""
    from cscore import ModelPair
    from cscore.scorers.store.cache import StatsCache

    cache = StatsCache(tmp_path / "cache", checkpoint_seconds=None)
    forward = ModelPair.load(tiny_dirs.expert, tiny_dirs.other)
    assert forward.aligned
    calls = forward_counter(forward)
    first = forward.statistics(PROMPTS, HYPS, cache=cache, temperatures=[1.0, 1.5])
    assert set(calls) == {"expert", "amateur"} and not any(r.cached for r in first.reports.values())

    reverse = ModelPair.load(tiny_dirs.other, tiny_dirs.expert)
    calls = forward_counter(reverse)
    inputs = reverse.encode(PROMPTS, HYPS)
    second = reverse.statistics(inputs=inputs, cache=cache, temperatures=[1.0, 1.5])
    assert calls == [] and all(r.cached for r in second.reports.values())
    for role, other in (("expert", "amateur"), ("amateur", "expert")):
        np.testing.assert_array_equal(second.stats[role].logp, first.stats[other].logp)
        np.testing.assert_array_equal(second.stats[role].token_ids, first.stats[other].token_ids)
    # the contrast of the reverse pair is that of the swapped statistics (no model involved)
    assert second.score("ensemble", gamma=0.5).tolist() == pytest.approx(first.score("ensemble", gamma=0.5).tolist(),
                                                                        rel=1e-12)
    alone = ModelPair.load(tiny_dirs.other)  # B by itself: the key of B's own pass
    calls = forward_counter(alone)
    got = alone.statistics(PROMPTS, HYPS, cache=cache, temperatures=[1.0, 1.5])
    assert calls == [] and got.reports["expert"].cached


# --- CD-judge over the range's values: the arithmetic ------------------------------------------


def test_value_scores_by_hand():
    """Two items, range 1-3, value 2 written with two tokens: each value's log-probability is the
    sum of its tokens' (at T = 1 and T = 2), then Eq. 1 over the values with V_head on values."""
    from cscore.scorers.engine.stats import TokenStats
    from cscore.scorers.judge import values as judge_values

    # item-major: (item 0: "1", "2" = 2 tokens, "3"), (item 1: the same)
    offsets = np.array([0, 1, 3, 4, 5, 7, 8])
    main = TokenStats((1.0,), offsets, np.arange(8), np.array([[-1.0, -0.5, -0.25, -2.0, -0.5, -0.4, -0.6, -3.0]]),
                      np.zeros((1, 8)))
    asst = TokenStats((1.0, 2.0), offsets, np.arange(8),
                      np.array([[-0.5, -1.0, -1.0, -3.0, -1.0, -0.5, -0.5, -1.0],
                                [-0.8, -1.2, -0.9, -1.5, -0.5, -1.0, -2.0, -6.0]]), np.zeros((2, 8)))
    a = judge_values.value_logp(main, 3)
    b = {t: judge_values.value_logp(asst, 3, t) for t in (1.0, 2.0)}
    np.testing.assert_allclose(a, [[-1.0, -0.75, -2.0], [-0.5, -1.0, -3.0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(b[1.0], [[-0.5, -2.0, -3.0], [-1.0, -1.0, -1.0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(b[2.0], [[-0.8, -2.1, -1.5], [-0.5, -3.0, -6.0]], rtol=0, atol=1e-15)

    def run(**kw):
        return judge_values.judge(a, b, [1, 2, 3], **kw)

    # contrast λ=1, t=2: item 0 [-0.2, 1.35, -0.5] -> 2; item 1 [0, 2, 3] -> 3, but with α = 0.1
    # value 3 is out of V_head (a = -3 < -0.5 + log 0.1 = -2.80) -> 2
    assert run(lam=1.0, t=2.0, alpha=0.0)["score"].tolist() == [2.0, 3.0]
    got = run(lam=1.0, t=2.0, alpha=0.1)
    assert got["score"].tolist() == [2.0, 2.0] and got["text"].tolist() == ["2", "2"]
    assert got["status"].tolist() == ["ok", "ok"]
    e = [np.exp(-0.2), np.exp(1.35), np.exp(-0.5)], [1.0, np.exp(2.0), np.exp(3.0)]
    want = [(x[0] + 2 * x[1] + 3 * x[2]) / sum(x) for x in e]  # V_head does not apply to it
    np.testing.assert_allclose(got["expected"], want, rtol=1e-14)
    assert run(who="main")["score"].tolist() == [2.0, 1.0]
    assert run(who="asst")["score"].tolist() == [1.0, 1.0]  # item 1: a three-way tie -> the lowest value
    np.testing.assert_allclose(run(who="asst")["expected"][1], 2.0, rtol=1e-15)
    np.testing.assert_array_equal(run(lam=0.0, t=2.0, alpha=0.1)["score"], run(who="main")["score"])


def test_values_variant_equals_the_token_variant_on_single_token_values():
    """One vocabulary, every value one token: the expected score equals the token variant's
    (``JudgeStats``, from the same logits) at every λ, t, and so does the choice wherever the main
    model's most likely token is a score token and the token variant wrote a score."""
    import torch

    from cscore.scorers.judge import judge
    from cscore.scorers.judge import values as judge_values
    from cscore.scorers.methods import cd_judge

    n, vocab, ids = 40, 50, [10, 11, 12, 13, 14]  # "1".."5"
    gen = torch.Generator().manual_seed(0)
    z_main = torch.randn(n, vocab, generator=gen, dtype=torch.float64) * 2
    z_asst = torch.randn(n, vocab, generator=gen, dtype=torch.float64) * 2
    z_main[:, ids] += 3.0
    z_asst[:, ids] += 2.0
    a_full = torch.log_softmax(z_main, dim=-1)
    got = judge.batch_to_host(a_full, z_asst, z_main, z_asst, torch.tensor(ids))
    stats = judge.assembled(judge.Scale([1, 2, 3, 4, 5], [(i,) for i in ids], [], n,
                                        lambda t: str(t - 9) if t in ids else f"w{t}"), (*got[1:], None), vocab)
    a = a_full[:, ids].numpy()
    compared = 0
    for lam, t, alpha in ((0.1, 1.0, 0.1), (0.5, 2.0, 0.0), (1.0, 0.5, 0.5), (1.0, 5.0, 0.1)):
        b = {s: torch.log_softmax(z_asst / s, dim=-1)[:, ids].numpy() for s in (1.0, t)}
        for who in ("contrast", "main", "asst"):
            want = cd_judge.judge(stats, who=who, lam=lam, t=t, alpha=alpha, score_range=[1, 5])
            mine = judge_values.judge(a, b, [1, 2, 3, 4, 5], who=who, lam=lam, t=t, alpha=alpha)
            np.testing.assert_allclose(mine["expected"], want["expected"], rtol=1e-12)
            top = np.isin(stats.main_top if who != "asst" else stats.asst_top, ids) & (want["status"] == "ok")
            np.testing.assert_array_equal(mine["score"][top], want["score"][top])
            compared += int(top.sum())
    assert compared > 6 * n  # most items take part


# --- CD-judge over the values: end to end ------------------------------------------------------

@pytest.fixture(scope="module")
def rows(demo_rows):
    """Six demo rows of two documents."""
    return demo_rows(3)


def values_args(rows, expert, amateur, *more):
    return [f"data.path={rows}", f"pair.expert.path={expert}", f"pair.amateur.path={amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "runtime.dtype=float64",
            "runtime.max_length=2048", "method=cd_judge", *more]


def read_run(run_dir):
    import json

    import pandas as pd

    return pd.read_parquet(run_dir / "scores.parquet"), json.loads((run_dir / "metrics.json").read_text())


def reference_value_logp(model_dir, prompts, values, temperatures):
    """{T: [n_items, n_values]} log p_T(str(v) | prompt), each value's tokens' tempered
    log-probabilities summed: plain transformers in float64, one sequence at a time (no cscore)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    out = {t: np.zeros((len(prompts), len(values))) for t in temperatures}
    with torch.no_grad():
        for i, prompt in enumerate(prompts):
            p = tok(prompt, add_special_tokens=False)["input_ids"]
            for k, v in enumerate(values):
                ids = tok(str(v), add_special_tokens=False)["input_ids"]
                logits = model(torch.tensor([p + ids])).logits[0, len(p) - 1:-1]
                for t in temperatures:
                    lp = torch.log_softmax(logits / t, dim=-1)
                    out[t][i, k] = float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())
    return out


def eq1(a, b, lam, alpha):
    """Eq. 1 over the values written out: (choice over V_head, expected over all values)."""
    values = np.arange(1, a.shape[1] + 1)
    s = a - lam * b
    head = a >= a.max(axis=1, keepdims=True) + (np.log(alpha) if alpha > 0 else -np.inf)
    choice = values[np.argmax(np.where(head, s, -np.inf), axis=1)]
    q = np.exp(s - s.max(axis=1, keepdims=True))
    return choice, (q / q.sum(axis=1, keepdims=True)) @ values


@pytest.mark.slow
def test_cli_cross_family_judge_over_values_and_the_reverse_pair(judge_dirs, rows, tmp_path, cscore_cli,
                                                                 cscore_main):
    """A pair whose tokenizers differ: method.decode=values scores every value with each model on
    its own prompt (the chat-template one; the base model's plain text); the rows equal Eq. 1 on
    log-probabilities from two plain transformers passes; signature and metrics name it. The
    reverse pair at another λ, t reads both passes from the cache (no forward pass; run in this
    process) and equals the reference with the roles swapped."""
    out = tmp_path / "ab"
    res = cscore_cli("run", *values_args(rows, judge_dirs["expert"], judge_dirs["other"], "method.decode=values",
                                         "method.lam=0.5", "method.t=2", "method.alpha=0.1"),
                     f"hydra.run.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    table, metrics = read_run(out)
    assert metrics["units"] == "values" and "|units:values|" in metrics["signature"]
    assert "decode=values" in metrics["signature"] and metrics["judge"]["decode"] == "values"
    assert set(metrics["judge"]["value_tokens_amateur"]) == {"1", "2", "3", "4", "5"}
    assert metrics["judge"]["chat_template"] == {"expert": True, "amateur": False}
    prompts = {"expert": list(table["prompt"])}  # "<s>user: {content}\nassistant:" (CHAT)
    assert all(p.startswith("<s>user: ") and p.endswith("\nassistant:") for p in prompts["expert"])
    prompts["other"] = [p.removeprefix("<s>user: ").removesuffix("\nassistant:") for p in prompts["expert"]]
    ref = {m: reference_value_logp(judge_dirs[m], prompts[m], range(1, 6), (1.0, 2.0, 3.0)) for m in prompts}
    for (lam, t), (first, second) in (((0.5, 2.0), ("expert", "other")), ((1.0, 3.0), ("other", "expert"))):
        if first == "other":  # the reverse pair: nothing runs
            out = tmp_path / "ba"
            res = cscore_main("run", *values_args(rows, judge_dirs["other"], judge_dirs["expert"],
                                                  "method.decode=values", f"method.lam={lam}", f"method.t={t}",
                                                  "method.alpha=0.1"), f"hydra.run.dir={out}", cwd=tmp_path)
            assert res.returncode == 0, res.stdout + res.stderr
            table, metrics = read_run(out)
            passes = metrics["speed"]["passes"]
            assert set(passes) == {"expert", "amateur"} and all(p["from_cache"] for p in passes.values())
        a, b = ref[first][1.0], ref[second][t]
        choice, expected = eq1(a, b, lam, 0.1)
        np.testing.assert_array_equal(table["score.cd_judge"].to_numpy(), choice)
        np.testing.assert_allclose(table["score.cd_judge_expected"], expected, rtol=1e-9)
        np.testing.assert_allclose(table["score.expert_expected"], eq1(a, a, 0.0, 0.0)[1], rtol=1e-9)
        np.testing.assert_allclose(table["score.amateur_expected"], eq1(ref[second][1.0], a, 0.0, 0.0)[1], rtol=1e-9)
        assert table["score.amateur"].tolist() == eq1(ref[second][1.0], a, 0.0, 0.0)[0].tolist()
        assert (table["output.cd_judge"] == table["score.cd_judge"].astype(int).astype(str)).all()


@pytest.mark.slow
def test_cli_values_on_one_tokenizer_match_the_token_variant(judge_dirs, rows, tmp_path, cscore_cli, cscore_main):
    """One tokenizer (single-token values): decode=values and decode=first_token give the same
    expected score in every row, from two different passes (float64; the second run in this
    process)."""
    got = {}
    for decode, run in (("values", cscore_cli), ("first_token", cscore_main)):
        out = tmp_path / decode
        res = run("run", *values_args(rows, judge_dirs["expert"], judge_dirs["amateur"], f"method.decode={decode}",
                                      "method.lam=0.5", "method.t=2"), f"hydra.run.dir={out}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        got[decode] = read_run(out)
    (values, m_values), (tokens, _) = got["values"], got["first_token"]
    assert "units" not in m_values
    for row in ("cd_judge", "expert", "amateur"):
        np.testing.assert_allclose(values[f"score.{row}_expected"], tokens[f"score.{row}_expected"], rtol=1e-9)
        ok = (tokens[f"parse.{row}"] == "ok").to_numpy()
        if row != "cd_judge":  # a model alone writes its most likely token: where it is a score, the same
            np.testing.assert_array_equal(values[f"score.{row}"].to_numpy()[ok], tokens[f"score.{row}"].to_numpy()[ok])


def test_precheck_refuses_what_a_cross_family_pair_cannot_run(judge_dirs, tmp_path, cscore_main):
    """Exit 2 with one line, before any weights load or run directory is made: the token-variant
    judge (greedy or first_token) and a method without units; decode=values passes the precheck."""
    from cscore.cli import precheck
    from cscore.errors import ConfigError

    base = [f"pair.expert.path={judge_dirs['expert']}", f"pair.amateur.path={judge_dirs['other']}",
            "pair.amateur.early_exit=null"]
    for method, says in ((["method=cd_judge"], "method.decode=greedy reads the judge's text in one vocabulary"),
                         (["method=cd_judge", "method.decode=first_token"], "set method.decode=values"),
                         (["method=cdm_classifier"], "needs expert and amateur to share a tokenizer")):
        with pytest.raises(ConfigError, match=says):
            precheck.check(base + method)
    precheck.check(base + ["method=cd_judge", "method.decode=values"])
    precheck.check(base[:1] + [f"pair.amateur.path={judge_dirs['amateur']}", "method=cd_judge"])  # one tokenizer
    res = cscore_main("run", *base, "method=cd_judge", f"hydra.run.dir={tmp_path}/v", cwd=tmp_path)
    assert res.returncode == 2 and "set method.decode=values" in res.stderr and len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "v").exists()
