"""T5Score's discriminative training (``cscore t5score train``, seed 004 Eq. 3) on a tiny random T5
built here: the ranking pairs, the loss against a direct float64 computation, training that raises
the pairwise accuracy, the saved model scored by baseline=t5score, skip / refuse on re-runs, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cscore.training import t5score as tt

PAD, BOS, EOS = 0, 1, 2
WORDS = ("the mayor opened a new bridge over river on monday council said it cost five million team won final "
         "match after late goal vaccine protects most patients researchers found").split()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    vocab = {"<pad>": PAD, "<s>": BOS, "</s>": EOS, "<unk>": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", EOS)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(vocab_size=len(vocab), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                num_heads=4, dropout_rate=0.0, pad_token_id=PAD, eos_token_id=EOS,
                                                decoder_start_token_id=PAD))
    path = tmp_path_factory.mktemp("t5") / "base"
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return str(path)


def rated_table(tmp_path: Path, n_docs: int = 8) -> Path:
    """Per document: a reference and 3 hypotheses; the copy of the reference rated best, a partial
    copy next, unrelated words worst (the ranking a scorer should learn)."""
    rng = np.random.default_rng(0)
    rows = []
    for d in range(n_docs):
        ref = " ".join(rng.choice(WORDS, 8))
        junk = " ".join(rng.choice(WORDS, 8))
        for k, (hyp, q) in enumerate(
            [(ref, 5.0), (" ".join(ref.split()[:4]) + " " + junk.split()[0], 3.0), (junk, 1.0)]
        ):
            rows.append({"id": f"d{d}/{k}", "doc": f"d{d}", "src": f"document {d}", "hyp": hyp, "ref": ref, "q": q})
    path = tmp_path / "rated.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def data_args(path: Path) -> list[str]:
    return [
        "data=table",
        f"data.path={path}",
        "data.task=summarization",
        "data.columns.id=id",
        "data.columns.group=doc",
        "data.columns.source=src",
        "data.columns.hypothesis=hyp",
        "data.columns.reference=ref",
        "data.columns.human=q",
    ]


def test_ranking_pairs_follow_the_human_order_within_groups():
    pairs = tt.ranking_pairs(["a", "a", "a", "b", "b"], ["r1"] * 3 + ["r2"] * 2, ["x", "y", "z", "u", "v"],
                             np.array([3.0, 1.0, 3.0, 2.0, np.nan]), both_directions=True)
    fwd = [(p.better, p.worse, p.margin) for p in pairs if not p.reverse]
    assert fwd == [("x", "y", 2.0), ("z", "y", 2.0)]  # ties and missing scores make no pair; groups never mix
    assert [p.reverse for p in pairs] == [False, True, False, True]
    assert len(tt.ranking_pairs(["a"] * 3, ["r"] * 3, ["x", "y", "z"], np.array([3.0, 2.5, 1.0]), min_gap=0.6,
                                both_directions=False)) == 2


def test_loss_equals_eq3_with_f_from_a_direct_float64_computation(t5_dir):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(t5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(t5_dir, dtype=torch.float64).eval()
    pairs = [tt.RankPair("g", "the mayor opened a bridge", "the mayor opened", "won final match", 0.7),
             tt.RankPair("g", "the mayor opened a bridge", "the mayor opened", "won final match", 0.7, reverse=True)]

    def f(src, tgt):
        labels = tok(tgt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = model(**tok(src, return_tensors="pt"), labels=labels).logits[0]
        return torch.log_softmax(logits, -1).gather(1, labels[0][:, None]).mean().item()

    with torch.no_grad():
        fb, fw = tt.pair_scores(model, tok, pairs, max_length=64)
    want_b = [f("the mayor opened a bridge", "the mayor opened"), f("the mayor opened", "the mayor opened a bridge")]
    want_w = [f("the mayor opened a bridge", "won final match"), f("won final match", "the mayor opened a bridge")]
    np.testing.assert_allclose(fb.numpy(), want_b, atol=1e-12)
    np.testing.assert_allclose(fw.numpy(), want_w, atol=1e-12)
    loss = tt.ranking_loss(fb, fw, torch.tensor([0.7, 0.7], dtype=torch.float64), alpha=2.0)
    np.testing.assert_allclose(loss.numpy(), np.maximum(0, np.array(want_w) - np.array(want_b) + 1.4), atol=1e-12)


def test_train_command_learns_the_ranking_and_the_model_scores_as_a_baseline(t5_dir, tmp_path, cscore_main):
    path = rated_table(tmp_path)
    out = tmp_path / "trained"
    args = [
        "t5score",
        "train",
        *data_args(path),
        f"t5score.train.model={t5_dir}",
        f"t5score.train.out={out}",
        "t5score.train.lr=3e-3",
        "t5score.train.epochs=6",
        "t5score.train.batch_size=8",
        "t5score.train.holdout=0.25",
    ]
    res = cscore_main(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    meta = json.loads((out / "cscore_t5score.json").read_text())
    acc = meta["pairwise_accuracy"]
    assert meta["pairs"]["train"] > 0 and meta["pairs"]["held_out"] > 0
    assert acc["after"]["train"] > acc["before"]["train"] and acc["after"]["train"] >= 0.9
    assert meta["epoch_loss"][-1] < meta["epoch_loss"][0]
    res = cscore_main(*args, cwd=tmp_path)  # the same command: skipped
    assert res.returncode == 0 and "skipped" in res.stdout
    res = cscore_main(*args[:-1], "t5score.train.holdout=0.5", cwd=tmp_path)
    assert res.returncode == 2 and "trained with another config" in res.stderr
    run = ["run", *data_args(path), "method=baseline", "baseline=t5score", "runtime.progress=false",
           "baseline.t5score.directions=[ref_hyp,hyp_ref]", f"cache.dir={tmp_path / 'cache'}"]
    for name, model in (("base", t5_dir), ("trained", out)):
        res = cscore_main(*run, f"baseline.t5score.model={model}", f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
    base, trained = (pd.read_parquet(tmp_path / n / "scores.parquet") for n in ("base", "trained"))
    corr = [np.corrcoef(t["score.t5score_f"], t["human.q"])[0, 1] for t in (base, trained)]
    assert corr[1] > corr[0] and corr[1] > 0.8  # the trained scorer follows the human ranking


def test_the_default_recipe_is_the_papers_and_is_what_the_trainer_uses(t5_dir, tmp_path, cscore_main):
    """Adafactor (fixed lr 1e-5, no relative step / parameter scaling, weight decay 0.01 on the
    matrices), batch 32, dropout 0.05, 64 tokens: read back from the optimizer object the trainer
    stepped (meta "optimizer") and from the saved model's config."""
    out = tmp_path / "recipe"
    res = cscore_main("t5score", "train", *data_args(rated_table(tmp_path)), f"t5score.train.model={t5_dir}",
                      f"t5score.train.out={out}", "t5score.train.holdout=0.25", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    meta = json.loads((out / "cscore_t5score.json").read_text())
    assert meta["optimizer"] == {"class": "Adafactor", "lr": 1e-5, "weight_decay": 0.01, "eps": [1e-30, 1e-3],
                                 "scale_parameter": False, "relative_step": False, "warmup_init": False,
                                 "clip_threshold": 1.0}
    steps = -(-meta["pairs"]["train"] // 32)  # one epoch of batches of 32
    assert meta["schedule"] == {"name": "linear", "steps": steps, "warmup_steps": 0, "lr_after_last_step": 0.0}
    cfg = meta["config"]
    assert (cfg["batch_size"], cfg["max_length"], cfg["dropout"], cfg["optimizer"]) == (32, 64, 0.05, "adafactor")
    assert json.loads((out / "config.json").read_text())["dropout_rate"] == 0.05  # the t5_dir base has 0.0


def test_the_recipe_optimizers_are_stepped_and_lower_the_loss(t5_dir, tmp_path):
    """A short training on the tiny random T5 with either optimizer: the optimizer object given to
    the trainer holds state for every parameter (it stepped them) and the Eq. 3 loss on the
    training pairs, measured in eval mode before and after, goes down."""
    from transformers.optimization import Adafactor

    from cscore.training import t5score_job

    table = pd.read_csv(rated_table(tmp_path))
    pairs = tt.ranking_pairs(table["doc"].tolist(), table["ref"].tolist(), table["hyp"].tolist(),
                             table["q"].to_numpy(dtype=float))

    def loss_now(model, tok):
        with torch.no_grad():
            fb, fw = tt.pair_scores(model.eval(), tok, pairs, max_length=64)
        margins = torch.tensor([p.margin for p in pairs], dtype=fb.dtype)
        return float(tt.ranking_loss(fb, fw, margins, alpha=1.0).mean())

    for name, cls in (("adafactor", Adafactor), ("adamw", torch.optim.AdamW)):
        tok, model = t5score_job.load_model(t5_dir, "cpu", "auto", 0.05)
        assert model.config.dropout_rate == 0.05
        assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.05}
        opt = tt.make_optimizer(model, name, 1e-3, 0.01)
        assert type(opt) is cls and all(g["lr"] == 1e-3 for g in opt.param_groups)
        decay = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
        for n, p in model.named_parameters():  # no decay on norm weights and T5's relative attention bias
            assert decay[id(p)] == (0.0 if p.ndim < 2 or "relative_attention_bias" in n else 0.01), n
        assert 0.0 < sum(decay[id(p)] > 0 for p in model.parameters()) < len(decay)
        before = loss_now(model, tok)
        tt.train(model, tok, pairs, tt.Fit(alpha=1.0, epochs=4, batch_size=8, max_length=64, seed=0), optimizer=opt)
        assert len(opt.state) == len(list(model.parameters()))
        assert loss_now(model, tok) < before, name


def test_the_lr_follows_the_released_linear_decay_and_constant_keeps_it(t5_dir, tmp_path):
    """The lr the optimizer holds when it steps (read by a step pre-hook) is, at step k of N,
    lr·(N − k)/N (the released script's Trainer default: linear decay to 0, no warm-up), the same
    as transformers' get_linear_schedule_with_warmup on a fresh optimizer; schedule=constant keeps
    lr at every step. 13 pairs in batches of 4 over 3 epochs: N = 3·4 = 12 steps."""
    from transformers import get_linear_schedule_with_warmup

    from cscore.training import t5score_job

    table = pd.read_csv(rated_table(tmp_path, n_docs=3))
    pairs = tt.ranking_pairs(table["doc"].tolist(), table["ref"].tolist(), table["hyp"].tolist(),
                             table["q"].to_numpy(dtype=float))[:13]
    lr, epochs, batch = 2e-3, 3, 4
    n = tt.total_steps(len(pairs), batch, epochs)
    assert n == 12
    seen = {}
    for name in tt.SCHEDULES:
        tok, model = t5score_job.load_model(t5_dir, "cpu", "auto", None)
        opt = tt.make_optimizer(model, "adamw", lr, 0.01)
        seen[name] = []
        opt.register_step_pre_hook(lambda o, args, kwargs, rec=seen[name]: rec.append(o.param_groups[0]["lr"]))
        schedule = tt.make_schedule(opt, name, n)
        tt.train(model, tok, pairs, tt.Fit(alpha=1.0, epochs=epochs, batch_size=batch, max_length=64, seed=0),
                 optimizer=opt, schedule=schedule)
        assert len(seen[name]) == n
    assert seen["linear"] == pytest.approx([lr * (n - k) / n for k in range(n)], rel=1e-12, abs=0)
    reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    hf = get_linear_schedule_with_warmup(reference, num_warmup_steps=0, num_training_steps=n)
    expected = []
    for _ in range(n):
        expected.append(reference.param_groups[0]["lr"])
        reference.step()
        hf.step()
    assert seen["linear"] == pytest.approx(expected, rel=1e-12, abs=0)
    assert seen["constant"] == [lr] * n
    with pytest.raises(ValueError, match="schedule must be one of linear, constant"):
        tt.make_schedule(opt, "cosine", n)


def test_schedule_constant_is_recorded(t5_dir, tmp_path, cscore_main):
    out = tmp_path / "fixed"
    res = cscore_main("t5score", "train", *data_args(rated_table(tmp_path)), f"t5score.train.model={t5_dir}",
                      f"t5score.train.out={out}", "t5score.train.holdout=0.25", "t5score.train.schedule=constant",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    meta = json.loads((out / "cscore_t5score.json").read_text())
    assert meta["schedule"]["name"] == "constant" and meta["schedule"]["lr_after_last_step"] == 1e-5
    assert meta["optimizer"]["lr"] == 1e-5


@pytest.mark.parametrize("extra, message", [
    ([], "t5score.train.model=<seq2seq model (hub id or local directory)> is required"),
    (["t5score.train.schedule=cosine"], "t5score.train.schedule must be linear | constant"),
    (["t5score.train.alpah=1"], "no setting t5score.train.alpah (did you mean t5score.train.alpha?)"),
    (["t5score.train.condition=hypothesis"], "t5score.train.condition must be reference | source"),
    (["t5score.train.optimizer=sgd"], "t5score.train.optimizer must be adafactor | adamw"),
])
def test_config_errors(tmp_path, cscore_main, extra, message):
    res = cscore_main("t5score", "train", *data_args(rated_table(tmp_path)), *extra, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr


@pytest.mark.parametrize("extra", [["runtime.devices=[cpu,cpu]"], ["runtime.shards=2"]])
def test_sharding_is_refused_in_one_line(t5_dir, tmp_path, cscore_main, extra):
    res = cscore_main("t5score", "train", *data_args(rated_table(tmp_path)), f"t5score.train.model={t5_dir}", *extra,
                      cwd=tmp_path)
    assert res.returncode == 2 and "t5score train fine-tunes in one process" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "outputs").exists()


def test_a_missing_model_directory_is_named_in_one_line_before_the_data_loads(tmp_path, cscore_main):
    """Issue 39, item 6: the model folder is checked from its files before the data loads (here
    the data file is not valid CSV, so had the data loaded first its error would be the one line)."""
    broken = tmp_path / "broken.csv"
    broken.write_text('src,hyp,q\n"a,b\n')  # an unterminated quote
    args = [a if not a.startswith("data.path=") else f"data.path={broken}" for a in data_args(rated_table(tmp_path))]
    res = cscore_main("t5score", "train", *args, "t5score.train.model=/nonexistent/t5", cwd=tmp_path)
    assert res.returncode == 2  # a config mistake (docs/concepts.md, Exit codes)
    assert res.stderr.strip().splitlines() == [
        "cscore: error: t5score.train.model=/nonexistent/t5: local directory not found: /nonexistent/t5 (give a "
        "local model directory, a hub id such as Qwen/Qwen2.5-3B-Instruct, or a gguf: spec)"]
    res = cscore_main("t5score", "train", *args, "t5score.train.model=gguf:smollm2", cwd=tmp_path)
    assert res.returncode == 2 and "T5Score trains a seq2seq model" in res.stderr


def test_one_document_is_refused_in_t5scores_words(t5_dir, tmp_path, cscore_main):
    """T5Score makes no negatives: a table of one document is refused as rated rows of one group."""
    res = cscore_main("t5score", "train", *data_args(rated_table(tmp_path, n_docs=1)), f"t5score.train.model={t5_dir}",
                      f"t5score.train.out={tmp_path / 'out'}", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "cscore: error: the rated rows come from 1 group(s); a group-held-out split needs at least 2 (give data "
        "with more documents / source segments)")
    assert "negatives" not in res.stderr and not (tmp_path / "out" / "cscore_t5score.json").exists()


def test_reference_based_training_needs_references(t5_dir, tmp_path, cscore_main):
    path = tmp_path / "noref.csv"
    pd.DataFrame({"src": ["a b", "a b", "c d", "c d"], "hyp": ["x", "y", "z", "w"], "q": [1, 2, 1, 2]}).to_csv(
        path, index=False
    )
    res = cscore_main("t5score", "train", "data=table", f"data.path={path}", "data.task=summarization",
                      "data.columns.source=src", "data.columns.hypothesis=hyp", "data.columns.human=q",
                      f"t5score.train.model={t5_dir}", cwd=tmp_path)
    assert res.returncode == 2 and "has no reference texts" in res.stderr
