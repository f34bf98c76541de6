"""method=baseline, lexical family: sentence BLEU and chrF (sacrebleu) and ROUGE (rouge-score),
checked against independent implementations written here from the metrics' definitions, which in
turn reproduce the libraries' own documented corpus example (sacrebleu's README: BLEU 48.53,
chrF2 59.73); several references per row; missing references; config checks; the CLI run and a
report with baseline rows beside a model pair's rows."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import cscore
from cscore.errors import ConfigError
from cscore.scorers import baselines
from cscore.scorers.baselines import BaselineRun, Texts
from cscore.scorers.baselines.lexical import import_rouge
from cscore.scorers.engine.tokenize import InputError

RUN = BaselineRun()  # how these families run: no pass options, ids or cache read

CONF = Path(cscore.__file__).parent / "conf"

# sacrebleu's README example (two reference sets, three segments)
REFS = [["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
        ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."]]
SYS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
ROW_REFS = [list(r) for r in zip(*REFS)]  # per segment: its two references


def defaults(name: str) -> dict:
    return yaml.safe_load((CONF / "baseline" / f"{name}.yaml").read_text())


def texts(hyps, refs, langs=None) -> Texts:
    return Texts(list(hyps), ["a source text"] * len(hyps), [list(r) for r in refs], langs or [None] * len(hyps))


def run(name, hyps, refs, **over):
    params = baselines.check_params(name, {**defaults(name), **over})
    return baselines.score(name, params, texts(hyps, refs), RUN)


# --- BLEU: an independent implementation ------------------------------------------------------


def tok13a(s: str) -> list[str]:
    """mteval-13a on these sentences: their only punctuation is a sentence-final period, split off."""
    assert not re.search(r"[^A-Za-z' .]", s)
    return s.replace(".", " .").split()


def bleu_stats(hyp: str, refs: list[str], order: int = 4):
    h = tok13a(hyp)
    rs = [tok13a(r) for r in refs]
    correct, total = [], []
    for n in range(1, order + 1):
        hc = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
        most = Counter()
        for r in rs:
            for g, c in Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1)).items():
                most[g] = max(most[g], c)
        correct.append(sum(min(c, most[g]) for g, c in hc.items()))
        total.append(max(len(h) - n + 1, 0))
    ref_len = min((abs(len(r) - len(h)), len(r)) for r in rs)[1]  # the closest reference (ties: the shorter)
    return np.array(correct), np.array(total), len(h), ref_len


def bleu_from(correct, total, hyp_len, ref_len, effective: bool) -> float:
    """BLEU with sacrebleu's 'exp' smoothing: the k-th zero-match order gets precision 1 / (2^k total)."""
    logs, k, used = [], 1.0, 0
    for n in range(len(correct)):
        if total[n] == 0:
            break
        used = n + 1
        if correct[n] == 0:
            k *= 2
            logs.append(math.log(1.0 / (k * total[n])))
        else:
            logs.append(math.log(correct[n] / total[n]))
    orders = used if effective else len(correct)
    if len(logs) < orders:
        return 0.0
    bp = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(sum(logs[:orders]) / orders)


def test_independent_bleu_reproduces_sacrebleus_documented_corpus_example():
    stats = [bleu_stats(h, r) for h, r in zip(SYS, ROW_REFS)]
    correct, total = sum(s[0] for s in stats), sum(s[1] for s in stats)
    got = bleu_from(correct, total, sum(s[2] for s in stats), sum(s[3] for s in stats), effective=False)
    assert round(got, 2) == 48.53  # sacrebleu README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943)


def test_sentence_bleu_with_two_references_equals_the_independent_computation():
    res = run("bleu", SYS, ROW_REFS)
    want = [bleu_from(*bleu_stats(h, r), effective=True) for h, r in zip(SYS, ROW_REFS)]
    np.testing.assert_allclose(res.columns["bleu"], want, rtol=1e-12, atol=1e-12)
    assert res.columns["bleu"][0] == pytest.approx(100.0)  # identical to a reference
    one = run("bleu", SYS, ROW_REFS, references="first").columns["bleu"]
    np.testing.assert_allclose(one, [bleu_from(*bleu_stats(h, r[:1]), effective=True) for h, r in zip(SYS, ROW_REFS)])
    assert not np.allclose(one, res.columns["bleu"])  # the second reference counts
    assert res.info["signature"].startswith("nrefs:2|case:mixed|eff:yes|tok:13a|smooth:exp|version:")


