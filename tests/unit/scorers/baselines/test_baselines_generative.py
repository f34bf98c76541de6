"""method=baseline, generative family: BARTScore and T5Score through cscore's seq2seq statistics
engine, on tiny random BART and T5 models built here (nothing downloaded), against a direct float64
teacher-forcing computation with the model's own forward pass; every direction, the F-score,
several references (mean / max), the statistics cache, truncation, errors and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import cscore
from cscore.errors import ConfigError
from cscore.scorers import baselines
from cscore.scorers.baselines import BaselineRun, Texts
from cscore.scorers.engine.pass_options import PassOptions
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.store.cache import StatsCache
from cscore.tests.support.models import sharpen, train_bpe

CONF = Path(cscore.__file__).parent / "conf"
PAD, BOS, EOS, UNK = 0, 1, 2, 3
CORPUS = ["The mayor opened a new bridge over the river on Monday.", "The council said the bridge cost five million.",
          "Researchers found that the new vaccine protects most patients.", "The team won the final match late."] * 10
SOURCES = ["The mayor opened a new bridge over the river on Monday. The council said it cost five million.",
           "Researchers found that the new vaccine protects most patients.",
           "The team won the final match after a late goal."]
HYPS = ["A bridge was opened by the mayor.", "A vaccine protects patients.", "The team lost."]
REFS = [["The mayor opened a bridge.", "A new bridge opened on Monday."], ["The vaccine works."],
        ["A late goal won the match.", "The team won.", "Late goal, final won."]]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def build_tokenizer(style: str):
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = train_bpe(CORPUS, 300)
    single = "$A </s>" if style == "t5" else "<s> $A </s>"
    tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=[("<s>", BOS), ("</s>", EOS)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<s>")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    from transformers import BartConfig, BartForConditionalGeneration, T5Config, T5ForConditionalGeneration

    root = tmp_path_factory.mktemp("s2s")
    out = {}
    for name, style in (("t5", "t5"), ("bart", "bart")):
        tok = build_tokenizer(style)
        torch.manual_seed(1)
        if name == "t5":
            model = T5ForConditionalGeneration(T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                        num_heads=4, dropout_rate=0.0, pad_token_id=PAD,
                                                        eos_token_id=EOS, decoder_start_token_id=PAD))
        else:
            model = BartForConditionalGeneration(BartConfig(
                vocab_size=len(tok), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=256,
                dropout=0.0, attention_dropout=0.0, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS,
                decoder_start_token_id=EOS, forced_eos_token_id=EOS))
            sharpen(model)
            with torch.no_grad():
                model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias))
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out


def direct(path: str, pairs: list[tuple[str, str]]) -> np.ndarray:
    """(1/|b|) log p(b | a) in float64 with the model's own forward (labels = b as the tokenizer
    writes it, EOS included; the model shifts them right itself), one pair at a time."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=torch.float64).eval()
    out = []
    for a, b in pairs:
        enc = tok(a, return_tensors="pt")
        labels = tok(b, return_tensors="pt")["input_ids"]
        assert labels[0, -1].item() == EOS
        with torch.no_grad():
            logits = model(**enc, labels=labels).logits[0]
        lp = torch.log_softmax(logits, dim=-1).gather(1, labels[0][:, None])[:, 0]
        out.append(lp.mean().item())
    return np.array(out)


def params(name: str, **over):
    return baselines.check_params(name, {**yaml.safe_load((CONF / "baseline" / f"{name}.yaml").read_text()), **over})


def runtime(tmp_path=None, **over) -> BaselineRun:
    options = PassOptions(**{"device": "cpu", "dtype": "float64", "max_length": 1024, "token_budget": 4096, **over})
    return BaselineRun(options, cache=StatsCache(tmp_path / "cache") if tmp_path is not None else None)


TEXTS = Texts(HYPS, SOURCES, REFS, [None] * 3)


