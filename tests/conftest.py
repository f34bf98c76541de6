"""Shared fixtures: tiny randomly initialised models built once per test run and saved to a temp
dir (nothing is downloaded; tests/support/models.py builds them), the float32 tolerances
(tests/support/f32.py), and the runners of the ``cscore`` command (tests/support/cli.py).

Tests reach these through fixtures; plain helpers they import from ``cscore.tests.support``
(no ``sys.path`` patching, no ``from conftest import``). This module does not import torch: the
fixtures that need it import it when they run, so the metaeval and data tests run without torch
(tests/unit/repo/test_torch_free.py checks that).

Under pytest-xdist (``-n 2``): the tiny models and the sweep are built once per run
(support/shared.py), each worker has its own statistics cache, converted GGUF models are shared
under $CSCORE_CACHE (a file lock per conversion); support/groups.py keeps serial what must be."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from cscore.tests.support import f32 as f32_helpers
from cscore.tests.support.cli import is_ci, main_runner, run_cscore, run_main, tiny_args
from cscore.tests.support.models import (
    build_judge_dirs,
    build_llama,
    build_role_judge_dirs,
    build_tokenizer,
    toy_bigram_class,
)
from cscore.tests.support.pins import snapshot_checker
from cscore.tests.support.shared import once_per_run

pytest_plugins = ["cscore.tests.support.groups"]

# One torch thread for the whole suite: this process and every cscore it starts (the variable is
# inherited; torch reads it when imported). The tests' models are tiny, and with two threads
# OpenMP's threads wait on each other whenever the shared cores are busy (docs/benchmarks.md).
# A caller's own OMP_NUM_THREADS is kept; a test that needs another count sets it in the
# environment it passes (tests/unit/cli/test_threads.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def isolated_stats_cache(tmp_path_factory):
    """Each test session (each xdist worker) gets its own statistics cache (GGUF models stay shared)."""
    os.environ["CSCORE_STATS_CACHE"] = str(tmp_path_factory.mktemp("stats_cache"))
    # the native kernel is built once per run (shared by the xdist workers), not in the user's cache
    os.environ.setdefault("CSCORE_NATIVE_DIR", str(tmp_path_factory.getbasetemp().parent / "native"))
    yield


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """Two tiny llamas sharing one tokenizer (expert 4 layers, amateur 2 layers), and one
    model with a different tokenizer."""
    def build(root: Path) -> dict:
        tok = build_tokenizer(root / "tok")
        expert = build_llama(root / "expert", tok, layers=4, seed=1)
        amateur = build_llama(root / "amateur", tok, layers=2, seed=2)
        other = build_llama(root / "other", build_tokenizer(root / "tok_other", vocab_size=300, extra=" zebra quartz"),
                            layers=2, seed=3)
        return {"root": str(root), "expert": str(expert), "amateur": str(amateur), "other": str(other)}

    dirs = once_per_run(tmp_path_factory, "tiny", build)
    return SimpleNamespace(**{**dirs, "root": Path(dirs["root"])})


@pytest.fixture(scope="session")
def judge_dirs(tiny_dirs, tmp_path_factory):
    """The tiny models for the judge methods: expert and amateur share a tokenizer and have a chat
    template (``CHAT``: "<s>user: {content}\nassistant:"); other has its own tokenizer and no
    chat template (a base model)."""
    return once_per_run(tmp_path_factory, "judge_models", lambda root: build_judge_dirs(tiny_dirs, root))


@pytest.fixture(scope="session")
def role_judge_dirs(tmp_path_factory):
    """A judge pair (expert, amateur: one tokenizer with SmolLM2-style chat markers, EOS
    ``<|im_end|>``) whose models write ``<|im_start|>assistant\n4<|im_end|>`` after a prompt
    without a generation prompt (it ends with ``<|im_end|>``) and ``4<|im_end|>`` after one with it
    (``<|im_start|>assistant\n``): skipped special tokens leave the text "assistant\n4". The
    expert's logits are sharper (gain 3) than the amateur's (gain 1), so every contrast of the
    judge methods keeps the expert's choice."""
    return once_per_run(tmp_path_factory, "role_models", build_role_judge_dirs)


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


@pytest.fixture(scope="session")
def in_ci() -> bool:
    """CI=true: tests that skip elsewhere for want of data or wheels fail instead."""
    return is_ci()


@pytest.fixture(scope="session")
def cscore_cli():
    """run(*args, cwd, env=None, timeout=None) -> CompletedProcess: the cscore command in a
    subprocess. Session-scoped, so module- and session-scoped fixtures can use it too."""
    return run_cscore


@pytest.fixture(scope="session")
def tiny_sweep(tiny_dirs, tmp_path_factory):
    """A finished two-point multirun of the tiny pair (method.gamma=0.1,0.4), run once, in this
    process (run_main), for the tests that read a sweep (test_report.py) and the one that re-runs it
    (test_cli.py). Its statistics cache is its own, empty when it starts (not the session's, which
    earlier tests may have filled: a sweep served wholly from a cache has no speed figures), so
    what it writes does not depend on which tests ran before. Shared: copy it before changing
    anything in it. ``args``: the command, without its hydra.sweep.dir and cache.dir; ``stdout``:
    what the command printed."""
    args = ["run", "-m", *tiny_args(tiny_dirs, "method.gamma=0.1,0.4")]

    def build(root: Path) -> dict:
        res = run_main(*args, f"hydra.sweep.dir={root / 'sw'}", f"cache.dir={root / 'stats'}", cwd=root)
        assert res.returncode == 0, res.stdout + res.stderr
        return {"dir": str(root / "sw"), "cache": str(root / "stats"), "stdout": res.stdout}

    done = once_per_run(tmp_path_factory, "sweep", build)
    # a re-run of the same command names the same cache.dir (the jobs' overrides must match)
    return SimpleNamespace(dir=Path(done["dir"]), args=[*args, f"cache.dir={done['cache']}"], stdout=done["stdout"])


@pytest.fixture
def cscore_main(monkeypatch, capsys):
    """run(*args, cwd) -> CompletedProcess: ``cscore.cli.main.main(args)`` in this process, for
    commands that end before any scoring (config mistakes, bad input, --help) and for whole runs
    where a fresh process is not the point of the test (no interpreter start-up and torch import
    per run). Like a subprocess: run in ``cwd``, its exit status as returncode, its stdout / stderr
    captured; Hydra's global state, its logging, sys.argv and the model pool are undone after each
    call. A test of exit codes, signals or start-up keeps ``cscore_cli``. An exception main() does
    not handle propagates: the test fails with its traceback."""
    return main_runner(monkeypatch, capsys)


@pytest.fixture(scope="session")
def f32():
    """The float32 tolerance helpers (tests/support/f32.py): f32.tol, f32.assert_close, f32.logp_tol,
    f32.token_tol, f32.typical_logp."""
    h = f32_helpers
    return SimpleNamespace(tol=h.f32_tol, assert_close=h.assert_f32_close, logp_tol=h.f32_logp_tol,
                           token_tol=h.f32_token_tol, typical_logp=h.typical_logp)


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
    snapshot is written instead (tests/integration/test_pins_*.py: the interfaces a refactor must keep)."""
    return snapshot_checker(Path(request.node.path).name)