# --- chrF: an independent implementation ------------------------------------------------------


def char_stats(hyp: str, ref: str, order: int = 6) -> list[int]:
    h, r = "".join(hyp.split()), "".join(ref.split())
    out = []
    for n in range(1, order + 1):
        hc = Counter(h[i:i + n] for i in range(len(h) - n + 1))
        rc = Counter(r[i:i + n] for i in range(len(r) - n + 1))
        out += [sum(hc.values()), sum(rc.values()), sum((hc & rc).values())]
    return out


def chrf_from(stats, beta: float = 2.0) -> float:
    """Average precision and recall over the orders both texts have, then F-beta (x100)."""
    ps, rs = [], []
    for n in range(len(stats) // 3):
        nh, nr, m = stats[3 * n:3 * n + 3]
        if nh > 0 and nr > 0:
            ps.append(m / nh)
            rs.append(m / nr)
    if not ps:
        return 0.0
    p, r = sum(ps) / len(ps), sum(rs) / len(rs)
    return 100 * (1 + beta ** 2) * p * r / (beta ** 2 * p + r) if p + r else 0.0


def best_chrf_stats(hyp: str, refs: list[str]):
    """Several references: the statistics of the best-scoring one."""
    return max((char_stats(hyp, r) for r in refs), key=chrf_from)


def test_independent_chrf_reproduces_sacrebleus_documented_corpus_example():
    total = np.sum([best_chrf_stats(h, r) for h, r in zip(SYS, ROW_REFS)], axis=0)
    assert round(chrf_from(list(total)), 2) == 59.73  # sacrebleu README: chrF2 = 59.73


def test_sentence_chrf_equals_the_independent_computation():
    res = run("chrf", SYS, ROW_REFS)
    want = [chrf_from(best_chrf_stats(h, r)) for h, r in zip(SYS, ROW_REFS)]
    np.testing.assert_allclose(res.columns["chrf"], want, rtol=1e-12)
    assert res.info["signature"].startswith("nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")


# --- ROUGE: an independent implementation -----------------------------------------------------


def rtok(s: str) -> list[str]:
    """rouge-score's default tokenizer without stemming: lowercase, runs of [a-z0-9]."""
    return re.findall(r"[a-z0-9]+", s.lower())


def prf(match: int, n_hyp: int, n_ref: int) -> tuple[float, float, float]:
    p, r = (match / n_hyp if n_hyp else 0.0), (match / n_ref if n_ref else 0.0)
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def rouge_n(hyp, ref, n):
    hc = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
    rc = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
    return prf(sum((hc & rc).values()), sum(hc.values()), sum(rc.values()))


def lcs(a, b) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge_ref(hyp: str, refs: list[str]) -> dict[str, tuple]:
    h = rtok(hyp)
    out = {}
    for t in ("rouge1", "rouge2", "rougeL"):
        cands = [rouge_n(h, rtok(r), int(t[-1])) if t != "rougeL" else prf(lcs(h, rtok(r)), len(h), len(rtok(r)))
                 for r in refs]
        out[t] = max(cands, key=lambda s: s[2])  # several references: the best F
    return out


def test_rouge_of_rouge_scores_readme_pair_equals_the_independent_computation():
    hyp, ref = "The quick brown dog jumps on the log.", "The quick brown fox jumps over the lazy dog"
    want = rouge_ref(hyp, [ref])
    assert want["rouge1"][:2] == (0.75, 6 / 9) and want["rougeL"][:2] == (0.625, 5 / 9)
    for measure, k in (("fmeasure", 2), ("precision", 0), ("recall", 1)):
        res = run("rouge", [hyp], [[ref]], use_stemmer=False, measure=measure)
        for t in ("rouge1", "rouge2", "rougeL"):
            assert res.columns[t][0] == pytest.approx(want[t][k], abs=1e-12), (t, measure)


def test_rouge_with_several_references_takes_the_best_f_per_type():
    res = run("rouge", SYS, ROW_REFS, use_stemmer=False)
    for i, (h, r) in enumerate(zip(SYS, ROW_REFS)):
        want = rouge_ref(h, r)
        for t in ("rouge1", "rouge2", "rougeL"):
            assert res.columns[t][i] == pytest.approx(want[t][2], abs=1e-12)
    assert set(res.columns) == {"rouge1", "rouge2", "rougeL"}
    stemmed = run("rouge", ["The dogs were biting"], [["the dog bites"]]).columns["rouge1"][0]
    plain = run("rouge", ["The dogs were biting"], [["the dog bites"]], use_stemmer=False).columns["rouge1"][0]
    assert (plain, stemmed) == (pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3)),
                                pytest.approx(2 * (3 / 4) * (3 / 3) / (3 / 4 + 1)))  # dog(s), bite(s/ing) match


