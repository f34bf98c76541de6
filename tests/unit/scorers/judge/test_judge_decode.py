"""cd_judge as the paper runs it: Li et al.'s plausibility set V_head (method.alpha) on the choice
from the kept statistics, contrastive greedy decoding (method.decode=greedy) against plain
step-by-step forwards, the decoded paths through the cache, and the released prompt."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

torch = pytest.importorskip("torch")

from cscore.scorers.judge import judge  # noqa: E402
from cscore.scorers.judge.parse import paper_decided  # noqa: E402
from cscore.scorers.judge.stats import DecodedPaths, JudgeStats  # noqa: E402
from cscore.tests.support.cli import run_main  # noqa: E402

LAMS = (0.0, 0.01, 0.1, 0.5, 1.0, 3.0)
TS = (0.5, 1.0, 2.0, 5.0)
ALPHAS = (0.0, 1e-4, 0.01, 0.1, 0.3, 0.9, 1.0)


def reference_choice(main_logits, asst_logits, lam, t, alpha) -> np.ndarray:
    """Eq. 1 with V_head over the whole vocabulary in float64, written out from the definitions:
    p_main = softmax(main); keep v with p_main(v) >= alpha * max p_main; argmax of
    log p_main(v) - lam * log softmax(asst / t)(v) among them (first index on ties)."""
    m = np.asarray(main_logits, np.float64)
    z = np.asarray(asst_logits, np.float64) / t
    log_pm = m - m.max(-1, keepdims=True)
    log_pm -= np.log(np.exp(log_pm).sum(-1, keepdims=True))
    log_pa = z - z.max(-1, keepdims=True)
    log_pa -= np.log(np.exp(log_pa).sum(-1, keepdims=True))
    score = log_pm - lam * log_pa
    if alpha > 0:
        head = log_pm >= log_pm.max(-1, keepdims=True) + math.log(alpha)
        score = np.where(head, score, -np.inf)
    return score.argmax(-1)


def stats_of(main_logits, asst_logits) -> JudgeStats:
    zm, za = torch.from_numpy(main_logits), torch.from_numpy(asst_logits)
    a = torch.log_softmax(zm.double(), -1)
    z = za.double()
    order, keep = judge.front_mask(a, z)
    fronts = [order[r][keep[r]] for r in range(len(order))]  # each row's front, in z order
    sizes = [len(f) for f in fronts]
    n, vocab = main_logits.shape
    return JudgeStats(
        n_items=n, prefixes=[], values=np.array([1, 2, 3]), value_ids=[(5,), (6,), (7,)],
        main_top=zm.argmax(-1).numpy().astype(np.int64), asst_top=za.argmax(-1).numpy().astype(np.int64),
        front_offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        front_ids=np.concatenate([f.numpy() for f in fronts]).astype(np.int64),
        front_a=np.concatenate([a[r, f].numpy() for r, f in enumerate(fronts)]),
        front_z=np.concatenate([z[r, f].numpy() for r, f in enumerate(fronts)]),
        score_a=a[:, [5, 6, 7]].numpy(), score_z=z[:, [5, 6, 7]].numpy(), text_ids=np.arange(vocab),
        text_values=np.array([f"<{i}>" for i in range(vocab)]), vocab=vocab)


def test_vhead_choice_equals_full_vocabulary_reference():
    """For many (λ, t, α) the choice from the kept front, restricted to V_head, equals the float64
    full-vocabulary reference; α = 0 is the unrestricted choice; V_head changes some choices."""
    rng = np.random.default_rng(7)
    n, vocab = 60, 400
    main = rng.normal(0, 2.5, (n, vocab)).astype(np.float32)
    asst = (0.8 * main + rng.normal(0, 1.5, (n, vocab))).astype(np.float32)
    main[:, 30] = main[:, 31]  # ties in the main model
    st = stats_of(main, asst)
    ctx = np.arange(n)
    changed = 0
    for lam in LAMS:
        for t in TS:
            for alpha in ALPHAS:
                want = reference_choice(main, asst, lam, t, alpha)
                got = st.pick(ctx, "contrast", lam / t, alpha)
                np.testing.assert_array_equal(got, want, err_msg=f"lam={lam} t={t} alpha={alpha}")
            changed += int((reference_choice(main, asst, lam, t, 0.1) != reference_choice(main, asst, lam, t, 0)).sum())
    assert changed > 0  # the set matters on these logits
    np.testing.assert_array_equal(st.pick(ctx, "contrast", 1e6, 1.0), main.argmax(-1))  # α = 1: main's argmax


def test_paper_decided():
    # ".5" and "\u0663" may still go on as numbers (G-Eval's digit-and-dot run, Unicode digits)
    for text in ("", " ", "4", " 4", "3.", "3.5", "-", "10", "\n 2", ".5", ".", "\u0663"):
        assert not paper_decided(text), text
    for text in ("4\n", "3.5 ", "The", "-x", "4.x", "1.2.3 ", "Score: 4", "\u0663 "):
        assert paper_decided(text), text


def test_decoded_paths_round_trip_through_the_cache(tmp_path):
    from cscore.scorers.store.cache import StatsCache, stats_key

    paths = DecodedPaths.from_lists([[3, 4, 5], [], [9]])
    cache = StatsCache(tmp_path)
    key = stats_key({"kind": "judge_decode", "test": 1})
    cache.save(key, {"paths": paths}, {"kind": "judge_decode"})
    entry = cache.load(key, DecodedPaths)
    assert entry.meta["kind"] == "judge_decode" and entry.stats["paths"].paths() == [[3, 4, 5], [], [9]]


# --- decoding on tiny models -----------------------------------------------------------------

def step_by_step(main, asst, prompt, first, *, c, alpha, steps, layers=None):
    """The path recomputed with one plain full forward per step (no cache, no cscore code)."""
    seq = [first]
    for _ in range(steps - 1):
        x = torch.tensor([list(prompt) + seq])
        with torch.no_grad():
            out = main(x, output_hidden_states=layers is not None)
            zm = out.logits[0, -1].numpy()
            if layers is not None:
                h = main.model.norm(out.hidden_states[layers][0, -1])
                za = main.lm_head(h).numpy()
            else:
                za = asst(x).logits[0, -1].numpy()
        if c is None:
            seq.append(int(np.argmax(za)))
        else:
            seq.append(int(reference_choice(zm[None], za[None], c, 1.0, alpha)[0]))
    return seq


@pytest.mark.parametrize("early_exit", [None, 2])
def test_greedy_path_equals_step_by_step_forwards(judge_dirs, early_exit):
    """Tree-decoded paths for several rules at once (KV-cached, shared prefixes) equal the
    step-by-step recomputation; the first token is the statistics' choice."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cscore.scorers.judge.decode import Steps, decode_all, first_tokens

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    texts = ["The mayor opened a new bridge.", "Rain is expected on Monday", "A short one"]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64).eval()
    asst = None if early_exit else AutoModelForCausalLM.from_pretrained(judge_dirs["amateur"],
                                                                        dtype=torch.float64).eval()
    second = asst if asst is not None else early_exit
    stats, _ = judge.compute(main, prompts, judge.Scale([1, 2, 3], [(5,), (6,), (7,)], [], len(prompts),
                                                        lambda t: tok.decode([t])), asst=second)
    rules = [0.0, 0.5, 4.0, None]
    steps = 5
    for alpha in (0.0, 0.1):
        firsts = list(zip(*[first_tokens(stats, r, alpha) for r in rules]))
        got = decode_all(main, prompts, firsts, rules, Steps(alpha, steps, set(), lambda ids: False),
                         asst=second)
        for j, rule in enumerate(rules):
            for i, prompt in enumerate(prompts):
                want = step_by_step(main, asst, prompt, firsts[i][j], c=rule, alpha=alpha, steps=steps,
                                    layers=early_exit)
                assert got[j].paths()[i] == want, (alpha, rule, i)
        assert len({tuple(p) for d in got for p in d.paths()}) > len(prompts)  # the rules' paths differ


