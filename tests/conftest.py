"""Shared fixtures: tiny randomly initialised models built here and saved to a temp dir
(nothing is downloaded), a toy bigram LM whose logits the tests choose, the float32 tolerances,
and one runner for the ``cscore`` command.

Tests reach everything here through fixtures (no ``sys.path`` patching, no ``from conftest
import``). This module does not import torch: the fixtures that need it import it when they run,
so the metaeval and data tests run without torch (tests/test_torch_free.py checks that)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

# One torch thread for the whole suite: this process and every cscore it starts (the variable is
# inherited; torch reads it when imported). The tests' models are tiny, and with two threads
# OpenMP's threads wait on each other whenever the shared cores are busy (measured: a tiny
# `cscore run` took 261 s with two threads against 92 s and 109 s with one, load 6-11; docs/benchmarks.md).
# A caller's own OMP_NUM_THREADS is kept; a test that needs another count sets it in the
# environment it passes (tests/test_threads.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def isolated_stats_cache(tmp_path_factory):
    """Each test session gets its own statistics cache (converted GGUF models stay shared)."""
    os.environ["CSCORE_STATS_CACHE"] = str(tmp_path_factory.mktemp("stats_cache"))
    yield


CORPUS = [
    "The mayor opened a new bridge over the river on Monday.",
    "The council said the bridge cost five million and took two years to build.",
    "Write an accurate, relevant, and coherent summary of the following texts:",
    "Summary: A bridge was opened. Translate the following sentence to English:",
    "Researchers found that the new vaccine protects most patients from the virus.",
    "The team won the final match after a late goal in extra time.",
] * 20


def build_tokenizer(path: Path, vocab_size: int = 400, extra: str = ""):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([c + extra for c in CORPUS], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")
    fast.save_pretrained(path)
    return fast


def build_llama(path: Path, tokenizer, layers: int = 4, seed: int = 0, hidden: int = 32):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=64,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger random weights: sharper, more varied distributions
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """Two tiny llamas sharing one tokenizer (expert 4 layers, amateur 2 layers), and one
    model with a different tokenizer."""
    root = tmp_path_factory.mktemp("tiny")
    tok = build_tokenizer(root / "tok")
    expert = build_llama(root / "expert", tok, layers=4, seed=1)
    amateur = build_llama(root / "amateur", tok, layers=2, seed=2)
    other_tok = build_tokenizer(root / "tok_other", vocab_size=300, extra=" zebra quartz")
    other = build_llama(root / "other", other_tok, layers=2, seed=3)
    return SimpleNamespace(root=root, expert=str(expert), amateur=str(amateur), other=str(other))


CHAT = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")


@pytest.fixture(scope="session")
def judge_dirs(tiny_dirs, tmp_path_factory):
    """The tiny models for the judge methods: expert and amateur share a tokenizer and have a chat
    template (``CHAT``: "<s>user: {content}\nassistant:"); other has its own tokenizer and no
    chat template (a base model)."""
    import shutil

    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("judge_models")
    out = {}
    for name in ("expert", "amateur", "other"):
        shutil.copytree(getattr(tiny_dirs, name), root / name)
        if name != "other":
            tok = AutoTokenizer.from_pretrained(root / name)
            tok.chat_template = CHAT
            tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out


ROLE_CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
ROLE_CHAIN = ["<|im_end|>", "<|im_start|>", "assistant", "\u010a", "4", "<|im_end|>"]  # "\u010a": byte-level "\n"


def build_role_llama(path: Path, tokenizer, gain: float, seed: int) -> None:
    """A tiny llama whose next token depends on the current token only (every attention output
    and MLP projection zero, so the last hidden state is the token's embedding): after each token
    of ``ROLE_CHAIN`` it puts the logit ``gain * sqrt(hidden)`` on the next one and 0 on every
    other token; other tokens' embeddings are random and live in other dimensions."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    hidden = 32
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=eos,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ROLE_CHAIN]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        emb.normal_(0, 1)
        emb[:, :len(ids) - 1] = 0  # dimensions 0..4: the chain's tokens only
        head = model.lm_head.weight
        head.normal_(0, 0.02)
        head[:, :len(ids) - 1] = 0
        for k, (cur, nxt) in enumerate(zip(ids[:-1], ids[1:])):
            emb[cur] = 0
            emb[cur, k] = 1.0
            head[nxt, k] = gain
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.fixture(scope="session")
def role_judge_dirs(tmp_path_factory):
    """A judge pair (expert, amateur: one tokenizer with SmolLM2-style chat markers, EOS
    ``<|im_end|>``) whose models write ``<|im_start|>assistant\n4<|im_end|>`` after a prompt
    without a generation prompt (it ends with ``<|im_end|>``) and ``4<|im_end|>`` after one with it
    (``<|im_start|>assistant\n``): skipped special tokens leave the text "assistant\n4". The
    expert's logits are sharper (gain 3) than the amateur's (gain 1), so every contrast of the
    judge methods keeps the expert's choice."""
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("role_models")
    base = build_tokenizer(root / "tok")
    tok = PreTrainedTokenizerFast.from_pretrained(root / "tok")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.add_tokens(["assistant"])  # one ordinary token, as in SmolLM2's vocabulary
    tok.eos_token = "<|im_end|>"
    tok.chat_template = ROLE_CHAT
    assert tok("assistant\n4", add_special_tokens=False)["input_ids"] == [tok.convert_tokens_to_ids(t)
                                                                          for t in ROLE_CHAIN[2:5]]
    assert len(base) < len(tok)
    out = {}
    for name, gain, seed in (("expert", 3.0, 11), ("amateur", 1.0, 12)):
        build_role_llama(root / name, tok, gain, seed)
        out[name] = str(root / name)
    return out