def test_rouge_types_choose_the_columns():
    res = run("rouge", SYS, ROW_REFS, types=["rouge2", "rougeLsum"])
    assert list(res.columns) == ["rouge2", "rougeLsum"]
    assert baselines.columns("rouge", baselines.check_params("rouge", {**defaults("rouge"), "types": ["rouge3"]})) == [
        "rouge3"]


# --- references, errors ------------------------------------------------------------------------


def test_rows_without_a_reference_are_nan_and_counted_and_no_reference_at_all_is_an_error():
    res = run("bleu", SYS, [ROW_REFS[0], [], ["", "  "]])
    assert np.isfinite(res.columns["bleu"][0]) and np.isnan(res.columns["bleu"][1:]).all()
    assert res.info["missing_reference"] == [1, 2]
    for name in ("bleu", "chrf", "rouge"):
        with pytest.raises(InputError, match=f"baseline {name} compares the hypothesis with a reference"):
            run(name, SYS, [[], [], []])


def test_rouge_leaves_texts_it_cannot_tokenize_nan_and_counts_them():
    res = run(
        "rouge",
        ["我们今天去了公园。", "We went to the park.", "We went."],
        [["我们今天去公园了。"], ["We went to a park."], ["。。。"]],
    )
    assert np.isnan(res.columns["rouge1"][[0, 2]]).all() and res.columns["rouge1"][1] == pytest.approx(0.8)
    assert res.info["untokenized"] == [0, 2]


def test_bleu_follows_the_target_language_and_says_so_per_language():
    t = Texts(["我们今天去了公园。", "We went to the park today."], ["x", "y"],
              [["我们今天去公园了。"], ["Today we went to the park."]], ["zh", "en"])
    res = baselines.score("bleu", baselines.check_params("bleu", defaults("bleu")), t, RUN)
    assert "tok:zh" in res.info["signature"]["zh"] and "tok:13a" in res.info["signature"]["en"]
    assert res.columns["bleu"][0] > 0  # zh tokenization splits characters: n-grams match