def test_greedy_extra_rules_join_the_tree_and_fall_back_alone_out_of_memory(judge_dirs, tmp_path, monkeypatch,
                                                                           caplog):
    """greedy_paths with the sweep's other rules: decoded with this run's rules and stored (a second
    call for one of them decodes nothing); the same paths as decoding each alone; an out-of-memory
    error with them (injected into decode_all) decodes this run's rules alone, one warning."""
    from types import SimpleNamespace as NS

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cscore.scorers.judge import decode as jd
    from cscore.scorers.store.cache import StatsCache

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ["The mayor opened a bridge.", "Rain"]]
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64).eval()
    stats, _ = judge.compute(main, prompts, judge.Scale([1, 2, 3], [(5,), (6,), (7,)], [], len(prompts),
                                                        lambda t: tok.decode([t])), asst=2)
    expert = NS(model=main, config=main.config, parent=None)
    pair = NS(expert=expert, amateur=NS(parent=expert, exit_layer=2, model=main), tokenizer=tok)
    kw = dict(alpha=0.1, max_new_tokens=4, judge_key="k" * 64)

    def how(**more):
        return jd.Paths(**kw, **more)
    real, calls = jd.decode_all, []
    monkeypatch.setattr(jd, "decode_all", lambda *a, **k: calls.append(list(a[3])) or real(*a, **k))
    alone = {r: jd.greedy_paths(pair, stats, prompts, [0.0, r], how())[r] for r in (0.5, 4.0)}
    cache = StatsCache(tmp_path / "c")
    calls.clear()
    got = jd.greedy_paths(pair, stats, prompts, [0.0, 0.5], how(extra_rules=[4.0, 0.5]), cache=cache)
    assert calls == [[0.0, 0.5, 4.0]] and got[0.5] == alone[0.5] and got[4.0] == alone[4.0]
    assert jd.greedy_paths(pair, stats, prompts, [4.0], how(), cache=cache)[4.0] == alone[4.0]
    assert len(calls) == 1  # read from the cache

    def small_device(main, prompts, firsts, cs, steps, **k):
        if len(cs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return real(main, prompts, firsts, cs, steps, **k)

    monkeypatch.setattr(jd, "decode_all", small_device)
    fresh = StatsCache(tmp_path / "fresh")
    got = jd.greedy_paths(pair, stats, prompts, [0.0, 0.5], how(extra_rules=[4.0]), cache=fresh)
    assert set(got) == {0.0, 0.5} and got[0.5] == alone[0.5]
    assert "out of memory decoding 1 other grid points" in caplog.text


def test_greedy_stops_at_eos_and_a_decided_parse(judge_dirs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cscore.scorers.judge.decode import Steps, decode_all

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64).eval()
    prompt = tok("The mayor opened a new bridge.", add_special_tokens=False)["input_ids"]
    free = decode_all(main, [prompt], [[5]], [0.0], Steps(0.1, 8, set(), lambda ids: False), asst=2)[0].paths()[0]
    assert len(free) == 8
    eos = free[3]
    cut = decode_all(main, [prompt], [[5]], [0.0], Steps(0.1, 8, {eos}, lambda ids: False), asst=2)[0].paths()[0]
    assert cut == free[:free.index(eos) + 1]
    short = decode_all(main, [prompt], [[5]], [0.0], Steps(0.1, 8, set(), lambda ids: len(ids) >= 2),
                       asst=2)[0].paths()[0]
    assert short == free[:2]


@pytest.fixture(scope="module")
def rows(demo_rows):
    """Eight demo rows (two documents), so that a CLI run decodes few prompts."""
    return demo_rows(4)


@pytest.fixture
def judge_args(judge_dirs, rows):
    return [f"data.path={rows}", f"pair.expert.path={judge_dirs['expert']}",
            f"pair.amateur.path={judge_dirs['amateur']}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "method=cd_judge",
            "runtime.dtype=float64"]


def read_run(run_dir):
    import json

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return cfg, pd.read_parquet(run_dir / "scores.parquet"), json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow
def test_cli_greedy_decodes_parses_and_caches(judge_dirs, judge_args, tmp_path, cscore_cli, cscore_main):
    """End to end: the contrast row's output is the decoded path of its c (checked against the
    step-by-step recomputation), parsed by the paper's rule; a second run reads the paths from
    the cache and writes the same table; first_token reads one token. The first run is a fresh
    process; the other two run in this one (what they read comes from the on-disk cache)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cscore.scorers.judge.parse import read_score, settled

    args = [*judge_args, "method.lam=0.5", "method.t=0.5", "method.max_new_tokens=5"]
    res = cscore_cli("run", *args, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    cfg, table, metrics = read_run(tmp_path / "a")
    assert metrics["judge"]["decode"] == "greedy" and metrics["judge"]["alpha"] == 0.1
    for row in ("cd_judge", "expert", "amateur"):
        for text, score, status in zip(table[f"output.{row}"], table[f"score.{row}"], table[f"parse.{row}"]):
            assert (score, status) == read_score(text, 1, 5, "paper")
    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64).eval()
    asst = AutoModelForCausalLM.from_pretrained(judge_dirs["amateur"], dtype=torch.float64).eval()
    prompt = tok(table["prompt"][0], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        zm, za = main(torch.tensor([prompt])).logits[0, -1].numpy(), asst(torch.tensor([prompt])).logits[0, -1].numpy()
    first = int(reference_choice(zm[None], za[None], 1.0, 1.0, 0.1)[0])
    path = step_by_step(main, asst, prompt, first, c=1.0, alpha=0.1, steps=5)
    for k in range(1, 6):  # the run stops where the parse is decided (or at EOS)
        if k == 5 or settled(tok.decode(path[:k], skip_special_tokens=True), "paper", 1, 5) \
                or path[k - 1] == tok.eos_token_id:
            break
    assert table["output.cd_judge"][0] == tok.decode(path[:k], skip_special_tokens=True)
    res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / 'b'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, again, metrics_b = read_run(tmp_path / "b")
    assert metrics_b["speed"]["weights"]["expert"] == "not loaded"  # statistics and paths from the cache
    for col in ("output.cd_judge", "score.cd_judge", "output.expert", "output.amateur"):
        pd.testing.assert_series_equal(again[col], table[col])
    res = cscore_main("run", *args, "method.decode=first_token", f"hydra.run.dir={tmp_path / 'c'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, one, metrics_c = read_run(tmp_path / "c")
    assert one["output.cd_judge"][0] == tok.decode([first]) and metrics_c["judge"]["decode"] == "first_token"


def test_path_text_skips_special_tokens(judge_dirs):
    from transformers import AutoTokenizer

    from cscore.scorers.judge.decode import path_text

    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    ids = [tok.bos_token_id] + tok("4 is", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert "<s>" in tok.decode(ids) and path_text(tok, ids) == "4 is"


@pytest.mark.slow
def test_cli_released_prompt_decodes_without_special_tokens(judge_args, tmp_path, cscore_main, shared):
    """cd_judge with the released prompt (no generation prompt; its files are in the shared data
    folder) decodes; outputs carry no special token text and parse by the paper's rule."""
    from cscore.scorers.judge.parse import read_score

    res = cscore_main("run", *judge_args, "judge_prompt=released", "method.max_new_tokens=4",
                      f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    _, table, _ = read_run(tmp_path / "r")
    assert not table["prompt"].str.endswith("assistant:").any()  # no generation prompt
    for text, score, status in zip(table["output.cd_judge"], table["score.cd_judge"], table["parse.cd_judge"]):
        assert "<s>" not in text and "</s>" not in text and "<pad>" not in text
        assert (score, status) == read_score(text, 1, 5, "paper")


def plain_greedy_text(model_dir, prompt_text: str, max_new_tokens: int) -> str:
    """The expert's own greedy generation (transformers' generate, no cscore code) after the
    prompt as the run sent it, decoded with special tokens skipped."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64).eval()
    ids = torch.tensor([tok(prompt_text, add_special_tokens=False)["input_ids"]])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=tok.pad_token_id)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


ROLE_GRID = [("cd_judge", "paper"), ("cd_judge", "released"), ("cd_judge_released", "released"),
             ("cd_judge_released", "paper")]


@pytest.fixture(scope="module")
def role_runs(role_judge_dirs, rows, tmp_path_factory):
    """The four (method, parse) runs of the role-word test as one multirun (in this process, one
    model load per job): {(method, parse): its job's folder}."""
    root = tmp_path_factory.mktemp("role_runs")
    args = [f"data.path={rows}", f"pair.expert.path={role_judge_dirs['expert']}",
            f"pair.amateur.path={role_judge_dirs['amateur']}", "pair.amateur.early_exit=null", "pair.name=role",
            "runtime.progress=false", "runtime.dtype=float64", "judge_prompt=released"]
    res = run_main("run", "-m", *args, "method=cd_judge,cd_judge_released", "method.parse=paper,released",
                   f"hydra.sweep.dir={root / 'sw'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = {}
    for d in (root / "sw").iterdir():
        if (d / "metrics.json").is_file():
            cfg = read_run(d)[0]
            jobs[cfg["method"]["name"], cfg["method"]["parse"]] = d
    assert sorted(jobs) == sorted(ROLE_GRID)
    return jobs


@pytest.mark.slow
@pytest.mark.parametrize("method, parse", ROLE_GRID)
def test_cli_role_word_is_deleted_before_the_parse(role_judge_dirs, role_runs, shared, method, parse):
    """Issue 34 item 1: with the released prompt (no generation prompt) the judge writes its role
    word first ("<|im_start|>assistant\n4<|im_end|>"). Both presets, under either rule, delete
    "assistant" as the released code does and read 4 for every row; the expected text is the
    expert's own greedy generation (transformers' generate) and the expected score the released
    code's reading of it (delete "assistant", strip: "4")."""
    out = role_runs[method, parse]
    _, table, metrics = read_run(out)
    text = plain_greedy_text(role_judge_dirs["expert"], table["prompt"][0], 8)
    assert text == "assistant\n4" and float(text.replace("assistant", "").strip()) == 4.0
    rows = ("expert", "amateur", method)
    for row in rows:
        assert (table[f"score.{row}"] == 4.0).all() and (table[f"parse.{row}"] == "ok").all(), row
        want = "assistant\n4" if method == "cd_judge" else "4"  # the released preset stores its response text
        assert (table[f"output.{row}"] == want).all(), (row, table[f"output.{row}"].tolist())
    judge_info = metrics["judge"]
    assert judge_info["parse"] == parse
    assert judge_info["invalid"] == {row: {"No Pred": 0, "Below": 0, "Above": 0, "List": 0, "Echo": 0, "n": 8}
                                     for row in rows}
    other = "released" if parse == "paper" else "paper"
    assert judge_info["parse_changes"] == {row: {"rule": other, "outputs": 0} for row in rows}


@pytest.mark.slow
def test_cli_full_output_decodes_to_max_new_tokens(judge_dirs, judge_args, tmp_path, cscore_main):
    """Issue 34 item 9: method.full_output=true stores the whole greedy text (up to EOS or
    max_new_tokens; checked against the step-by-step recomputation), scores and statuses equal
    to the default run's, which stops once the parse is settled; its paths have their own key."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    args = [*judge_args, "method.lam=0", "method.max_new_tokens=6", f"cache.dir={tmp_path / 'cache'}"]
    # one multirun (in this process), the default run's job first (as two runs in a row would be)
    res = cscore_main("run", "-m", *args, "method.full_output=false,true", f"hydra.sweep.dir={tmp_path / 'sw'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    got = {full: read_run(tmp_path / "sw" / job) for job, full in (("0", "false"), ("1", "true"))}
    assert [got[full][0]["method"]["full_output"] for full in ("false", "true")] == [False, True]
    short, full = got["false"][1], got["true"][1]
    assert got["true"][2]["judge"]["full_output"] is True
    assert not got["true"][2]["speed"]["passes"]["decode"]["from_cache"]  # not the settled paths' key
    for col in ("score.expert", "parse.expert", "score.cd_judge", "parse.amateur"):
        pd.testing.assert_series_equal(short[col], full[col])
    tok = AutoTokenizer.from_pretrained(judge_dirs["expert"])
    main = AutoModelForCausalLM.from_pretrained(judge_dirs["expert"], dtype=torch.float64).eval()
    longer = 0
    for i, prompt_text in enumerate(full["prompt"]):
        prompt = tok(prompt_text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            first = int(main(torch.tensor([prompt])).logits[0, -1].argmax())
        path = step_by_step(main, None, prompt, first, c=0.0, alpha=0.1, steps=6, layers=2)
        if tok.eos_token_id in path:
            path = path[:path.index(tok.eos_token_id) + 1]
        assert full["output.expert"][i] == tok.decode(path, skip_special_tokens=True)
        assert full["output.expert"][i].startswith(short["output.expert"][i])
        longer += len(full["output.expert"][i]) > len(short["output.expert"][i])
    assert longer > 0  # the settled run stopped early somewhere


def test_judge_summary_lines_echoes_and_parse_changes():
    """The run summary of a judge run: echoes of the range get their own line (no row of echoes
    passes silently), and the other rule's changes are said per row."""
    from cscore.run.kinds.judging import JudgeKind

    metrics = {"judge": {
        "invalid": {"expert": {"No Pred": 0, "Below": 0, "Above": 0, "List": 0, "Echo": 8, "n": 8},
                    "cd_judge": {"No Pred": 2, "Below": 0, "Above": 0, "List": 0, "Echo": 3, "n": 8},
                    "amateur": {"No Pred": 0, "Below": 0, "Above": 0, "List": 0, "Echo": 0, "n": 8}},
        "parse_changes": {"expert": {"rule": "paper", "outputs": 8}, "cd_judge": {"rule": "paper", "outputs": 0},
                          "amateur": {"rule": "paper", "outputs": 0}}}}
    lines = [text for _, text in JudgeKind.summary_lines(None, metrics)]
    assert any(x.startswith("expert: every judge output echoed the prompt's range") for x in lines)
    assert any(x.startswith("cd_judge: 3 of 8 judge outputs echoed") for x in lines)
    assert any(x.startswith("cd_judge: 2 of 8 judge outputs gave no score in range (2 No Pred") for x in lines)
    assert "expert: method.parse=paper would read 8 of 8 outputs otherwise (score or status)" in lines
    assert not any(x.startswith("amateur") for x in lines) and len(lines) == 4


def test_parse_changes_count_what_the_other_rule_reads_otherwise():
    """judge.parse_changes: outputs read under one rule, counted where the other reads another
    score or status (by hand: "Coherence: 4" and "Score: 3" are numbers only for the released
    rule, "1-5" an echo for both, "4", "The" and "assistant\n2" alike)."""
    from cscore.run.kinds.judging import parse_changes
    from cscore.scorers.judge.parse import read_score

    texts = ["Coherence: 4", "4", "Score: 3", "The", "1-5", "assistant\n2"]
    for rule, other in (("paper", "released"), ("released", "paper")):
        read = [read_score(x, 1, 5, rule) for x in texts]
        got = parse_changes(texts, [r[0] for r in read], [r[1] for r in read], 1, 5, rule)
        assert got == {"rule": other, "outputs": 2}


def test_released_prompt_with_first_token_is_refused(judge_args, tmp_path, cscore_main):
    res = cscore_main("run", *judge_args, "judge_prompt=released", "method.decode=first_token",
                      f"hydra.run.dir={tmp_path}/a", cwd=tmp_path)
    assert res.returncode != 0
    assert "method.decode=first_token" in res.stderr and "generation prompt" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.slow
def test_cli_released_rows_decode_once_across_lambda(judge_args, tmp_path, cscore_cli, cscore_main):
    """cd_judge_released: the main-alone and assistant-alone rows do not depend on λ or t; a
    second grid point (run in this process) reads them from the cache (same outputs) and decodes
    only its contrast row."""
    args = [a for a in judge_args if a != "method=cd_judge"]
    args += ["method=cd_judge_released", "judge_prompt=geval", "method.max_new_tokens=2", "method.t=2"]
    got = {}
    for lam, run in ((0.5, cscore_cli), (1.0, cscore_main)):
        out = tmp_path / f"lam{lam}"
        res = run("run", *args, f"method.lam={lam}", f"hydra.run.dir={out}", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        got[lam] = read_run(out)
    passes = {k: v["from_cache"] for k, v in got[1.0][2]["speed"]["passes"].items()}
    assert passes == {"decode expert": True, "decode amateur": True, "decode cd_judge_released": False}
    assert not any(v["from_cache"] for v in got[0.5][2]["speed"]["passes"].values())
    for col in ("output.expert", "output.amateur", "score.expert", "score.amateur"):
        pd.testing.assert_series_equal(got[1.0][1][col], got[0.5][1][col])


@pytest.mark.slow
def test_cli_greedy_sweep_runs_the_judge_pass_once(judge_args, tmp_path, cscore_cli, cscore_main):
    """A 2 x 2 (λ, t) multirun with greedy decoding: one judge pass (the first step of every
    point), the other points read it; a point whose c was decoded already (λ = 0: c = 0) loads no
    weights; a point from the caches equals a run with the cache off (in this process)."""
    res = cscore_cli("run", "-m", *judge_args, "method.lam=0,0.5", "method.t=0.5,2", "method.max_new_tokens=4",
                     f"cache.dir={tmp_path / 'cache'}", f"hydra.sweep.dir={tmp_path / 'sw'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = {}
    for d in sorted((tmp_path / "sw").iterdir()):
        if (d / "metrics.json").is_file():
            cfg, table, metrics = read_run(d)
            runs[float(cfg["method"]["lam"]), float(cfg["method"]["t"])] = (table, metrics)
    assert len(runs) == 4
    judge_cached = {
        k: m["speed"]["passes"][next(iter(m["speed"]["passes"]))]["from_cache"] for k, (_, m) in runs.items()
    }
    assert judge_cached == {(0.0, 0.5): False, (0.0, 2.0): True, (0.5, 0.5): True, (0.5, 2.0): True}
    assert runs[0.0, 2.0][1]["speed"]["weights"]["expert"] == "not used"  # c = 0: every path cached
    # the first job decoded the other points' c (1 and 0.25) in its tree: no later job loads weights
    assert runs[0.0, 0.5][1]["judge"]["grid_decoded_too"] == [[0.5, 0.5], [0.5, 2.0]]
    assert all(runs[k][1]["speed"]["weights"]["expert"] == "not used" for k in runs if k != (0.0, 0.5))
    # the decode is a pass of its own: counted in the run's time, read from the cache by later jobs
    decode = {k: m["speed"]["passes"]["decode"] for k, (_, m) in runs.items()}
    assert [d["from_cache"] for d in decode.values()] == [False, True, True, True]
    first = runs[0.0, 0.5][1]["speed"]
    assert first["score_seconds"] == pytest.approx(sum(p["score_seconds"] for p in first["passes"].values()),
                                                   abs=2e-3)
    pd.testing.assert_series_equal(runs[0.0, 0.5][0]["output.cd_judge"], runs[0.0, 0.5][0]["output.expert"],
                                   check_names=False)
    out = tmp_path / "direct"
    res = cscore_main(
        "run",
        *judge_args,
        "method.lam=0.5",
        "method.t=2",
        "method.max_new_tokens=4",
        "cache.enabled=false",
        f"hydra.run.dir={out}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    _, direct, _ = read_run(out)
    for col in ("output.cd_judge", "score.cd_judge", "parse.cd_judge", "output.amateur", "score.cd_judge_expected"):
        pd.testing.assert_series_equal(direct[col], runs[0.5, 2.0][0][col])


@pytest.mark.slow
def test_cli_released_sweep_decodes_its_grid_in_the_first_job(judge_args, tmp_path, cscore_cli, cscore_main):
    """cd_judge_released over a 2 x 2 (λ, t) multirun (basic launcher): the first job decodes the
    three other contrast rows in its tree and says so in metrics.json; the later jobs read every row
    from the cache and load no weights; each job's outputs equal a run of that point alone with
    the cache off (that run in this process). With runtime.share_grid=false each job decodes its own
    contrast (that sweep in this process too: its own cache)."""
    args = [a for a in judge_args if a != "method=cd_judge"]
    args += ["method=cd_judge_released", "judge_prompt=geval", "method.max_new_tokens=3"]

    def sweep(name, *more, run=cscore_cli):
        res = run("run", "-m", *args, "method.lam=0.5,2", "method.t=0.5,2", *more,
                  f"cache.dir={tmp_path / name / 'cache'}", f"hydra.sweep.dir={tmp_path / name}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        runs = {}
        for d in sorted((tmp_path / name).iterdir()):
            if (d / "metrics.json").is_file():
                cfg, table, metrics = read_run(d)
                runs[float(cfg["method"]["lam"]), float(cfg["method"]["t"])] = (table, metrics)
        assert len(runs) == 4
        return runs

    runs = sweep("shared")
    first, *later = runs
    assert runs[first][1]["judge"]["grid_decoded_too"] == [[lam, t] for lam, t in later]
    for point in later:
        metrics = runs[point][1]
        assert metrics["judge"]["grid_decoded_too"] == []
        assert all(p["from_cache"] for p in metrics["speed"]["passes"].values())
        assert set(metrics["speed"]["weights"].values()) == {"not used"}
        # the decode's figures are those of the first job's tree, not the read's
        was = runs[first][1]["speed"]["passes"]["decode cd_judge_released"]["score_seconds"]
        assert metrics["speed"]["passes"]["decode cd_judge_released"]["score_seconds"] == was > 0
    computed = runs[first][1]["speed"]  # the rows decoded in one call count once in the run's time
    assert computed["score_seconds"] == pytest.approx(
        computed["passes"]["decode cd_judge_released"]["score_seconds"], abs=1e-3)
    for point in later:  # a point read from the cache: its own (reading) time, no speed of work done elsewhere
        speed = runs[point][1]["speed"]
        assert speed["score_seconds"] < computed["score_seconds"] and speed["samples_per_second"] is None
    alone = sweep("alone", "runtime.share_grid=false", run=cscore_main)
    assert all(m["judge"]["grid_decoded_too"] == [] for _, m in alone.values())
    assert all(not m["speed"]["passes"]["decode cd_judge_released"]["from_cache"] for _, m in alone.values())
    out = tmp_path / "direct"
    res = cscore_main("run", *args, "method.lam=2", "method.t=0.5", "cache.enabled=false", f"hydra.run.dir={out}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    direct = read_run(out)[1]
    for col in ("output.cd_judge_released", "score.cd_judge_released", "parse.cd_judge_released"):
        pd.testing.assert_series_equal(direct[col], runs[2.0, 0.5][0][col])
    for point in runs:
        pd.testing.assert_series_equal(alone[point][0]["output.cd_judge_released"],
                                       runs[point][0]["output.cd_judge_released"])
    assert len({tuple(t["output.cd_judge_released"]) for t, _ in runs.values()}) > 1