@pytest.mark.parametrize("name, model", [("bartscore", "bart"), ("t5score", "t5")])
def test_every_direction_and_f_equal_direct_float64_teacher_forcing(dirs, name, model):
    p = params(name, model=dirs[model], directions=["src_hyp", "hyp_src", "ref_hyp", "hyp_ref"])
    res = baselines.score(name, p, TEXTS, runtime())
    assert list(res.columns) == [name, f"{name}_src_r", f"{name}_src_f", f"{name}_p", f"{name}_r", f"{name}_f"]
    sh = direct(dirs[model], list(zip(SOURCES, HYPS)))
    hs = direct(dirs[model], list(zip(HYPS, SOURCES)))
    # float64 on both sides (runtime() sets dtype=float64; `direct` runs the float64 model), except
    # the layer norms' variance, which transformers reduces in float32: the bound scales with the value
    np.testing.assert_allclose(res.columns[name], sh, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.columns[f"{name}_src_r"], hs, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.columns[f"{name}_src_f"], (sh + hs) / 2, rtol=1e-9, atol=1e-9)
    for i, (h, refs) in enumerate(zip(HYPS, REFS)):
        pr = direct(dirs[model], [(r, h) for r in refs])
        rc = direct(dirs[model], [(h, r) for r in refs])
        assert res.columns[f"{name}_p"][i] == pytest.approx(pr.mean(), abs=1e-9)  # multi_ref: mean
        assert res.columns[f"{name}_r"][i] == pytest.approx(rc.mean(), abs=1e-9)
        assert res.columns[f"{name}_f"][i] == pytest.approx(((pr + rc) / 2).mean(), abs=1e-9)
    assert len(set(np.round(res.columns[name], 6))) == 3  # the random model does tell the rows apart
    assert set(res.reports) == {f"{name}:{d}" for d in ("src_hyp", "hyp_src", "ref_hyp", "hyp_ref")}


def test_max_over_references_and_the_first_reference_only(dirs):
    res = baselines.score("bartscore", params("bartscore", model=dirs["bart"], multi_ref="max"), TEXTS, runtime())
    res1 = baselines.score("bartscore", params("bartscore", model=dirs["bart"], references="first",
                                               directions=["ref_hyp", "hyp_ref"]), TEXTS, runtime())
    assert list(res1.columns) == ["bartscore_p", "bartscore_r", "bartscore_f"]
    for i, (h, refs) in enumerate(zip(HYPS, REFS)):
        pr, rc = direct(dirs["bart"], [(r, h) for r in refs]), direct(dirs["bart"], [(h, r) for r in refs])
        assert res.columns["bartscore_p"][i] == pytest.approx(pr.max(), abs=1e-9)
        assert res.columns["bartscore_f"][i] == pytest.approx(((pr + rc) / 2).max(), abs=1e-9)  # F per reference
        assert res1.columns["bartscore_f"][i] == pytest.approx((pr[0] + rc[0]) / 2, abs=1e-9)


def test_float32_is_within_float32_rounding_of_float64(dirs):
    p = params("t5score", model=dirs["t5"])
    a = baselines.score("t5score", p, TEXTS, runtime(dtype="float32"))
    b = baselines.score("t5score", p, TEXTS, runtime())
    for col in a.columns:  # float32 rounding scales with the log-probabilities averaged (conftest's f32 bound)
        ref = np.asarray(b.columns[col])
        tol = 128 * np.finfo(np.float32).eps * (np.abs(ref) + np.abs(ref).mean())
        np.testing.assert_array_less(np.abs(np.asarray(a.columns[col]) - ref), tol)


def test_the_statistics_cache_serves_a_second_run_and_a_multi_ref_sweep(dirs, tmp_path):
    p = params("bartscore", model=dirs["bart"])
    first = baselines.score("bartscore", p, TEXTS, runtime(tmp_path))
    assert not any(r.cached for r in first.reports.values())
    again = baselines.score("bartscore", params("bartscore", model=dirs["bart"], multi_ref="max"), TEXTS,
                            runtime(tmp_path))
    assert all(r.cached for r in again.reports.values())
    np.testing.assert_array_equal(again.columns["bartscore"], first.columns["bartscore"])
    same = baselines.score("bartscore", p, TEXTS, runtime(tmp_path))
    for col in first.columns:
        np.testing.assert_array_equal(same.columns[col], first.columns[col])


def test_rows_without_references_are_nan_and_counted(dirs):
    t = Texts(HYPS, SOURCES, [REFS[0], [], REFS[2]], [None] * 3)
    res = baselines.score("bartscore", params("bartscore", model=dirs["bart"]), t, runtime())
    assert np.isfinite(res.columns["bartscore"]).all()  # src -> hyp needs no reference
    assert np.isnan(res.columns["bartscore_f"][1]) and np.isfinite(res.columns["bartscore_f"][[0, 2]]).all()
    assert res.info["missing_reference"] == [1]
    src_only = baselines.score("bartscore", params("bartscore", model=dirs["bart"], directions=["src_hyp"]),
                               Texts(HYPS, SOURCES, [[], [], []], [None] * 3), runtime())
    assert list(src_only.columns) == ["bartscore"]
    with pytest.raises(InputError, match="baseline bartscore compares the hypothesis with a reference"):
        baselines.score("bartscore", params("bartscore", model=dirs["bart"]), Texts(HYPS, SOURCES, [[], [], []],
                                                                                    [None] * 3), runtime())


