"""Generative CDM: segment choice (bounds, determinism, non-overlap), the degraded distribution
against hand-computed toy values, negatives that differ from their positive only inside the
regenerated spans (tiny causal pair, early exit included, and a tiny T5 with sentinels), the KV
cached steps against full forward passes, identical fills, and the pipeline end to end:
`cscore cdm generate` -> `cscore cdm train` (pooler and a tiny transformers classifier) ->
`cscore run method=cdm_gen model=<dir>`, with resume and the clear errors."""

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from cscore.cli import cdm_cmd
from cscore.errors import ConfigError
from cscore.scorers import methods
from cscore.scorers.api import ModelPair
from cscore.scorers.cdm import generate as cg
from cscore.tests.support.models import train_bpe
from cscore.training import discriminator, negatives

TEXT = ("The mayor opened a new bridge over the river on Monday. The council said the bridge cost five million "
        "and took two years to build! Researchers found that the new vaccine protects most patients.")
DIALOGUE = "User: Hi, how are you?\nSystem: I am fine, thanks.\nUser: Did you see the match?\nSystem: The team won."


@pytest.fixture(scope="module")
def tok(tiny_dirs):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_dirs.expert)


# --- segments ----------------------------------------------------------------------------------


def test_span_segments_are_within_bounds_short_and_deterministic(tok):
    bounds = cg.token_boundaries(tok, TEXT)
    assert bounds[0] == 0 and bounds[-1] == len(TEXT) and all(np.diff(bounds) > 0)
    seen = set()
    for item in range(60):
        spans = cg.choose_segments(TEXT, bounds, "span", cg.item_rng(0, f"id{item}", 0), max_span=5)
        assert len(spans) == 1
        a, b = spans[0]
        assert 0 <= a < b <= len(TEXT) and not TEXT[a].isspace() and not TEXT[b - 1].isspace()
        n_tokens = len(tok(TEXT[a:b], add_special_tokens=False)["input_ids"])
        assert 1 <= n_tokens <= 5 + 1, (TEXT[a:b], n_tokens)  # 5 tokens cut at boundaries (+1: re-tokenisation)
        again = cg.choose_segments(TEXT, bounds, "span", cg.item_rng(0, f"id{item}", 0), max_span=5)
        assert again == spans
        seen.add(spans[0])
    assert len(seen) > 30  # the item id moves the span
    other_seed = [cg.choose_segments(TEXT, bounds, "span", cg.item_rng(1, f"id{i}", 0)) for i in range(20)]
    same_seed = [cg.choose_segments(TEXT, bounds, "span", cg.item_rng(0, f"id{i}", 0)) for i in range(20)]
    assert other_seed != same_seed


