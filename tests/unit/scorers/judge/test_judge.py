"""cd_judge: the kept statistics give the full-vocabulary choice of Eq. 1 for every (λ, t), the
expected score by hand, continuation for multi-token values, and the CLI end to end (tiny
models with a chat template; a λ × t grid from the cache equals direct runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

torch = pytest.importorskip("torch")

from cscore.scorers.engine.pass_options import PassOptions  # noqa: E402
from cscore.scorers.judge import judge  # noqa: E402
from cscore.scorers.judge.stats import JudgeStats  # noqa: E402

PAPER_LAMS = (0.01, 0.1, 0.5, 1.0)
PAPER_TS = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)


def brute_choice(main_logits: np.ndarray, asst_logits: np.ndarray, lam: float, t: float) -> np.ndarray:
    """Eq. 1 over the whole vocabulary, float64: argmax_v log p_main(v) − λ log softmax(z/t)(v);
    first index on ties (as torch.argmax)."""
    a = torch.log_softmax(torch.from_numpy(main_logits).double(), -1)
    b = torch.log_softmax(torch.from_numpy(asst_logits).double() / t, -1)
    return torch.argmax(a - lam * b, -1).numpy()


def stats_from_logits(main_logits, asst_logits, values=(1, 2, 3), value_ids=((5,), (6,), (7,))):
    """JudgeStats for one context per row, built the way judge.compute builds them."""
    zm, za = torch.from_numpy(main_logits), torch.from_numpy(asst_logits)
    a = torch.log_softmax(zm.double(), -1)
    z = za.double()
    order, keep = judge.front_mask(a, z)
    fronts = [order[r][keep[r]] for r in range(len(order))]  # each row's front, in z order
    ids = np.concatenate([f.numpy() for f in fronts])
    sizes = [len(f) for f in fronts]
    cols = [v[0] for v in value_ids]
    return JudgeStats(
        n_items=len(main_logits), prefixes=[], values=np.array(values), value_ids=[tuple(v) for v in value_ids],
        main_top=torch.argmax(zm, -1).numpy().astype(np.int64), asst_top=torch.argmax(za, -1).numpy().astype(np.int64),
        front_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), front_ids=ids.astype(np.int64),
        front_a=np.concatenate([a[r, f].numpy() for r, f in enumerate(fronts)]),
        front_z=np.concatenate([z[r, f].numpy() for r, f in enumerate(fronts)]),
        score_a=a[:, cols].numpy(), score_z=z[:, cols].numpy(),
        text_ids=np.arange(main_logits.shape[1]), text_values=np.array([f"<{i}>" for i in range(main_logits.shape[1])]),
        vocab=main_logits.shape[1])


def test_front_choice_equals_full_vocabulary_argmax():
    rng = np.random.default_rng(0)
    n, vocab = 40, 300
    main = rng.normal(0, 3, (n, vocab)).astype(np.float32)
    asst = (0.7 * main + rng.normal(0, 2, (n, vocab))).astype(np.float32)
    # ties: duplicated points (identical logits in both models) and equal main logits
    main[:, 50], asst[:, 50] = main[:, 20], asst[:, 20]
    main[:, 60] = main[:, 61]
    st = stats_from_logits(main, asst)
    assert st.front_sizes.max() < vocab / 4  # the front is small
    ctx = np.arange(n)
    for lam in (0.0, *PAPER_LAMS, 3.0, 25.0):
        for t in PAPER_TS:
            want = brute_choice(main, asst, lam, t)
            got = st.pick(ctx, "contrast", lam / t)
            np.testing.assert_array_equal(got, want, err_msg=f"lam={lam} t={t}")
    np.testing.assert_array_equal(st.pick(ctx, "main"), main.argmax(-1))
    np.testing.assert_array_equal(st.pick(ctx, "asst"), asst.argmax(-1))


def test_front_keeps_smallest_id_of_identical_points():
    main = np.zeros((1, 10), np.float32)
    asst = np.zeros((1, 10), np.float32)
    main[0, [1, 4]] = 2.0  # tokens 1 and 4: identical points, both best for every c
    st = stats_from_logits(main, asst)
    assert 1 in st.front_ids.tolist() and 4 not in st.front_ids.tolist()
    for c in (0.0, 0.1, 10.0):
        assert st.pick(np.array([0]), "contrast", c).tolist() == [1]


def test_only_lambda_over_t_matters():
    rng = np.random.default_rng(1)
    main = rng.normal(0, 3, (30, 200)).astype(np.float32)
    asst = rng.normal(0, 3, (30, 200)).astype(np.float32)
    np.testing.assert_array_equal(brute_choice(main, asst, 0.5, 1.0), brute_choice(main, asst, 1.0, 2.0))


def test_expected_score_by_hand():
    main = np.full((1, 10), -5.0, np.float32)
    asst = np.zeros((1, 10), np.float32)
    main[0, 5:8] = [1.0, 2.0, 0.0]  # values 1, 2, 3 on tokens 5, 6, 7
    asst[0, 5:8] = [0.0, 3.0, 1.0]
    st = stats_from_logits(main, asst)
    c = 0.5
    logits = np.array([1.0 - 0.0, 2.0 - 1.5, 0.0 - 0.5])  # a − c·z (a's logsumexp cancels)
    q = np.exp(logits) / np.exp(logits).sum()
    assert st.expected("contrast", c)[0] == pytest.approx(q @ [1, 2, 3], abs=1e-12)
    qm = np.exp([1.0, 2.0, 0.0]) / np.exp([1.0, 2.0, 0.0]).sum()
    assert st.expected("main")[0] == pytest.approx(qm @ [1, 2, 3], abs=1e-12)
    qa = np.exp([0.0, 3.0, 1.0]) / np.exp([0.0, 3.0, 1.0]).sum()
    assert st.expected("asst")[0] == pytest.approx(qa @ [1, 2, 3], abs=1e-12)


def test_two_digit_values_continue_with_the_next_token():
    """Range 1-10 where "10" is two tokens ("1" = id 1, "0" = id 0): after "1" the judge looks at
    the next token; "1" then "0" reads 10, "1" then a non-digit reads 1."""
    vocab = 12
    texts = np.array([str(i) for i in range(10)] + ["x", "<eos>"])
    prefixes = [(1,)]
    n_items = 2
    main = np.full((n_items * 2, vocab), -4.0, np.float32)
    asst = np.zeros((n_items * 2, vocab), np.float32)
    main[0, 1] = 3.0  # item 0 writes "1" ...
    main[1, 0] = 3.0  # ... then "0": 10
    main[2, 1] = 3.0  # item 1 writes "1" ...
    main[3, 10] = 3.0  # ... then "x": 1
    zm, za = torch.from_numpy(main), torch.from_numpy(asst)
    a = torch.log_softmax(zm.double(), -1)
    order, keep = judge.front_mask(a, za.double())
    fronts = [order[r][keep[r]] for r in range(len(order))]  # each row's front, in z order
    sizes = [len(f) for f in fronts]
    values = list(range(1, 11))
    value_ids = [(v,) for v in range(1, 10)] + [(1, 0)]
    st = JudgeStats(n_items, prefixes, np.array(values), value_ids, zm.argmax(-1).numpy(), za.argmax(-1).numpy(),
                    np.concatenate([[0], np.cumsum(sizes)]), np.concatenate([f.numpy() for f in fronts]),
                    np.concatenate([a[r, f].numpy() for r, f in enumerate(fronts)]),
                    np.concatenate([za[r, f].double().numpy() for r, f in enumerate(fronts)]),
                    np.full((4, 10), np.nan), np.full((4, 10), np.nan), np.arange(vocab), texts, vocab)
    out, chosen = st.decode("main")
    assert out == ["10", "1x"]
    assert chosen == [(1, 0), (1, 10)]
    assert np.isnan(st.expected("main")).all()  # 10 is not one token


def test_round_trip_through_arrays():
    rng = np.random.default_rng(2)
    st = stats_from_logits(rng.normal(size=(3, 50)).astype(np.float32), rng.normal(size=(3, 50)).astype(np.float32))
    back = JudgeStats.from_arrays(st.to_arrays())
    for name in ("main_top", "asst_top", "front_offsets", "front_ids", "front_a", "front_z", "score_a", "score_z"):
        np.testing.assert_array_equal(getattr(back, name), getattr(st, name))
    assert back.prefixes == st.prefixes and back.value_ids == st.value_ids and back.text(7) == "<7>"


# --- the judge pass on tiny models -----------------------------------------------------------

def direct_logits(model_dir, contexts, layers=None):
    """Last-position logits of each context, one at a time, no padding (float64 model)."""
    from transformers import AutoModelForCausalLM

    kwargs = {"num_hidden_layers": layers} if layers else {}
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64, **kwargs).eval()
    with torch.no_grad():
        return np.stack([model(torch.tensor([c])).logits[0, -1].numpy() for c in contexts])


@pytest.mark.parametrize("early_exit", [None, 2])
def test_judge_pass_choices_equal_full_vocabulary_eq1(judge_dirs, early_exit):
    """Every grid point's choice from the kept statistics equals Eq. 1 over the whole vocabulary
    computed from separate unpadded float64 passes; batching and padding side change nothing."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    texts = ["The mayor opened a new bridge.", "The council voted on the tram line on Monday night.",
             "Rain is expected", "A short one"] * 2
    contexts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64)
    asst = None if early_exit else AutoModelForCausalLM.from_pretrained(judge_dirs["amateur"], dtype=torch.float64)
    scale = judge.Scale([1, 2, 3], [(5,), (6,), (7,)], [], len(contexts), lambda t: tok.decode([t]))
    kw = dict(asst=asst if asst is not None else early_exit)
    got = {}
    for budget, side in ((10_000, "right"), (16, "left"), (30, "right")):
        opts = PassOptions(token_budget=budget, padding_side=side)
        got[(budget, side)], _ = judge.compute(main, contexts, scale, options=opts, **kw)
    zm = direct_logits(judge_dirs["expert"], contexts)
    za = (direct_logits(judge_dirs["expert"], contexts, layers=2) if early_exit
          else direct_logits(judge_dirs["amateur"], contexts))
    ctx = np.arange(len(contexts))
    for st in got.values():
        np.testing.assert_array_equal(st.main_top, zm.argmax(-1))
        np.testing.assert_array_equal(st.asst_top, za.argmax(-1))
        for lam in PAPER_LAMS:
            for t in PAPER_TS:
                np.testing.assert_array_equal(st.pick(ctx, "contrast", lam / t), brute_choice(zm, za, lam, t))
    first = next(iter(got.values()))
    for st in got.values():
        np.testing.assert_allclose(st.score_a, first.score_a, rtol=0, atol=1e-9)
        np.testing.assert_allclose(st.expected("contrast", 0.2), first.expected("contrast", 0.2), rtol=0, atol=1e-9)