def test_long_sources_are_cut_and_counted_and_long_targets_are_a_clear_error(dirs):
    p = params("bartscore", model=dirs["bart"], directions=["src_hyp"])
    res = baselines.score("bartscore", p, TEXTS, runtime(max_length=40))  # sources of 52, 38, 34 tokens
    assert res.truncated.tolist() == [True, False, False] and res.info["truncated_sources"] == 1
    from transformers import AutoTokenizer

    tok, words = AutoTokenizer.from_pretrained(dirs["bart"]), SOURCES[0].split(" ")
    kept = max(
        (" ".join(words[:k]) for k in range(1, len(words))), key=lambda t: (len(tok(t)["input_ids"]) <= 40, len(t))
    )
    assert len(tok(kept)["input_ids"]) <= 40 < len(tok(kept + " " + words[len(kept.split(" "))])["input_ids"])
    cut = direct(dirs["bart"], [(kept, HYPS[0])])
    assert res.columns["bartscore"][0] == pytest.approx(cut[0], abs=1e-9)  # the most words that fit 40 tokens
    with pytest.raises(InputError, match=r"baseline bartscore \(hyp_src\): .*never truncated.*\(row 0\)"):
        baselines.score("bartscore", params("bartscore", model=dirs["bart"], directions=["hyp_src"]), TEXTS,
                        runtime(max_length=30))


def test_model_errors(dirs, tiny_dirs):
    with pytest.raises(ConfigError, match="baseline.t5score.model: give the encoder-decoder model"):
        params("t5score")
    with pytest.raises(ConfigError, match="is a decoder-only model"):
        baselines.score("bartscore", params("bartscore", model=str(tiny_dirs.expert)), TEXTS, runtime())
    with pytest.raises(ConfigError, match="baseline.bartscore.directions must be a list of"):
        params("bartscore", directions=["src_ref"])


def test_cli_run_bartscore_and_t5score_then_report(dirs, tmp_path, cscore_main):
    path = tmp_path / "r.csv"
    pd.DataFrame({"src": SOURCES, "hyp": HYPS, "ref": [r[0] for r in REFS], "q": [3, 2, 1]}).to_csv(path, index=False)
    args = ["data=table", f"data.path={path}", "data.task=summarization", "data.columns.source=src",
            "data.columns.hypothesis=hyp", "data.columns.reference=ref", "data.columns.human=q", "method=baseline",
            "baseline=[bartscore,t5score]", f"baseline.bartscore.model={dirs['bart']}",
            f"baseline.t5score.model={dirs['t5']}", "runtime.dtype=float64", f"cache.dir={tmp_path / 'cache'}"]
    res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / 'sw' / 'a'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Loading weights" not in res.stderr  # transformers' per-model bars are noise in logs, as in any run
    scores = pd.read_parquet(tmp_path / "sw" / "a" / "scores.parquet")
    assert [c for c in scores.columns if c.startswith("score.")] == [
        "score.bartscore", "score.bartscore_p", "score.bartscore_r", "score.bartscore_f",
        "score.t5score", "score.t5score_p", "score.t5score_r", "score.t5score_f"]
    np.testing.assert_allclose(scores["score.t5score"], direct(dirs["t5"], list(zip(SOURCES, HYPS))), atol=1e-9)
    metrics = json.loads((tmp_path / "sw" / "a" / "metrics.json").read_text())
    assert set(metrics["speed"]["passes"]) == {f"{n}:{d}" for n in ("bartscore", "t5score")
                                               for d in ("src_hyp", "ref_hyp", "hyp_ref")}
    assert metrics["baselines"]["t5score"]["signature"].startswith(f"t5score|model:{dirs['t5']}|dirs:src_hyp,ref_hyp")
    res = cscore_main("run", *args, "baseline.bartscore.multi_ref=max", "runtime.progress=false",
                      f"hydra.run.dir={tmp_path / 'sw' / 'b'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    metrics = json.loads((tmp_path / "sw" / "b" / "metrics.json").read_text())
    assert all(p["from_cache"] for p in metrics["speed"]["passes"].values())  # a sweep point runs no model
    res = cscore_main("report", str(tmp_path / "sw"), "--bootstrap", "20", "--permutations", "20", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    long = pd.read_csv(next((tmp_path / "sw" / "report").glob("*_quality_long.csv")))
    assert {"bartscore_p multi_ref=mean", "bartscore_p multi_ref=max", "t5score_f"} <= set(long["label"])