@pytest.fixture(scope="session")
def demo_rows(tmp_path_factory):
    """``demo_rows(k)``: a JSONL file of the demo set's first ``k`` rows of each of its first two
    documents (few prompts for an end-to-end run)."""
    import json

    from cscore.data.demo import DEMO_FILE

    def make(per_doc: int) -> Path:
        lines = [x for x in Path(DEMO_FILE).read_text().splitlines() if x.strip()]
        docs = [json.loads(x)["doc_id"] for x in lines]
        keep = [x for d in sorted(set(docs))[:2] for x in [y for y, e in zip(lines, docs) if e == d][:per_doc]]
        path = tmp_path_factory.mktemp("demo_rows") / "rows.jsonl"
        path.write_text("\n".join(keep) + "\n")
        return path

    return make


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """A folder holding only a tokenizer (the one the tiny models use; no torch needed)."""
    path = tmp_path_factory.mktemp("tiny_tok") / "tok"
    build_tokenizer(path)
    return path


def toy_bigram_class():
    """The ToyBigram class (defined when asked for, so that importing this module does not
    import torch)."""
    import torch
    from torch import nn

    class ToyBase(nn.Module):
        """Hidden state = one-hot of the current token."""

        def __init__(self, vocab: int):
            super().__init__()
            self.embed = nn.Embedding(vocab, vocab)
            with torch.no_grad():
                self.embed.weight.copy_(torch.eye(vocab))

        def forward(self, input_ids, attention_mask=None, position_ids=None, use_cache=False):
            return SimpleNamespace(last_hidden_state=self.embed(input_ids.clamp(min=0)))

    class ToyBigram(nn.Module):
        """A causal LM whose next-token logits depend only on the current token:
        logits(next | prev) = table[prev]. The tests pick the table."""

        base_model_prefix = "model"

        def __init__(self, table: torch.Tensor):
            super().__init__()
            vocab = table.shape[0]
            self.model = ToyBase(vocab)
            self.lm_head = nn.Linear(vocab, vocab, bias=False)
            with torch.no_grad():
                self.lm_head.weight.copy_(table.T)
            self.config = SimpleNamespace(final_logit_softcapping=None)

        def get_output_embeddings(self):
            return self.lm_head

    return ToyBigram