@pytest.mark.parametrize("over, message", [
    ({"smooth_method": "bogus"}, "baseline.bleu.smooth_method must be none | floor | add-k | exp"),
    ({"max_ngram_order": 0}, "baseline.bleu.max_ngram_order must be an integer >= 1"),
    ({"references": "some"}, "baseline.bleu.references must be all | first"),
    ({"tokenise": "13a"}, "no setting baseline.bleu.tokenise (did you mean baseline.bleu.tokenize?)"),
])
def test_bad_settings_are_one_line_config_errors(over, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        baselines.check_params("bleu", {**defaults("bleu"), **over})


def test_bad_rouge_types_and_unknown_baselines():
    with pytest.raises(ConfigError, match="baseline.rouge.types must be a list of"):
        baselines.check_params("rouge", {**defaults("rouge"), "types": ["rouge0"]})
    with pytest.raises(ConfigError, match="lists an item twice"):
        baselines.check_params("rouge", {**defaults("rouge"), "types": ["rouge1", "rouge1"]})
    with pytest.raises(ConfigError, match=r"unknown baseline 'blue' \(did you mean bleu\?\)"):
        baselines.check_config("baseline", {"blue": {}})
    with pytest.raises(ConfigError, match="method=baseline needs baseline=<name>"):
        baselines.check_config("baseline", None)
    with pytest.raises(ConfigError, match="baseline=bleu is for method=baseline"):
        baselines.check_config("contrast", {"bleu": defaults("bleu")})
    with pytest.raises(ConfigError, match="sacrebleu refused the settings"):
        run("bleu", SYS, ROW_REFS, tokenize="no-such-tokenizer")


# --- the CLI ------------------------------------------------------------------------------------


def table_file(tmp_path: Path) -> Path:
    rows = [{"src": f"Source text number {i}.", "hyp": h, "ref": r, "q": q}
            for i, (h, r, q) in enumerate([(SYS[0], REFS[0][0], 5), (SYS[1], REFS[0][1], 3), (SYS[2], REFS[0][2], 2),
                                           ("A dog and a man.", "The dog bit the man.", 1),
                                           ("Nobody was surprised at all.", "", 4)])]
    path = tmp_path / "ratings.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def table_args(path: Path) -> list[str]:
    return ["data=table", f"data.path={path}", "data.task=summarization", "data.columns.source=src",
            "data.columns.hypothesis=hyp", "data.columns.reference=ref", "data.columns.human=q",
            "method=baseline", "runtime.progress=false"]


def test_cli_run_writes_score_columns_signatures_and_counts_missing_references(tmp_path, cscore_main):
    path = table_file(tmp_path)
    res = cscore_main("run", *table_args(path), "baseline=[bleu,chrf,rouge]", f"hydra.run.dir={tmp_path / 'run'}",
                      cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    scores = pd.read_parquet(tmp_path / "run" / "scores.parquet")
    cols = [c for c in scores.columns if c.startswith("score.")]
    assert cols == ["score.bleu", "score.chrf", "score.rouge1", "score.rouge2", "score.rougeL"]
    want = [bleu_from(*bleu_stats(h, [r]), effective=True) for h, r in zip(SYS, REFS[0])]
    np.testing.assert_allclose(scores["score.bleu"][:3], want, rtol=1e-12)
    assert scores["score.bleu"].isna().tolist() == [False] * 4 + [True]  # the row with an empty reference
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["baselines"]["bleu"]["missing_reference"] == {"count": 1, "ids": ["row5"]}
    assert metrics["baselines"]["bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:yes|tok:13a")
    assert metrics["nonfinite_scores"]["score.bleu"] == 1
    assert "|pair:none|method:baseline|" in metrics["signature"]  # a baseline run reads no model pair
    assert [v["name"] for v in metrics["variants"]] == ["bleu", "chrf", "rouge1", "rouge2", "rougeL"]
    assert {c["metric"] for c in metrics["correlations"]} == {"bleu", "chrf", "rouge1", "rouge2", "rougeL"}


def test_cli_config_errors_stop_before_anything_runs(tmp_path, cscore_main):
    path = table_file(tmp_path)
    res = cscore_main("run", *table_args(path), cwd=tmp_path)
    assert res.returncode != 0 and "method=baseline needs baseline=<name>" in res.stderr
    res = cscore_main("run", *table_args(path), "baseline=bleu", "baseline.bleu.smooth_method=nope", cwd=tmp_path)
    assert res.returncode != 0 and "baseline.bleu.smooth_method must be" in res.stderr
    res = cscore_main("run", *table_args(path), "baseline=blue", cwd=tmp_path)
    assert res.returncode != 0 and "blue" in res.stderr and "bleu" in res.stderr
    assert not (tmp_path / "outputs").exists()


def test_cli_data_without_references_is_a_one_line_error(tmp_path, cscore_main):
    path = tmp_path / "noref.csv"
    pd.DataFrame({"src": ["a b c", "d e f"], "hyp": ["a b", "d e"], "q": [1, 2]}).to_csv(path, index=False)
    args = ["data=table", f"data.path={path}", "data.task=summarization", "data.columns.source=src",
            "data.columns.hypothesis=hyp", "data.columns.human=q", "method=baseline", "baseline=chrf"]
    res = cscore_main("run", *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("cscore: error: baseline chrf compares the hypothesis")
    assert not (tmp_path / "run").exists()  # it failed before scoring: no run directory is left


@pytest.mark.slow
def test_report_shows_baseline_rows_beside_a_model_pairs_rows(tmp_path, tiny_dirs, cscore_main):
    path = table_file(tmp_path)
    sweep = tmp_path / "sweep"
    res = cscore_main("run", *table_args(path), "baseline=[bleu,rouge]", f"hydra.run.dir={sweep / 'b'}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pair = [f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny"]
    args = [a for a in table_args(path) if a != "method=baseline"]
    res = cscore_main("run", *args, *pair, "method=contrast", f"hydra.run.dir={sweep / 'c'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    res = cscore_main("report", str(sweep), "--bootstrap", "50", "--permutations", "50", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    long = pd.read_csv(next((sweep / "report").glob("*_quality_long.csv")))
    assert {"bleu", "rouge1", "rouge2", "rougeL", "tiny contrast", "tiny expert"} <= set(long["label"])
    assert long["rank"].notna().all()  # one significance clustering over all rows


# --- the paper-baseline switches (scripts/paper_baselines.py) against the libraries called directly ---


def shared_rows(shared, data: str, n: int = 4):
    """The first ``n`` rows of a shared dataset as cscore loads them, as the baseline kind gives them."""
    from cscore.data import qags_xsum, summeval

    frame, _ = {"summeval": summeval, "qags_xsum": qags_xsum}[data].load(str(shared / data / (
        "summeval.jsonl" if data == "summeval" else "mturk_xsum.jsonl")))
    frame = frame.head(n)
    refs = [list(r) if r is not None else [] for r in frame.get("references", [None] * n)]
    return Texts(frame["hypothesis"].tolist(), frame["source"].tolist(), refs, [None] * n)


def test_rouge_bleu_chrf_on_summeval_rows_equal_the_libraries_called_directly(shared):
    from sacrebleu import sentence_bleu, sentence_chrf

    # rouge-score itself, imported as cscore imports it: absl's log handler must not keep this
    # test's captured stderr (a later in-process run's logging set-up would close it under pytest)
    rouge_scorer, _ = import_rouge()

    t = shared_rows(shared, "summeval")
    assert all(len(r) == 11 for r in t.references)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)

    def ours(name, **over):
        return baselines.score(name, baselines.check_params(name, {**defaults(name), **over}), t, RUN).columns

    cases = {  # (overrides, per-row value of one type and measure from rouge-score)
        "best F": ({}, lambda h, refs, s, typ: getattr(s.score_multi(refs, h)[typ], "fmeasure")),
        "first, recall": ({"references": "first", "measure": "recall"},
                          lambda h, refs, s, typ: s.score(refs[0], h)[typ].recall),
        "mean, F": ({"multi": "mean"}, lambda h, refs, s, typ: np.mean([s.score(r, h)[typ].fmeasure for r in refs])),
        "mean, precision": ({"multi": "mean", "measure": "precision"},
                            lambda h, refs, s, typ: np.mean([s.score(r, h)[typ].precision for r in refs])),
    }
    for label, (over, direct) in cases.items():
        got = ours("rouge", **over)
        for typ in ("rouge1", "rouge2", "rougeL"):
            want = [direct(h, refs, scorer, typ) for h, refs in zip(t.hypotheses, t.references)]
            np.testing.assert_allclose(got[typ], want, rtol=1e-12, err_msg=f"{label} {typ}")
    assert not np.allclose(ours("rouge", multi="mean")["rouge1"], ours("rouge")["rouge1"])  # the switch matters
    np.testing.assert_allclose(ours("bleu")["bleu"], [sentence_bleu(h, r).score for h, r in zip(t.hypotheses,
                                                                                                 t.references)])
    np.testing.assert_allclose(ours("chrf")["chrf"], [sentence_chrf(h, r).score for h, r in zip(t.hypotheses,
                                                                                                 t.references)])
    np.testing.assert_allclose(ours("bleu", references="first")["bleu"],
                               [sentence_bleu(h, r[:1]).score for h, r in zip(t.hypotheses, t.references)])


def test_against_source_scores_qags_xsum_rows_with_the_article(shared):
    """QAGS-XSum has no reference: against=source compares each summary with its article."""
    from sacrebleu import sentence_bleu, sentence_chrf

    # rouge-score itself, imported as cscore imports it: absl's log handler must not keep this
    # test's captured stderr (a later in-process run's logging set-up would close it under pytest)
    rouge_scorer, _ = import_rouge()

    t = shared_rows(shared, "qags_xsum")
    assert not any(t.references)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for measure in ("fmeasure", "recall"):
        params = baselines.check_params("rouge", {**defaults("rouge"), "against": "source", "measure": measure})
        res = baselines.score("rouge", params, t, RUN)
        assert "|against:source|" in res.info["signature"]
        for typ in ("rouge1", "rouge2", "rougeL"):
            want = [getattr(scorer.score(s, h)[typ], measure) for h, s in zip(t.hypotheses, t.sources)]
            np.testing.assert_allclose(res.columns[typ], want, rtol=1e-12)
    for name, direct in (("bleu", sentence_bleu), ("chrf", sentence_chrf)):
        res = baselines.score(name, baselines.check_params(name, {**defaults(name), "against": "source"}), t, RUN)
        np.testing.assert_allclose(res.columns[name], [direct(h, [s]).score for h, s in zip(t.hypotheses, t.sources)])
        assert res.info["signature"].endswith("|against:source")
    with pytest.raises(InputError, match="compares the hypothesis with a reference"):  # the default: none here
        baselines.score("rouge", baselines.check_params("rouge", defaults("rouge")), t, RUN)


def test_rouge_mean_over_references_equals_the_independent_computation():
    res = run("rouge", SYS, ROW_REFS, use_stemmer=False, multi="mean", measure="recall")
    for i, (h, refs) in enumerate(zip(SYS, ROW_REFS)):
        for t in ("rouge1", "rouge2", "rougeL"):
            want = np.mean([rouge_ref(h, [r])[t][1] for r in refs])
            assert res.columns[t][i] == pytest.approx(want, abs=1e-12)
    with pytest.raises(ConfigError, match=re.escape("baseline.rouge.multi must be best | mean")):
        baselines.check_params("rouge", {**defaults("rouge"), "multi": "max"})
    with pytest.raises(ConfigError, match=re.escape("baseline.chrf.against must be reference | source")):
        baselines.check_params("chrf", {**defaults("chrf"), "against": "article"})


def test_baselines_are_registered_classes_with_typed_settings():
    """Each baseline is a Baseline class under its name, its settings a dataclass checked once into
    typed values (an int where the YAML wrote 4.0), in the order conf/baseline/<name>.yaml gives."""
    from dataclasses import fields

    assert list(baselines.BASELINES) == ["bleu", "chrf", "rouge", "bertscore", "bartscore", "t5score", "external"]
    for name in baselines.BASELINES:
        assert [f.name for f in fields(baselines.BASELINES.get(name).Params)] == list(defaults(name)), name
        own = baselines.BASELINES.get(name).score.__func__  # type: ignore[attr-defined]
        assert own is not baselines.Baseline.score.__func__, f"{name}: no score()"  # the base's raises
    p = baselines.check_params("bleu", {**defaults("bleu"), "max_ngram_order": 4.0})
    assert isinstance(p, baselines.BASELINES.get("bleu").Params) and p.max_ngram_order == 4
    assert isinstance(p.max_ngram_order, int) and baselines.as_dict(p) == {**defaults("bleu"), "max_ngram_order": 4}
    with pytest.raises(ConfigError, match=r"^unknown baseline 'bleau' \(did you mean bleu\?\); known: bleu, chrf, "):
        baselines.BASELINES.get("bleau")
