"""Model specs that name nothing loadable: one-line errors naming the spec and the file, and no
stray files left in the model cache. Other mistakes a user can fix are CscoreErrors too. Also the
cache lock itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cscore.errors import CscoreError
from cscore.files import file_lock
from cscore.scorers.api import ModelPair
from cscore.scorers.engine.tokenize import InputError
from cscore.scorers.models.gguf import GGUF_MAGIC, ModelSpecError, resolve_path
from cscore.scorers.models.models import early_exit, load_model
from cscore.tests.support.threads import in_threads


@pytest.fixture
def model_cache(tmp_path, monkeypatch):
    """An empty cscore cache for this test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("CSCORE_CACHE", str(root))
    return root


def spec_error(spec: str) -> str:
    """The message of the error ``resolve_path(spec)`` raises; it must be a one-line InputError."""
    with pytest.raises(ModelSpecError) as info:
        resolve_path(spec)
    assert isinstance(info.value, InputError)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def left_in(root: Path) -> list[str]:
    """Files (not folders) under ``root``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_a_path_that_is_not_a_gguf_file_is_named(tmp_path, model_cache):
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    message = spec_error(f"gguf:{passwd}")
    assert f"{passwd} is not a GGUF file" in message and "packaged" not in message


def test_a_non_gguf_file_named_x_gguf_leaves_nothing_in_the_cache(tmp_path, model_cache):
    fake = tmp_path / "x.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    message = spec_error(f"gguf:{fake}")
    assert f"{fake} is not a GGUF file" in message and repr(GGUF_MAGIC) in message
    assert left_in(model_cache) == []


def test_a_damaged_gguf_file_is_named_and_leaves_no_lock(tmp_path, model_cache):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(GGUF_MAGIC + b"\x03\x00\x00\x00cut short")
    message = spec_error(f"gguf:{broken}")
    assert f"cannot convert {broken}" in message
    # no lock, no partial conversion; the file's SHA-256 memo (fingerprints/, by path and stat) may stay
    assert [f for f in left_in(model_cache) if not f.startswith("fingerprints/")] == []


def test_a_missing_gguf_path_is_not_taken_for_a_packaged_name(tmp_path, model_cache):
    for rest in (f"{tmp_path}/missing.gguf", "models/missing", "missing.gguf"):
        message = spec_error(f"gguf:{rest}")
        assert "file not found" in message and "missing" in message, message


def test_an_existing_relative_file_is_a_path(tmp_path, model_cache, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("weights.bin").write_bytes(b"\x00" * 16)
    assert "weights.bin is not a GGUF file" in spec_error("gguf:weights.bin")


def test_an_unknown_packaged_name_lists_the_known_ones(model_cache):
    message = spec_error("gguf:no-such-model")
    assert "unknown packaged GGUF 'no-such-model'" in message and "smollm2" in message


def test_a_folder_is_not_a_gguf_file(tmp_path, model_cache):
    assert f"{tmp_path} is not a file" in spec_error(f"gguf:{tmp_path}")


def load_error(spec: str) -> str:
    with pytest.raises(ModelSpecError) as info:
        load_model(spec, device="cpu")
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_a_missing_local_model_directory_is_named(tmp_path):
    for spec in (str(tmp_path / "nope"), "./nope", "some/deep/nope"):
        message = load_error(spec)
        assert f"local directory not found: {spec}" in message


def test_a_gguf_file_given_without_the_gguf_prefix_gets_a_hint(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(GGUF_MAGIC)
    assert f"use gguf:{model}" in load_error(str(model))


def test_a_folder_without_a_model_is_named(tmp_path):
    assert f"{tmp_path} has no config.json" in load_error(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert f"{tmp_path} is not a loadable model directory" in load_error(str(tmp_path))


def test_an_uncached_hub_id_offline_says_so(tmp_path):
    """A hub id with the hub unreachable (offline mode, empty hub cache): one line naming the spec."""
    code = ("from cscore.scorers.models.models import load_model\n"
            "try:\n    load_model('nobody-here/no-such-model', device='cpu')\n"
            "except Exception as err:\n    print(type(err).__name__, err)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout + out.stderr
    assert lines[0].startswith("ModelSpecError model 'nobody-here/no-such-model': the Hugging Face hub is unreachable")
    assert "not in the local hub cache" in lines[0]


def test_what_a_user_can_fix_is_a_cscore_error(tiny_dirs):
    """The CLI prints a CscoreError as one line; anything else is a bug and keeps its traceback."""
    assert issubclass(ModelSpecError, InputError) and issubclass(InputError, CscoreError)
    full = load_model(tiny_dirs.expert, device="cpu")
    mistakes = [
        (lambda: load_model(tiny_dirs.expert, device="cpu", dtype="float8"), "unknown dtype 'float8'"),
        (lambda: early_exit(full, 9), "between 1 and 4, got 9"),
        (lambda: early_exit(full, "half"), "between 1 and 4, got 'half'"),
        (lambda: ModelPair.load(tiny_dirs.expert, tiny_dirs.other).statistics(["a"], ["b"]).score("cd_judge"),
         "needs expert and amateur to share a tokenizer"),
        (lambda: ModelPair(full).statistics(["a"], ["b"], models=["amateur"]), "no amateur model"),
        (lambda: ModelPair(full).statistics(["a"], ["b"], padding_side="middle"), "padding_side"),
        (lambda: ModelPair(full).statistics(["a"], ["b"], temperatures=[0.0]), "temperatures must be positive"),
        (lambda: ModelPair(full).statistics(["a"], [""]), "item 0: empty hypothesis"),
    ]
    for mistake, message in mistakes:
        with pytest.raises(CscoreError, match=message):
            mistake()


def test_file_lock_is_removed_after_use_and_on_errors(tmp_path):
    lock = tmp_path / "sub" / "x.lock"
    with file_lock(lock):
        assert lock.exists()
    assert not lock.exists()
    with pytest.raises(RuntimeError):
        with file_lock(lock):
            raise RuntimeError("conversion failed")
    assert not lock.exists()


def test_file_lock_excludes_while_lock_files_come_and_go(tmp_path):
    lock, inside, overlaps = tmp_path / "x.lock", [], []

    def job():
        for _ in range(20):
            with file_lock(lock):
                inside.append(1)
                overlaps.append(len(inside) > 1)
                time.sleep(0.001)
                inside.pop()

    in_threads([job] * 4)
    assert len(overlaps) == 80 and not any(overlaps)
    assert not lock.exists()