@pytest.fixture(scope="session")
def toy_bigram():
    return toy_bigram_class()


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models: one torch thread. With two, OpenMP's threads wait on each other whenever the
    shared cores are busy (measured: 0.56 s instead of 3 ms per tiny T5 forward). Use it with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def is_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def in_ci() -> bool:
    """CI=true: tests that skip elsewhere for want of data or wheels fail instead."""
    return is_ci()


# --- the cscore command --------------------------------------------------------------------------


def run_cscore(*args, cwd, env=None, timeout=None) -> subprocess.CompletedProcess:
    """``python -m cscore.cli.main *args`` in ``cwd`` (a fresh process: nothing kept in memory
    between runs), output captured as text."""
    return subprocess.run([sys.executable, "-m", "cscore.cli.main", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="session")
def cscore_cli():
    """run(*args, cwd, env=None, timeout=None) -> CompletedProcess: the cscore command in a
    subprocess. Session-scoped, so module- and session-scoped fixtures can use it too."""
    return run_cscore


@pytest.fixture(scope="session")
def tiny_sweep(tiny_dirs, tmp_path_factory):
    """A finished two-point multirun of the tiny pair (method.gamma=0.1,0.4; the session's
    statistics cache), run once for the tests that read a sweep (test_report.py) and the one that
    re-runs it (test_cli.py). Shared: copy it before changing anything in it. ``args``: the
    command, without its hydra.sweep.dir; ``stdout``: what the command printed."""
    root = tmp_path_factory.mktemp("sweep")
    args = ["run", "-m", f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
            "pair.amateur.early_exit=null", "pair.name=tiny", "runtime.progress=false", "method.gamma=0.1,0.4"]
    res = run_cscore(*args, f"hydra.sweep.dir={root / 'sw'}", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    return SimpleNamespace(dir=root / "sw", args=args, stdout=res.stdout)


@pytest.fixture
def cscore_main(monkeypatch, capsys):
    """run(*args, cwd) -> CompletedProcess: ``cscore.cli.main.main(args)`` in this process, for
    commands that end before any scoring (config mistakes, bad input, a model pair that does not
    fit, --help): no interpreter start-up and imports per call. Like a subprocess: run in
    ``cwd``, its exit status (SystemExit) as returncode, its stdout / stderr captured; what Hydra
    leaves behind (its global state, the logging it configures, sys.argv) is undone after each
    call, and so are the models it loaded (the process's model pool is emptied: the next call loads
    its own, as a fresh process would). It also runs whole scoring runs where a fresh process is
    not the point of the test (no interpreter start-up and torch import per run); a test of exit
    codes, signals or start-up keeps ``cscore_cli``. An exception main() does not handle
    propagates: the test fails with its traceback."""
    import logging

    from cscore.cli.main import main

    def run(*args, cwd) -> subprocess.CompletedProcess:
        from hydra.core.global_hydra import GlobalHydra

        capsys.readouterr()  # only this call's output
        loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                          if isinstance(lg, logging.Logger))]
        saved = {lg: (lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers}
        old_cwd = os.getcwd()
        monkeypatch.setattr(sys, "argv", list(sys.argv))  # run_command sets it for Hydra
        os.chdir(cwd)
        code = 0
        try:
            main(list(args))
        except SystemExit as stop:
            if isinstance(stop.code, str):  # as the interpreter does: the message on stderr, status 1
                print(stop.code, file=sys.stderr)
            code = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
        finally:
            os.chdir(old_cwd)
            GlobalHydra.instance().clear()
            models = sys.modules.get("cscore.scorers.models.models")  # imported only if the run loaded one
            if models is not None:
                models.clear_pool()
            for lg, (handlers, level, propagate, disabled) in saved.items():  # Hydra's dictConfig undone
                for h in lg.handlers:
                    if h not in handlers:
                        h.close()
                lg.handlers[:] = handlers
                lg.level, lg.propagate, lg.disabled = level, propagate, disabled
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["cscore", *args], code, out, err)

    return run