def test_random_spans_never_overlap_and_keep_a_gap():
    rng = np.random.default_rng(0)
    for _ in range(500):
        units, n, max_span = int(rng.integers(1, 40)), int(rng.integers(1, 6)), int(rng.integers(1, 25))
        runs = cg.random_spans(units, n, max_span, rng)
        assert len(runs) == min(n, (units + 1) // 2)
        for i, j in runs:
            assert 0 <= i < j <= units and j - i <= max_span
        for (_, j), (i2, _) in zip(runs, runs[1:]):
            assert i2 > j  # at least one unit between two segments
    a = cg.random_spans(30, 3, 20, cg.item_rng(5, "x"))
    assert a == cg.random_spans(30, 3, 20, cg.item_rng(5, "x"))


def test_multi_sentence_and_utterance_segments(tok):
    bounds = cg.token_boundaries(tok, TEXT)
    for item in range(30):
        spans = cg.choose_segments(TEXT, bounds, "multi", cg.item_rng(0, item), max_span=6, n_segments=3)
        assert len(spans) == 3 and spans == sorted(spans)
        assert all(b1 < a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    sentences = {TEXT[a:b] for a, b in cg.sentence_spans(TEXT)}
    assert sentences == {"The mayor opened a new bridge over the river on Monday.",
                         "The council said the bridge cost five million and took two years to build!",
                         "Researchers found that the new vaccine protects most patients."}
    for item in range(10):
        (a, b), = cg.choose_segments(TEXT, bounds, "sentence", cg.item_rng(0, item))
        assert TEXT[a:b] in sentences
    # utterances: one line each, the speaker label kept out of the segment
    assert [DIALOGUE[a:b] for a, b in cg.utterance_spans(DIALOGUE)] == [
        "Hi, how are you?", "I am fine, thanks.", "Did you see the match?", "The team won."]
    d_bounds = cg.token_boundaries(tok, DIALOGUE)
    got = {DIALOGUE[a:b] for item in range(20)
           for a, b in cg.choose_segments(DIALOGUE, d_bounds, "utterance", cg.item_rng(0, item))}
    assert got <= {"Hi, how are you?", "I am fine, thanks.", "Did you see the match?", "The team won."} and len(got) > 1
    # a single-line hypothesis (cscore's dialogue tables: the final response) is one utterance
    assert cg.utterance_spans("Sure, see you then.") == [(0, 19)]
    with pytest.raises(ConfigError, match="strategy must be"):
        cg.choose_segments(TEXT, bounds, "words", cg.item_rng(0, 0))


# --- the degraded distribution -------------------------------------------------------------------


def test_degraded_distribution_by_hand():
    p_a = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    p_e = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
    la, le = p_a.log(), p_e.log()
    # gamma = 0: the amateur itself
    torch.testing.assert_close(cg.degraded_logprobs(la, le, 0.0), la, rtol=0, atol=1e-12)
    # gamma = 1: p ∝ p_a^2 / p_e = [1.25, 0.15, 0.2] / 1.6
    want = torch.tensor([1.25, 0.15, 0.2], dtype=torch.float64) / 1.6
    torch.testing.assert_close(cg.degraded_logprobs(la, le, 1.0).exp(), want, rtol=0, atol=1e-12)
    # log p_a - gamma * m with m = log p_e - log p_a, normalised (gamma = 0.5), then temperature 2
    g = 0.5
    z = [math.log(a) - g * (math.log(e) - math.log(a)) for a, e in zip(p_a.tolist(), p_e.tolist())]
    hand = [math.exp(v) / sum(math.exp(u) for u in z) for v in z]
    torch.testing.assert_close(cg.degraded_logprobs(la, le, g).exp(), torch.tensor(hand, dtype=torch.float64))
    hand_t = [math.exp(v / 2) / sum(math.exp(u / 2) for u in z) for v in z]
    torch.testing.assert_close(cg.degraded_logprobs(la, le, g, temperature=2.0).exp(),
                               torch.tensor(hand_t, dtype=torch.float64))
    # top-k = 1 keeps the argmax; top-p = 0.7 keeps [0.78, 0.09, 0.13]'s head until it reaches 0.7;
    # banned tokens get no mass
    assert cg.degraded_logprobs(la, le, 1.0, top_k=1).exp().tolist() == [1.0, 0.0, 0.0]
    assert cg.degraded_logprobs(la, le, 1.0, top_p=0.7).exp().tolist() == [1.0, 0.0, 0.0]
    kept = cg.degraded_logprobs(la, le, 1.0, top_p=0.85).exp()
    torch.testing.assert_close(kept, torch.tensor([1.25, 0.0, 0.2], dtype=torch.float64) / 1.45)
    torch.testing.assert_close(cg.degraded_logprobs(la, le, 1.0, banned=[0]).exp(),
                               torch.tensor([0.0, 0.15, 0.2], dtype=torch.float64) / 0.35)


# --- negatives -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def causal(tiny_dirs):
    """Samplers of the tiny pair: two models, and the expert with an early-exit amateur."""
    two = ModelPair.load(tiny_dirs.expert, tiny_dirs.amateur)
    ee = ModelPair.load(tiny_dirs.expert, amateur_early_exit=2)
    return SimpleNamespace(two=cg.DegradedSampler(two, cg.Sampling(gamma=0.5)),
                           early_exit=cg.DegradedSampler(ee, cg.Sampling(gamma=0.5)), pair=two, ee_pair=ee)


def assert_only_spans_changed(positive: str, record: dict) -> None:
    """Outside the regenerated spans the negative is the positive, byte for byte."""
    neg = record["negative"]
    pos_at, neg_at = 0, 0
    for s in record["spans"]:
        assert positive[pos_at:s["start"]] == neg[neg_at:s["neg_start"]]
        assert positive[s["start"]:s["end"]] == s["removed"] and neg[s["neg_start"]:s["neg_end"]] == s["fill"]
        pos_at, neg_at = s["end"], s["neg_end"]
    assert positive[pos_at:] == neg[neg_at:]
    assert neg.encode().startswith(positive[:record["spans"][0]["start"]].encode())
    assert neg.encode().endswith(positive[record["spans"][-1]["end"]:].encode())


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["span", "multi", "sentence"])
def test_causal_negatives_differ_only_inside_the_spans(causal, strategy):
    s = cg.Settings(strategy=strategy, n_negatives=2, max_span=6)
    for sampler in (causal.two, causal.early_exit):
        for item in ("a", "b"):
            recs = cg.make_negatives(sampler, item, "Summary:\n", TEXT, s)
            assert [r["index"] for r in recs] == [0, 1]
            for r in recs:
                assert len(r["spans"]) == (3 if strategy == "multi" else 1)
                assert_only_spans_changed(TEXT, r)
                assert r["negative"] != TEXT and not r["identical"]
                for sp in r["spans"]:
                    # causal: the segment starts at the whitespace before it (the context ends on a word)
                    assert sp["start"] == 0 or TEXT[sp["start"] - 1] not in " \t"


def test_negatives_do_not_depend_on_the_other_items(causal):
    s = cg.Settings(strategy="multi", n_negatives=1, max_span=4, seed=3)
    alone = cg.make_negatives(causal.two, "item-7", "P:\n", TEXT, s)
    cg.make_negatives(causal.two, "item-1", "Other prompt:\n", DIALOGUE, s)  # other work in between
    after = cg.make_negatives(causal.two, "item-7", "P:\n", TEXT, s)
    assert alone == after
    other_seed = cg.make_negatives(
        causal.two, "item-7", "P:\n", TEXT, cg.Settings(strategy="multi", max_span=4, seed=4)
    )
    assert other_seed[0]["negative"] != alone[0]["negative"]


def test_cached_steps_equal_full_forward_passes(causal):
    """Each step's expert / amateur (early exit, read from the expert's pass through the KV cache)
    log-probabilities equal those of a full forward pass over context + tokens so far."""
    sampler = causal.early_exit
    seen = []
    real = sampler._sample

    def record(lps, gen, banned=None):
        seen.append({k: v.clone() for k, v in lps.items()})
        return real(lps, gen, banned)

    sampler._sample = record
    try:
        context = causal.ee_pair.tokenizer("The mayor opened", add_special_tokens=False)["input_ids"]
        out = sampler.continue_causal(context, 5, cg.torch_generator(0, "kv"))
    finally:
        sampler._sample = real
    seq = torch.tensor([context + out])
    with torch.no_grad():
        full = {"expert": causal.ee_pair.expert.model(seq).logits[0].double().log_softmax(-1),
                "amateur": causal.ee_pair.amateur.model(seq).logits[0].double().log_softmax(-1)}
    for step, lps in enumerate(seen):
        for role in ("expert", "amateur"):
            torch.testing.assert_close(lps[role], full[role][len(context) - 1 + step], rtol=1e-5, atol=1e-4)
    assert not torch.allclose(seen[0]["expert"], seen[0]["amateur"])


class EchoSampler:
    """Always gives back the removed text: every fill is identical."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    def fill(self, prompt, text, a, b, n_tokens, gen):
        self.calls += 1
        return a, text[a:b]


def test_identical_fills_are_resampled_counted_and_flagged_or_dropped(tok):
    echo = EchoSampler(tok)
    kept = cg.make_negatives(echo, "x", "", TEXT, cg.Settings(strategy="multi", n_segments=2, max_tries=4))
    assert echo.calls == 2 * 4  # every segment drawn max_tries times
    r = kept[0]
    assert r["identical"] and not r["dropped"] and r["negative"] == TEXT
    assert all(s["identical"] and s["tries"] == 4 for s in r["spans"])
    dropped = cg.make_negatives(echo, "x", "", TEXT, cg.Settings(max_tries=2, on_identical="drop"))[0]
    assert dropped["dropped"] and dropped["negative"] is None
    c = negatives.counts([{**kept[0], "source_id": "x"}, {**dropped, "source_id": "y"}])
    assert (c["identical_kept"], c["identical_dropped"], c["identical_fills"]) == (1, 1, 3)


# --- seq2seq: span infilling with T5 sentinels ----------------------------------------------------


def t5_tokenizer(sentinels: bool):
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    extra = [f"<extra_id_{i}>" for i in range(3)] if sentinels else []
    t = train_bpe([TEXT, DIALOGUE] * 20, 300, specials=["<pad>", "</s>", "<unk>", *extra])
    t.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=t, eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                   additional_special_tokens=extra)


def build_t5(path: Path, tok, layers: int, d_model: int, seed: int) -> str:
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(tok), d_model=d_model, d_kv=8, d_ff=2 * d_model, num_layers=layers, num_heads=2,
                      dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    T5ForConditionalGeneration(config).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    root = tmp_path_factory.mktemp("t5gen")
    with_s, without = t5_tokenizer(True), t5_tokenizer(False)
    return SimpleNamespace(
        expert=build_t5(root / "e", with_s, 2, 32, 1),
        amateur=build_t5(root / "a", with_s, 1, 16, 2),
        plain=build_t5(root / "p", without, 1, 16, 3),
    )


@pytest.mark.parametrize("strategy", ["span", "multi"])
def test_t5_infilling_changes_only_the_spans(t5, strategy):
    pair = ModelPair.load(t5.expert, t5.amateur)
    sampler = cg.DegradedSampler(pair, cg.Sampling(gamma=0.5))
    assert sampler.seq2seq and sampler.sentinel1 is not None
    s = cg.Settings(strategy=strategy, max_span=5, n_negatives=2)
    recs = cg.make_negatives(sampler, "t5-item", "Source text.", TEXT, s)
    for r in recs:
        assert_only_spans_changed(TEXT, r)
        for sp in r["spans"]:  # infilling: the segment is exactly the trimmed span; no sentinel in the fill
            assert sp["removed"] == sp["removed"].strip() and "<extra_id" not in sp["fill"]
    assert recs == cg.make_negatives(sampler, "t5-item", "Source text.", TEXT, s)


def test_t5_without_sentinels_is_a_clear_error(t5):
    pair = ModelPair.load(t5.plain, t5.plain)
    with pytest.raises(ConfigError, match="sentinel tokens"):
        cg.DegradedSampler(pair, cg.Sampling())


def test_cdm_gen_is_not_a_function_of_the_statistics():
    with pytest.raises(ConfigError, match="cscore run method=cdm_gen"):
        methods.score("cdm_gen", {})
    assert methods.get("cdm_gen").kind == "discriminator"


# --- the pipeline ----------------------------------------------------------------------------------


def pair_args(tiny_dirs):
    return [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false"]


@pytest.fixture(scope="module")
def pipe(tiny_dirs, tmp_path_factory):
    """A small table (the first 3 demo documents, 24 rows), negatives (2 per positive), a pooler
    and a tiny llama classifier trained on them, in process (one model load each)."""
    from cscore.data.registry import load_config

    root = tmp_path_factory.mktemp("cdmgen")
    demo, _ = load_config({"name": "demo"})
    demo = demo[demo["group"].isin(sorted(set(demo["group"]))[:3])]
    table = root / "table.jsonl"
    demo[["id", "group", "system", "source", "hypothesis", "reference", "human.overall"]].to_json(
        table, orient="records", lines=True)
    data = ["data=table", f"data.path={table}", "data.task=summarization"]
    common = pair_args(tiny_dirs) + data + [f"cache.dir={root / 'stats'}"]
    gen_args = common + [f"cdm.generate.out={root / 'gen'}", "cdm.generate.n_negatives=2", "cdm.generate.max_span=8"]
    cfg, ov = cdm_cmd.parse(gen_args)
    cdm_cmd.generate(cfg, ov)
    cfg, ov = cdm_cmd.parse(common + [f"cdm.train.input={root / 'gen'}", f"cdm.train.out={root / 'pooler'}"])
    cdm_cmd.train(cfg, ov)
    cfg, ov = cdm_cmd.parse(common + [f"cdm.train.input={root / 'gen'}", f"cdm.train.out={root / 'clf'}",
                                      f"cdm.train.discriminator={tiny_dirs.amateur}", "cdm.train.epochs=2",
                                      "cdm.train.text=prompt_hypothesis", "cdm.train.max_length=256"])
    cdm_cmd.train(cfg, ov)
    return SimpleNamespace(root=root, common=common, data=data, gen_args=gen_args, table=demo)


def records(folder):
    return [json.loads(line) for line in (Path(folder) / "negatives.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_generate_writes_negatives_and_provenance(pipe):
    recs = records(pipe.root / "gen")
    assert len(recs) == 2 * 24 and len({r["id"] for r in recs}) == 48
    by_id = dict(zip(pipe.table["id"], pipe.table["hypothesis"]))
    for r in recs:
        assert set(r) >= {"id", "group", "positive", "negative", "spans", "strategy", "gamma", "seed", "tries"}
        assert r["positive"] == by_id[r["source_id"]] and (r["strategy"], r["gamma"], r["seed"]) == ("span", 0.5, 0)
        assert_only_spans_changed(r["positive"], r)
        assert r["prompt"].startswith("Write an accurate") and r["prompt"].endswith("Summary:\n")
    prov = json.loads((pipe.root / "gen" / "provenance.json").read_text())
    assert prov["complete"] and prov["counts"]["negatives_written"] == 48 and prov["counts"]["positives"] == 24
    assert prov["identity"]["generate"]["strategy"] == "span" and prov["versions"]["cscore"]
    assert set(prov["models"]) == {"expert", "amateur"} and prov["models"]["expert"]["identity"]["fingerprint"]
    assert prov["config"]["cdm"]["generate"]["n_negatives"] == 2


def test_generate_resumes_and_refuses_another_config(pipe, tmp_path):
    gen = tmp_path / "gen"
    shutil.copytree(pipe.root / "gen", gen)
    full = (gen / "negatives.jsonl").read_bytes()
    lines = full.splitlines(keepends=True)
    # as if killed while writing: the last positive's first record whole, its second cut in half
    (gen / "negatives.jsonl").write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    args = [a for a in pipe.gen_args if not a.startswith("cdm.generate.out=")] + [f"cdm.generate.out={gen}"]
    cfg, ov = cdm_cmd.parse(args)
    cdm_cmd.generate(cfg, ov)
    assert (gen / "negatives.jsonl").read_bytes() == full  # the same records: deterministic per item
    mtime = (gen / "negatives.jsonl").stat().st_mtime_ns
    cfg, ov = cdm_cmd.parse(args)
    cdm_cmd.generate(cfg, ov)  # finished: nothing to do, nothing loaded
    assert (gen / "negatives.jsonl").stat().st_mtime_ns == mtime
    cfg, ov = cdm_cmd.parse(args + ["cdm.generate.gamma=0.9"])
    with pytest.raises(ConfigError, match="another config"):
        cdm_cmd.generate(cfg, ov)


def test_positives_hypothesis_reference_top_rated(pipe):
    t = pipe.table
    hyp = negatives.select_positives(t, "hypothesis", None)
    assert list(hyp["id"]) == list(t["id"]) and list(hyp["text"]) == list(t["hypothesis"])
    ref = negatives.select_positives(t, "reference", None)
    assert len(ref) == 3 and list(ref["id"]) == [f"{g}/reference" for g in sorted(set(t["group"]))]
    assert set(ref["text"]) == set(t["reference"]) and set(ref["system"]) == {"reference"}
    top = negatives.select_positives(t, "top_rated", "human.overall")
    assert len(top) == 3
    for row in top.itertuples():
        group = t[t["group"] == row.group]
        assert t.loc[t["id"] == row.id, "human.overall"].item() == group["human.overall"].max()
    with pytest.raises(ConfigError, match="no references"):
        negatives.select_positives(t.assign(reference=None), "reference", None)


def test_train_reports_group_held_out_accuracy(pipe):
    for name in ("pooler", "clf"):
        meta = json.loads((pipe.root / name / "cscore_discriminator.json").read_text())
        acc = meta["accuracy"]
        assert acc["train"]["n"] + acc["held_out"]["n"] == 24 + 48
        held = set(meta["split"]["held_out_groups"])
        assert held and held < set(pipe.table["group"])
        # the rows trained on: the positives (every row) of the other groups
        assert sorted(meta["trained_rows"]["rows"]) == sorted(pipe.table[~pipe.table["group"].isin(held)]["id"])
        assert 0.0 <= acc["held_out"]["accuracy"] <= 1.0
    pooler = json.loads((pipe.root / "pooler" / "cscore_discriminator.json").read_text())
    assert pooler["kind"] == "pooler" and set(pooler["pooler"]["weights"]) >= {"mean", "sum", "log_len"}
    assert pooler["pair"]["expert"].endswith("expert") and pooler["momentum"]["t"] == 1.0
    assert pooler["accuracy"]["train"]["accuracy"] > 0.6  # the tiny pair's momentum separates its own negatives
    clf = json.loads((pipe.root / "clf" / "cscore_discriminator.json").read_text())
    assert clf["kind"] == "classifier" and clf["classifier"]["class"] == "LlamaForSequenceClassification"
    assert (pipe.root / "clf" / "config.json").exists()
    # the same config again: skipped; another one into the same directory: refused
    cfg, ov = cdm_cmd.parse(
        pipe.common + [f"cdm.train.input={pipe.root / 'gen'}", f"cdm.train.out={pipe.root / 'pooler'}"]
    )
    before = (pipe.root / "pooler" / "cscore_discriminator.json").read_text()
    cdm_cmd.train(cfg, ov)
    assert (pipe.root / "pooler" / "cscore_discriminator.json").read_text() == before
    cfg, ov = cdm_cmd.parse(
        pipe.common
        + [f"cdm.train.input={pipe.root / 'gen'}", f"cdm.train.out={pipe.root / 'pooler'}", "cdm.train.l2=3"]
    )
    with pytest.raises(ConfigError, match="another config"):
        cdm_cmd.train(cfg, ov)


@pytest.mark.slow
def test_run_cdm_gen_scores_with_both_discriminators(pipe, cscore_cli):
    sweep = pipe.root / "runs"
    res = cscore_cli("run", "-m", *pipe.common, "method=cdm_gen",
                     f"model={pipe.root / 'pooler'},{pipe.root / 'clf'}", f"hydra.sweep.dir={sweep}", cwd=pipe.root)
    assert res.returncode == 0, res.stdout + res.stderr
    for i, kind in enumerate(("pooler", "classifier")):
        scores = pd.read_parquet(sweep / str(i) / "scores.parquet")
        metrics = json.loads((sweep / str(i) / "metrics.json").read_text())
        # the 2 train groups' 16 rows are left out (3 groups, round(0.2 * 3) = 1 held out): the held-out 8 scored
        held = json.loads((pipe.root / ("pooler", "clf")[i] / "cscore_discriminator.json").read_text())["split"]
        assert set(scores["id"]) == set(pipe.table[pipe.table["group"].isin(held["held_out_groups"])]["id"])
        assert len(scores) == 24 - 16 and metrics["discriminator"]["excluded_trained_rows"] == 16
        assert f"cdm_gen: 16 rows the {kind} was trained on are excluded from scoring" in res.stdout + res.stderr
        for col in ("score.cdm_gen", "score.expert", "score.amateur", "score.ensemble"):
            assert np.isfinite(scores[col]).all(), col
        assert scores["score.cdm_gen"].between(0, 1).all()
        assert metrics["discriminator"]["kind"] == kind and metrics["discriminator"]["output"] == "probability"
        assert "cdm_gen" in {c["metric"] for c in metrics["correlations"]}
    # the pooler's column is its decision on the run's momentum, as a probability
    from cscore.scorers.methods import cdm
    from cscore.scorers.methods.common import per_item

    scores = pd.read_parquet(sweep / "0" / "scores.parquet")
    meta = json.loads((pipe.root / "pooler" / "cscore_discriminator.json").read_text())
    pair = ModelPair.load(meta["pair"]["expert"], meta["pair"]["amateur"])
    stats = pair.statistics(list(scores["prompt"]), list(scores["hypothesis"]))
    seqs = per_item(cdm.momentum(stats.stats, 1.0, None), stats.stats["expert"].offsets)
    want = 1 / (1 + np.exp(-discriminator.pooler_from_dict(meta["pooler"]).score(seqs)))
    np.testing.assert_allclose(scores["score.cdm_gen"], want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("args, message", [
    (["run", "method=cdm_gen"], "give model=<directory written by `cscore cdm train`>"),
    (["run", "method=cdm_gen", "model=/no/such/dir"], "model=/no/such/dir: no such directory"),
    (["cdm", "generate", "cdm.generate.gama=1"], "no setting cdm.generate.gama (did you mean cdm.generate.gamma?)"),
    (["cdm", "generate", "cdm.generate.strategy=words"], "cdm.generate.strategy must be span | sentence"),
    (["cdm", "generate", "cdm.generate.max_span=0"], "cdm.generate.max_span must be an integer >= 1"),
    (["cdm", "train"], "cdm.train.input=<a `cscore cdm generate` directory> is required"),
    (["cdm", "train", "cdm.train.input=/no/such/gen"], "no such directory"),
    (["cdm", "frobnicate"], "unknown cdm command 'frobnicate'"),
])
def test_bad_inputs_are_one_line_errors(args, message, tmp_path, cscore_main):
    res = cscore_main(*args, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_generate_dir_is_not_a_discriminator_and_the_pair_must_match(pipe, tmp_path, cscore_main):
    res = cscore_main("run", "method=cdm_gen", f"model={pipe.root / 'gen'}", cwd=tmp_path)
    assert res.returncode == 2 and "has no cscore_discriminator.json" in res.stderr, res.stderr
    res = cscore_main("run", "method=cdm_gen", f"model={pipe.root / 'pooler'}", "method.output=odds", cwd=tmp_path)
    assert res.returncode == 2 and "method.output must be probability | log_odds, got 'odds'" in res.stderr, res.stderr
    res = cscore_main("cdm", "train", *pipe.common, f"cdm.train.input={pipe.root}", cwd=tmp_path)
    assert res.returncode == 2 and "not a `cscore cdm generate` directory" in res.stderr, res.stderr
    # a pooler trained on the tiny pair cannot read another pair's momentum (stops before any model loads)
    res = cscore_main("run", *pipe.data, "method=cdm_gen", f"model={pipe.root / 'pooler'}", "runtime.progress=false",
                      "hydra.run.dir=" + str(tmp_path / "r"), cwd=tmp_path)
    assert res.returncode == 2 and "reads the momentum of the pair it was trained with" in res.stderr, res.stderr
    assert not (tmp_path / "r").exists()


def test_t5_infilling_reads_the_text_after_the_segment(t5):
    """Algorithm 1: the segment is removed and re-inserted with the rest of the text as context: the
    encoder reads prompt + the text before the segment + <extra_id_0> + the text after it."""
    pair = ModelPair.load(t5.expert, t5.amateur)
    sampler = cg.DegradedSampler(pair, cg.Sampling(gamma=0.5))
    seen = []
    real = sampler.infill

    def recording(encoder_ids, max_tokens, gen):
        seen.append(list(encoder_ids))
        return real(encoder_ids, max_tokens, gen)

    sampler.infill = recording
    rec = cg.make_negatives(sampler, "t5-ctx", "Source text.", TEXT, cg.Settings(strategy="span", max_span=4))[0]
    (span,) = rec["spans"]
    tok = pair.tokenizer
    assert len(seen) == span["tries"]
    encoder_text = tok.decode(seen[0], skip_special_tokens=False)
    before, after = TEXT[:span["start"]], TEXT[span["end"]:]
    assert "<extra_id_0>" in encoder_text and encoder_text.count("<extra_id_0>") == 1
    head, tail = encoder_text.split("<extra_id_0>")
    assert head.startswith("Source text.") and head.endswith(before) and tail.removesuffix("</s>") == after
    assert_only_spans_changed(TEXT, rec)


def test_generate_with_an_encoder_decoder_pair_infills(t5, tmp_path):
    """`cscore cdm generate` with a T5 pair: the negatives are infilled segments, the text outside
    them byte-identical to the positive."""
    from cscore.data.registry import load_config

    demo, _ = load_config({"name": "demo"})
    table = tmp_path / "table.jsonl"
    demo[demo["group"] == sorted(set(demo["group"]))[0]][
        ["id", "group", "system", "source", "hypothesis", "reference", "human.overall"]].to_json(
        table, orient="records", lines=True)
    out = tmp_path / "gen"
    cfg, ov = cdm_cmd.parse([f"pair.expert.path={t5.expert}", f"pair.amateur.path={t5.amateur}",
                             "pair.amateur.early_exit=null", "pair.name=tiny-t5", "runtime.progress=false",
                             "data=table", f"data.path={table}", "data.task=summarization", "cdm.generate.limit=3",
                             "cdm.generate.max_span=5", f"cdm.generate.out={out}", f"cache.dir={tmp_path / 'stats'}"])
    assert cdm_cmd.generate(cfg, ov) == out
    recs = records(out)
    assert len(recs) == 3 and json.loads((out / "provenance.json").read_text())["complete"]
    for r in recs:
        assert_only_spans_changed(r["positive"], r)
        assert all("<extra_id" not in s["fill"] for s in r["spans"])