def judge_args(judge_dirs):
    return [f"pair.expert.path={judge_dirs['expert']}", f"pair.amateur.path={judge_dirs['amateur']}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "method=cd_judge",
            "method.decode=first_token"]  # the one-token read: no decoding (greedy: test_judge_decode.py)


@pytest.fixture(scope="module")
def sweep_rows(demo_rows):
    """Eight demo rows (two documents): the CLI runs of this module score few prompts."""
    return demo_rows(4)


@pytest.fixture(scope="module")
def judge_sweep(judge_dirs, sweep_rows, tmp_path_factory, cscore_cli):
    """A 2 x 2 (λ, t) multirun over one range: one judge pass, three runs read the cache."""
    root = tmp_path_factory.mktemp("judge_sweep")
    res = cscore_cli("run", "-m", *judge_args(judge_dirs), f"data.path={sweep_rows}", "method.lam=0,0.5",
                     "method.t=0.5,2", f"hydra.sweep.dir={root / 'sw'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    (root / "stdout.txt").write_text(res.stdout)
    return root / "sw"


def read_run(run_dir):
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return cfg, pd.read_parquet(run_dir / "scores.parquet"), json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow
def test_cli_judge_run_writes_the_interface_columns(judge_sweep):
    runs = [read_run(d) for d in sorted(judge_sweep.iterdir()) if (d / "metrics.json").is_file()]
    assert len(runs) == 4
    for cfg, table, metrics in runs:
        for col in ("score.cd_judge", "score.cd_judge_expected", "score.expert", "score.amateur",
                    "parse.cd_judge", "prompt", "output.cd_judge"):
            assert col in table.columns
        lo, hi = cfg["method"]["score_range"]
        assert table["score.cd_judge"].between(lo, hi).all()
        assert table["score.cd_judge_expected"].between(lo, hi).all()
        assert set(table["parse.cd_judge"]) <= {"ok", "No Pred", "Below", "Above"}
        assert table["prompt"].str.startswith("<s>user: ").all() and table["prompt"].str.endswith("assistant:").all()
        inv = metrics["judge"]["invalid"]["cd_judge"]
        assert inv["No Pred"] == int((table["parse.cd_judge"] == "No Pred").sum())
        bad = sum(inv[k] for k in ("No Pred", "Below", "Above"))  # List, Echo: scores read, said on their own
        said = (
            f"cd_judge: {bad} of {len(table)} judge outputs gave no score"
            in (judge_sweep.parent / "stdout.txt").read_text()
        )
        assert said == (bad > 0)  # the console says how many outputs had no score in range
        # failures read as the range's lowest score, as the paper does
        assert (table.loc[table["parse.cd_judge"] == "No Pred", "score.cd_judge"] == lo).all()
        assert {r["target"] for r in metrics["correlations"]} == {cfg["method"]["aspect"]}
        sig = metrics["signature"]
        assert "|prompt:judge/geval|" in sig and f"|params:lam={cfg['method']['lam']!r}," in sig
    cached = [m["speed"]["from_cache"] for _, _, m in runs]
    assert sorted(cached) == [False, True, True, True]  # one judge pass for the whole grid
    weights = sorted(m["speed"]["weights"]["expert"] for _, _, m in runs)
    assert weights == ["loaded", "not used", "not used", "not used"]  # loaded once, by the computing job
    # λ = 0 is the main model alone
    for cfg, table, _ in runs:
        if cfg["method"]["lam"] == 0:
            pd.testing.assert_series_equal(table["score.cd_judge"], table["score.expert"], check_names=False)


@pytest.mark.slow
def test_grid_from_cache_equals_direct_runs(judge_sweep, judge_dirs, sweep_rows, tmp_path, cscore_main):
    """A grid point read from the cached judge statistics gives the scores of a run that computes
    everything itself (cache off; in this process: the sweep was the fresh one)."""
    for d in sorted(judge_sweep.iterdir()):
        if not (d / "metrics.json").is_file():
            continue
        cfg, table, _ = read_run(d)
        lam, t = cfg["method"]["lam"], cfg["method"]["t"]
        if lam == 0:
            continue
        out = tmp_path / f"direct_{lam}_{t}"
        res = cscore_main("run", *judge_args(judge_dirs), f"data.path={sweep_rows}", f"method.lam={lam}",
                          f"method.t={t}", "cache.enabled=false", f"hydra.run.dir={out}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        direct = pd.read_parquet(out / "scores.parquet")
        for col in ("score.cd_judge", "score.cd_judge_expected", "parse.cd_judge", "output.cd_judge"):
            pd.testing.assert_series_equal(direct[col], table[col])
        break  # one direct run is enough here (each costs a model load)


def test_judge_config_errors(judge_dirs, tmp_path, cscore_main):
    res = cscore_main("run", *judge_args(judge_dirs), "method.score_range=[5,1]", f"hydra.run.dir={tmp_path}/a",
                      cwd=tmp_path)
    assert res.returncode != 0 and "method.score_range must be [lo, hi]" in res.stderr
    res = cscore_main("run", *judge_args(judge_dirs), "method.lam=-1", f"hydra.run.dir={tmp_path}/b", cwd=tmp_path)
    assert res.returncode != 0 and "method.lam" in res.stderr
    res = cscore_main("run", *judge_args(judge_dirs), "method.aspect=coherance", f"hydra.run.dir={tmp_path}/c",
                      cwd=tmp_path)
    assert res.returncode != 0 and "human.coherance" in res.stderr and "consistency" in res.stderr


@pytest.mark.slow
def test_dev_ids_label_rows_and_split_correlations(judge_dirs, tmp_path, cscore_main):
    """Two of three demo documents (four rows each) are the dev split (a run in this process)."""
    from cscore.data.demo import DEMO_FILE

    lines = [x for x in Path(DEMO_FILE).read_text().splitlines() if x.strip()]
    three = [x for x in lines if json.loads(x)["doc_id"] in ("demo-01", "demo-02", "demo-03")]
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(three[::2]) + "\n")
    ids = tmp_path / "dev.txt"
    ids.write_text("# two demo documents\ndemo-01\ndemo-02\n")
    out = tmp_path / "run"
    res = cscore_main("run", *judge_args(judge_dirs), f"data.path={data}", f"split.dev_ids={ids}",
                      f"hydra.run.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, table, metrics = read_run(out)
    assert set(table.loc[table["split"] == "dev", "group"]) == {"demo-01", "demo-02"}
    assert (table.loc[table["split"] == "test", "group"].isin(["demo-01", "demo-02"])).sum() == 0
    assert {r["target"] for r in metrics["correlations"]} == {"consistency@dev", "consistency@test"}
    bad = tmp_path / "bad.txt"
    bad.write_text("no-such-doc\n")
    res = cscore_main("run", *judge_args(judge_dirs), f"split.dev_ids={bad}", f"hydra.run.dir={tmp_path}/bad",
                      cwd=tmp_path)
    assert res.returncode != 0 and "no-such-doc" in res.stderr


def test_judge_statistics_round_trip_through_the_cache(tmp_path):
    from cscore.scorers.store.cache import StatsCache, stats_key

    rng = np.random.default_rng(3)
    st = stats_from_logits(rng.normal(size=(4, 60)).astype(np.float32), rng.normal(size=(4, 60)).astype(np.float32))
    cache = StatsCache(tmp_path)
    key = stats_key({"kind": "judge", "test": 1})
    cache.save(key, {"judge": st}, {"kind": "judge"})
    back = cache.load(key, JudgeStats).stats["judge"]
    assert back.n_items == 4 and back.vocab == 60
    for c in (0.0, 0.02, 0.5, 2.0):
        np.testing.assert_array_equal(back.pick(np.arange(4), "contrast", c), st.pick(np.arange(4), "contrast", c))
        np.testing.assert_array_equal(back.expected("contrast", c), st.expected("contrast", c))


@pytest.mark.slow
def test_cli_released_preset(judge_dirs, sweep_rows, tmp_path, cscore_cli):
    """method=cd_judge_released decodes (λ on the assistant's first step, t on the main model) and
    parses with the released rules; the contrast row equals a direct call of the decoder. Eight demo
    rows of two documents (a float64 decode of all 160 took most of a minute)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cscore.scorers.judge import released as jr
    from cscore.scorers.judge.parse import parse_released

    out = tmp_path / "rel"
    args = [a for a in judge_args(judge_dirs) if a not in ("method=cd_judge", "method.decode=first_token")]
    res = cscore_cli("run", *args, f"data.path={sweep_rows}", "method=cd_judge_released", "judge_prompt=geval",
                     "method.max_new_tokens=3", "method.lam=0.5", "method.t=2", "runtime.dtype=float64",
                     f"hydra.run.dir={out}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    cfg, table, metrics = read_run(out)
    assert cfg["judge_prompt"]["role"] == "user"  # judge_prompt=geval given on the command line wins
    for row in ("cd_judge_released", "expert", "amateur"):
        for text, score, status in zip(table[f"output.{row}"], table[f"score.{row}"], table[f"parse.{row}"]):
            assert (score, status) == parse_released(text, 1, 5)
    assert metrics["judge"]["preset"] == "released"
    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64)
    asst = AutoModelForCausalLM.from_pretrained(judge_dirs["amateur"], dtype=torch.float64)
    prompt = tok(table["prompt"][0], add_special_tokens=False)["input_ids"]
    first = jr.first_step_logprobs(asst, [prompt], pad_id=tok.pad_token_id, vocab_size=len(tok))
    how = jr.Decoding({tok.eos_token_id}, tok.pad_token_id, min_keep=len(tok), max_new_tokens=3, vocab_size=len(tok))
    ids = jr.decode(main, [prompt], first, how=how, lam=0.5, t=2.0)[0]
    assert jr.released_text(tok, ids) == table["output.cd_judge_released"][0]


def test_split_shared_groups_each_document_with_its_systems():
    instr, end = list(range(100, 140)), [7, 8, 9]
    docs = [list(range(200, 260)), list(range(300, 330))]
    contexts = [instr + d + [50 + j, 60 + j] + end for d in docs for j in range(4)] + [instr + [1, 2]]
    contexts.append(list(contexts[0]))  # a duplicate context
    split = judge.split_shared(contexts)
    for c, (p, s) in zip(contexts, split):
        assert p + s == c and s  # every context whole, its own suffix never empty
    assert [len(p) for p, _ in split[:8]] == [100] * 4 + [70] * 4  # instructions + its document, not less
    assert split[8] == (instr + [1], [2])  # alone: no shared prefix
    assert split[9] == split[0]
    assert judge.best_groups([5, 5, 1, 9]) == [(0, 2), (3, 4)]
    assert judge.best_groups([]) == [(0, 0)]


@pytest.mark.slow
@pytest.mark.parametrize("early_exit", [None, 2])
def test_judge_prefix_sharing_gives_the_same_statistics(judge_dirs, early_exit):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    docs = ["The mayor opened a new bridge over the river on Monday.", "The team won the final match."]
    sums = ["A bridge was opened.", "The council voted.", "Rain is expected", "The team won."]
    texts = [f"Write an accurate summary of the following texts: {d} Summary: {s} Score:" for d in docs for s in sums]
    contexts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    prefixes = [(9,)]  # a continuation context per item: the prompt + one more token
    contexts = contexts + [c + [9] for c in contexts]
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64)
    asst = None if early_exit else AutoModelForCausalLM.from_pretrained(judge_dirs["amateur"], dtype=torch.float64)
    scale = judge.Scale([1, 2, 3], [(5,), (6,), (7, 9)], prefixes, len(texts), lambda t: tok.decode([t]))
    kw = dict(asst=asst if asst is not None else early_exit)
    plain, plain_rep = judge.compute(main, contexts, scale, options=PassOptions(prefix_sharing=False), **kw)
    for budget, side in ((4096, "right"), (40, "left")):
        got, rep = judge.compute(main, contexts, scale, options=PassOptions(prefix_sharing=True, token_budget=budget,
                                                                          padding_side=side), **kw)
        np.testing.assert_array_equal(got.main_top, plain.main_top)
        np.testing.assert_array_equal(got.asst_top, plain.asst_top)
        np.testing.assert_array_equal(got.front_offsets, plain.front_offsets)
        np.testing.assert_array_equal(got.front_ids, plain.front_ids)
        np.testing.assert_allclose(got.front_a, plain.front_a, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got.front_z, plain.front_z, rtol=0, atol=1e-9)
        np.testing.assert_allclose(got.score_a, plain.score_a, rtol=0, atol=1e-9, equal_nan=True)
    got, rep = judge.compute(main, contexts, scale, options=PassOptions(prefix_sharing=True), **kw)
    assert rep.tokens < plain_rep.tokens / 2  # the document prompt once per row, not once per context