# --- float32 tolerances ------------------------------------------------------------------------
#
# Every comparison of values that come from float32 forward passes uses these: f32_tol /
# assert_f32_close for scores, f32_logp_tol for single log-probabilities. float64 comparisons
# keep fixed tight tolerances (1e-9 and below); integer and bit-for-bit comparisons stay exact.
#
# Where the error comes from. The engine computes log p_T(y) = z_y/T - logsumexp(z/T) from
# float32 logits z. Every dot product of the forward pass is rounded, and how depends on the
# order of its summation, which the BLAS kernels choose from the batch shape (token budget,
# padding side, item order) and from the CPU (SIMD width, blocking, threads). So two float32
# passes over the same item differ in each logit by dz ~ kappa * eps32 * Lambda (Lambda: the
# scale of the logits, kappa: growth with depth and dot-product length), hence
#     |d log p_T(y)| <= |dz_y|/T + |d logsumexp(z/T)| <= 2 max|dz| / T.
# The statistics do not keep Lambda; they hold two stand-ins for it: |log p_T(y)| itself
# (>= (z_max - z_y)/T: an unlikely token certifies widely spread logits), and M/T with
# M = the mean |log p_1| over all tokens of the pass (the typical spread, so that a token the
# model is sure of, log p ~ 0, still gets a tolerance). Per token and per float32 evaluation:
#     delta_t(T) = KAPPA32 * eps32 * (|log p_T(y_t)| + M/T).
# KAPPA32 is measured, with margin, not fitted to one machine: the largest |float32 - float64|
# of log p_T in units of eps32 * (|log p_T| + M/T) (same weights: the float64 pass is the exact
# value to ~1e-16) was 5.4 over 990 tokens x 3 temperatures of the tiny llamas below, run with
# six different summation orders (hidden units permuted: an identical network whose every dot
# product is summed in another order) and two batchings; 7.6 over 18,817 tokens of the demo set;
# 32.5 on SmolLM2-135M and 42.6 on Gemma-3-270M (trained models: logits large next to their
# log-probabilities). KAPPA32 = 64 covers all of them, the tiny llamas of these tests 8x over.
# Two float32 evaluations (the usual comparison: other batching, process or CPU) are each within
# delta of the exact value, so within 2 delta of each other: ``runs=2``; against a float64
# reference, ``runs=1``.
#
# Sums. A score adds n token values; the rounding errors of one item's tokens come from the same
# kernels and need not cancel, so they are added in the worst case: tol = sum_t bound_t (linear
# in n, not sqrt(n)). The norms divide that by n or sqrt(n) as they divide the score. (Measured:
# item sums stayed within 1.02 x sum_t eps32 * (...) under all the summation orders above, so
# sums have ~100x margin; on the tiny llamas the tolerance is ~3e-5 of a summed log-prob.)
#
# Methods. A token value v = f(a, b) reads a = log p_exp and b = log p_ama (one of them for
# `single`). Within the box [a +- delta_a] x [b +- delta_b] it moves by at most the largest
# |f(corner) - f(a, b)|: single, ensemble and division are monotone in a and b, and ContrastScore
# log|e^a - gamma e^b| is monotone on each side of p_exp = gamma p_ama, so the extremes are at
# the four corners, where the helper evaluates the method itself. That is ContrastScore's
# amplification computed from the actual statistics, token by token and beyond first order
# (dv/da = p/(p - gamma q), dv/db = -gamma q/(p - gamma q): large where p_exp ~ gamma p_ama;
# README "Numerics"); a box that contains p_exp = gamma p_ama lets v fall to the floor, and the
# tolerance of that item says so. cd_score's head membership (p_exp >= alpha max p) is a step,
# not covered.

EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7
KAPPA32 = 64.0


def _token_stats(stats) -> dict:
    """{head: TokenStats} from a PairStatistics or such a dict."""
    return dict(getattr(stats, "stats", stats))


def typical_logp(ts) -> float:
    """M: mean |log p_1| over the tokens of one pass (T = 1 row; another row scaled by its T)."""
    t = min(ts.temperatures, key=lambda x: abs(np.log(x)))
    lp = np.abs(ts.lp(t))
    return float(lp.mean() * t) if lp.size else 0.0


def f32_logp_tol(lp, temperature: float = 1.0, *, typical: float | None = None, runs: int = 2) -> np.ndarray:
    """Per-token bound on the difference of float32 log p_T values (``runs`` float32
    evaluations; see the comment above). ``lp``: the values; ``typical``: M (default: from lp)."""
    lp = np.abs(np.asarray(lp, dtype=np.float64))
    if typical is None:
        typical = float(lp.mean() * temperature) if lp.size else 0.0
    return runs * KAPPA32 * EPS32 * (lp + typical / temperature)


def _perturbed(ts, sign: float, runs: int):
    """The TokenStats with every log p_T moved by sign * its float32 bound."""
    from cscore.scorers.engine.stats import TokenStats

    m = typical_logp(ts)
    logp = ts.logp.astype(np.float64).copy()
    for i, t in enumerate(ts.temperatures):
        logp[i] += sign * f32_logp_tol(logp[i], t, typical=m, runs=runs)
    return TokenStats(ts.temperatures, ts.offsets, ts.token_ids, logp, ts.logp_max)


def _method_inputs(method: str, params: dict) -> dict:
    """{head: temperature} that the method's token values read."""
    from cscore.scorers import methods

    full = methods.with_defaults(method, params) if hasattr(methods, "with_defaults") else dict(params)
    if method == "single":
        return {full.get("model", "expert"): full.get("t", 1.0)}
    if method == "cd_score":
        raise NotImplementedError("cd_score's head test is a step in log p_max: no float32 tolerance")
    return {"expert": full.get("t_exp", 1.0), "amateur": full.get("t_ama", 1.0)}


def f32_token_tol(stats, method: str, *, runs: int = 2, **params) -> tuple[np.ndarray, np.ndarray]:
    """(per-token bound on the method's token values, per-token amplification = that bound over
    the sum of the input log-prob bounds), from the reference statistics ``stats``."""
    from cscore.scorers import methods

    ts = _token_stats(stats)
    inputs = _method_inputs(method, params)
    token_params = {k: v for k, v in params.items() if k not in ("norm", "skip_first")}
    v0 = methods.token_scores(method, ts, **token_params)
    dev = np.zeros_like(v0)
    for signs in itertools.product((-1.0, 1.0), repeat=len(inputs)):  # the corners of the box
        moved = dict(ts)
        for head, sign in zip(inputs, signs):
            moved[head] = _perturbed(ts[head], sign, runs)
        with np.errstate(invalid="ignore"):
            dev = np.maximum(dev, np.abs(methods.token_scores(method, moved, **token_params) - v0))
    delta_in = sum(f32_logp_tol(ts[h].lp(t), t, typical=typical_logp(ts[h]), runs=runs) for h, t in inputs.items())
    if method == "contrast":  # the box may contain p_exp = gamma p_ama: v can drop to the floor
        from cscore.scorers.methods.common import logp

        full = methods.with_defaults(method, params) if hasattr(methods, "with_defaults") else params
        a = logp(ts["expert"], inputs["expert"], full.get("clamp"))
        with np.errstate(divide="ignore"):
            b = np.log(full.get("gamma", 0.1)) + logp(ts["amateur"], inputs["amateur"], full.get("clamp"))
        straddles = np.abs(a - b) <= delta_in
        floor = full.get("floor")
        lowest = np.log(floor) if floor else -np.inf
        dev = np.where(straddles, np.maximum(dev, v0 - lowest), dev)
    return dev, dev / np.where(delta_in > 0, delta_in, 1.0)


def f32_tol(stats, method: str, *, runs: int = 2, **params) -> np.ndarray:
    """Per-item absolute tolerance for ``score(method, **params)`` computed from float32
    statistics: the per-token bounds of f32_token_tol added up as the score adds the tokens
    (``norm``, ``skip_first``). ``stats``: the reference PairStatistics (or {head: TokenStats})."""
    from cscore.scorers.methods.common import aggregate

    dev, _ = f32_token_tol(stats, method, runs=runs, **params)
    offsets = next(iter(_token_stats(stats).values())).offsets
    agg = {k: params[k] for k in ("norm", "skip_first") if k in params}
    return aggregate(dev, offsets, **agg)


def assert_f32_close(got, want, stats, method: str, *, runs: int = 2, **params) -> None:
    """|got - want| <= f32_tol item by item, with a message that names the worst item, its
    tolerance and the largest amplification among its tokens."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    tol = f32_tol(stats, method, runs=runs, **params)
    assert got.shape == want.shape == tol.shape, (got.shape, want.shape, tol.shape)
    diff = np.abs(got - want)
    bad = ~(diff <= tol)  # NaN fails
    if bad.any():
        _, amp = f32_token_tol(stats, method, runs=runs, **params)
        offsets = next(iter(_token_stats(stats).values())).offsets
        i = int(np.argmax(np.where(bad, diff / np.maximum(tol, 1e-300), -1)))
        item_amp = amp[offsets[i]:offsets[i + 1]].max(initial=0.0)
        raise AssertionError(
            f"{method} {params}: {int(bad.sum())} of {len(got)} items differ by more than the float32 tolerance; "
            f"worst item {i}: got {got[i]!r}, want {want[i]!r}, |diff| {diff[i]:.3g} > tol {tol[i]:.3g} "
            f"({diff[i] / max(tol[i], 1e-300):.3g} x; {offsets[i + 1] - offsets[i]} tokens, "
            f"max amplification {item_amp:.3g})")


@pytest.fixture(scope="session")
def f32():
    """The float32 tolerance helpers above: f32.tol, f32.assert_close, f32.logp_tol,
    f32.token_tol, f32.typical_logp."""
    return SimpleNamespace(tol=f32_tol, assert_close=assert_f32_close, logp_tol=f32_logp_tol, token_tol=f32_token_tol,
                           typical_logp=typical_logp)


@pytest.fixture(scope="session")
def shared():
    """The shared/data folder; its tests skip without it, except under CI where they fail."""
    from cscore.data import paths

    folder = paths.shared_data_dir()
    if folder is None:
        message = f"shared data folder not found (set {paths.ENV_VAR} or put it at <workspace>/shared/data)"
        if is_ci():
            pytest.fail(message)
        pytest.skip(message)
    return folder


@pytest.fixture
def pin_snapshot(request):
    """check(path, text): ``text`` equals the pinned snapshot at ``path``; with CSCORE_UPDATE_PINS=1 the
    snapshot is written instead (tests/test_pins_*.py: the interfaces a refactor must keep)."""
    import difflib

    def check(path: Path, text: str) -> None:
        if os.environ.get("CSCORE_UPDATE_PINS") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.is_file():
            pytest.fail(f"no snapshot {path.name}: record it with "
                        f"CSCORE_UPDATE_PINS=1 python -m pytest {Path(request.node.path).name}")
        want = path.read_text()
        if text != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                f"pinned {path.name}", "now"))
            pytest.fail(f"{path.name} changed (CSCORE_UPDATE_PINS=1 re-records it if intended):\n{diff}",
                        pytrace=False)

    return check
