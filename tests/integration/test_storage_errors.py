"""Every place cscore writes, when the place cannot take it: one line, never a traceback.

Where a run cannot go on without the write (a GGUF model's conversion or the join of its parts,
the run directory, the report), it stops with ``cscore: error: cannot write <what> to <where>:
<why>`` (``files.writing``: a StorageError, exit 1); a folder that cannot be made is refused
before anything loads where that can be told (cli/precheck.py, exit 2). Where the write only
saves time (statistics, their checkpoints, judge decodes, the fingerprint index, tracking), it
is one warning and the run goes on. A full disk is simulated with a real file-size limit
(RLIMIT_FSIZE in a subprocess: writes fail with EFBIG, as they fail with ENOSPC on a full disk)
or, named as such, an ENOSPC injected at the write. The other writers' tests:
test_reliability_storage.py (statistics, run directory), test_checkpoint.py (checkpoints),
test_tracking.py (tracking)."""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cscore import files
from cscore.errors import StorageError
from cscore.scorers.store import cache as cache_mod
from cscore.scorers.store.cache import StatsCache

FILE_TOO_LARGE = os.strerror(errno.EFBIG)


def file_size_limit(limit: int):
    def apply():  # in the child: writes past `limit` bytes fail with EFBIG instead of killing it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (injected)")


# --- files.writing: what counts as "cannot write" -------------------------------------------------


def test_a_rust_extensions_io_error_is_read_too(tmp_path):
    """safetensors (the converted model's weights) reports a failed write as its own exception
    with the OS error in its message: a real one, under a file."""
    import torch
    from safetensors.torch import save_file

    (tmp_path / "a_file").write_text("")
    with pytest.raises(StorageError) as err:
        with files.writing("the weights", tmp_path / "a_file" / "m"):
            save_file({"w": torch.zeros(3)}, str(tmp_path / "a_file" / "m" / "w.safetensors"))
    assert str(err.value) == f"cannot write the weights to {tmp_path / 'a_file' / 'm'}: {tmp_path / 'a_file'} is a " \
                             "file, not a folder"
    with pytest.raises(ValueError, match="not a write"):  # anything else goes through as it was
        with files.writing("x", tmp_path):
            raise ValueError("not a write (os error 2)")  # ENOENT: a read, not in CANNOT_WRITE


# --- GGUF: the join of a split file, the conversion ----------------------------------------------


def parts(tmp_path: Path, sizes=(40_000, 40_000, 40_000)) -> tuple[list[Path], str]:
    out, digest = [], hashlib.sha256()
    for i, n in enumerate(sizes):
        data = bytes((i * 7 + j) % 251 for j in range(n))
        (tmp_path / f"part{i}").write_bytes(data)
        out.append(tmp_path / f"part{i}")
        digest.update(data)
    return out, digest.hexdigest()


def test_joining_gguf_parts_under_a_file_is_one_line(tmp_path):
    from cscore.scorers.models.gguf import join_parts

    files_, sha = parts(tmp_path)
    (tmp_path / "cache").write_text("a file")
    target = tmp_path / "cache" / "gguf" / "abc" / "m.gguf"
    with pytest.raises(StorageError) as err:
        join_parts(files_, target, sha, "pip install it")
    assert str(err.value) == (f"cannot write the joined m.gguf to {target.parent}: {tmp_path / 'cache'} is a file, "
                              "not a folder; set CSCORE_CACHE to a writable folder with room (converted models are "
                              "cached there)")


JOIN = """
import sys
from pathlib import Path
from cscore.errors import StorageError
from cscore.scorers.models.gguf import join_parts
try:
    join_parts([Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), sys.argv[2], "hint")
except StorageError as err:
    print(err)
"""


@pytest.mark.slow  # a fresh interpreter (its file size limit) that imports torch and transformers
def test_joining_gguf_parts_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    from cscore.scorers.models.gguf import join_parts

    files_, sha = parts(tmp_path)
    target = tmp_path / "c" / "gguf" / "m.gguf"
    res = subprocess.run([sys.executable, "-c", JOIN, str(target), sha, *map(str, files_)], capture_output=True,
                         text=True, preexec_fn=file_size_limit(100_000), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == f"cannot write the joined m.gguf to {target.parent}: {FILE_TOO_LARGE}; set " \
                                 "CSCORE_CACHE to a writable folder with room (converted models are cached there)"
    assert [p.name for p in target.parent.iterdir()] == []  # no half-joined file, no lock
    join_parts(files_, target, sha, "hint")  # without the limit (in this process): joined
    assert target.stat().st_size == 120_000


def test_a_conversion_cache_under_a_file_or_without_room_is_refused_up_front(tmp_path, cscore_main, monkeypatch):
    """Before anything loads (exit 2): $CSCORE_CACHE under a file; a disk with less room than the
    GGUF file itself takes (a sparse file with the GGUF magic, 1 GB larger than the free space)."""
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path / "a_file" / "c"))
    res = cscore_main("run", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        f"cscore: error: gguf:smollm2 is converted once into {tmp_path / 'a_file' / 'c' / 'models'} (the cache: "
        f"$CSCORE_CACHE, else ~/.cache/cscore), but {tmp_path / 'a_file'} is a file, not a folder; set CSCORE_CACHE "
        "to a writable folder"]
    big = tmp_path / "big.gguf"
    with open(big, "wb") as f:
        f.write(b"GGUF")
        f.truncate(shutil.disk_usage(tmp_path).free + 10**9)
    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path / "c"))
    res = cscore_main("run", f"pair.expert.path=gguf:{big}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"cscore: error: gguf:{big} is converted once into {tmp_path / 'c' / 'models'} ")
    assert f"which needs more than {big.stat().st_size / 1e6:.0f} MB, but {tmp_path} has " in line
    assert line.endswith(" MB free; set CSCORE_CACHE to a folder with room")
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow
def test_converting_the_default_model_on_a_full_disk_is_one_line(tmp_path, demo_rows):
    """The default pair's GGUF model converted into a fresh $CSCORE_CACHE with 1 MiB of room (the
    weights need about 500 MB): one line, exit 1, no run directory, no half-written conversion."""
    env = {**os.environ, "CSCORE_CACHE": str(tmp_path / "c")}
    res = subprocess.run([sys.executable, "-m", "cscore.cli.main", "run", "runtime.threads=1", "runtime.progress=false",
                          f"data.path={demo_rows(2)}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         preexec_fn=file_size_limit(1 << 20), timeout=600)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    said = res.stdout + res.stderr  # the one-time conversion said first, with about how long (issue 39)
    assert "converting SmolLM2-135M-Instruct.Q4_1.gguf to a transformers checkpoint, once" in said
    assert "98 MB, about 16 s on an idle 2-core CPU, up to 123 s on a busy one" in said
    assert res.stderr.strip().splitlines()[-1] == (
        f"cscore: error: cannot write the converted model of SmolLM2-135M-Instruct.Q4_1.gguf to {tmp_path / 'c'}"
        f"/models: {FILE_TOO_LARGE}; set CSCORE_CACHE to a writable folder with room (converted models are cached "
        "there)")
    assert [p.name for p in (tmp_path / "c" / "models").iterdir()] == []
    assert not (tmp_path / "outputs").exists()  # stopped before scoring: its new run directory removed


# --- the report ------------------------------------------------------------------------------------


def test_a_report_folder_under_a_file_is_refused_before_anything_is_computed(tmp_path, cscore_main):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("data: {name: demo}\npair: {name: p}\nmethod: {name: contrast}\n")
    (tmp_path / "a_file").write_text("")
    res = cscore_main("report", str(run), "--out", str(tmp_path / "a_file" / "rep"), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"cscore: error: cannot write the report to {tmp_path / 'a_file' / 'rep'}: {tmp_path / 'a_file'} is a file, "
        "not a folder"]


def test_a_report_on_a_full_disk_is_one_line(tiny_sweep, tmp_path):
    sweep = tmp_path / "sw"
    shutil.copytree(tiny_sweep.dir, sweep)
    shutil.rmtree(sweep / "report", ignore_errors=True)
    res = subprocess.run([sys.executable, "-m", "cscore.cli.main", "report", str(sweep), "--bootstrap", "0",
                          "--permutations", "0"], cwd=tmp_path, capture_output=True, text=True,
                         preexec_fn=file_size_limit(4000), timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"cscore: error: cannot write the report to {sweep / 'report'}: " \
                                                  f"{FILE_TOO_LARGE}"


# --- judge decodes (stored in the statistics cache): the run goes on ----------------------------


PARTS = {"model": {"kind": "dir", "sha256": "1" * 64}, "prompts": "p", "lam": 0.5}


def through_cache(cache, parts: dict, compute):
    """(decoded ids per prompt, whether read from ``cache``) of one decode through ``through_cache_many``."""
    from cscore.scorers.judge.decode import through_cache_many

    paths, cached, _, _ = through_cache_many(cache, {"x": parts}, lambda names: {"x": compute()})["x"]
    return paths, cached


def test_judge_decodes_on_a_full_cache_are_used_and_not_stored(tmp_path, monkeypatch, caplog):
    """ENOSPC injected at the cache's write of an entry's meta.json (its statistics file was written)."""
    cache = StatsCache(tmp_path / "c")
    monkeypatch.setattr(cache_mod, "write_atomic", no_space)
    with caplog.at_level(logging.WARNING):
        assert through_cache(cache, PARTS, lambda: [[5, 6, 7], [8]]) == ([[5, 6, 7], [8]], False)
    assert cache.keys() == [] and [p.name for p in cache.root.iterdir()] in ([".locks"], [])  # no temp entry left
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "cannot store entry" in warning and "No space left on device" in warning
    monkeypatch.undo()  # room again: stored, then read back
    assert through_cache(cache, PARTS, lambda: [[5, 6, 7], [8]]) == ([[5, 6, 7], [8]], False)
    assert through_cache(cache, PARTS, lambda: pytest.fail("computed again")) == ([[5, 6, 7], [8]], True)


def test_judge_decodes_with_the_cache_under_a_file_are_used(tmp_path, caplog):
    (tmp_path / "a_file").write_text("")
    cache = StatsCache(tmp_path / "a_file" / "c")
    with caplog.at_level(logging.WARNING):
        assert through_cache(cache, PARTS, lambda: [[1], [2, 3]]) == ([[1], [2, 3]], False)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"statistics cache {cache.root} cannot be a folder: {tmp_path / 'a_file'} is a file; statistics are "
        "neither read nor stored"]


# --- cscore data export ------------------------------------------------------------------------------


def test_a_data_export_that_cannot_be_written_is_one_line(tmp_path, cscore_main):
    (tmp_path / "a_file").write_text("")
    res = cscore_main("data", "export", "data=demo", f"out={tmp_path / 'a_file' / 'x.parquet'}", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"cscore: error: cannot write the table to {tmp_path / 'a_file'}: {tmp_path / 'a_file'} is a file, not a "
        "folder"]
    res = subprocess.run([sys.executable, "-m", "cscore.cli.main", "data", "export", "data=demo",
                          f"out={tmp_path / 'x.jsonl'}"], cwd=tmp_path, capture_output=True, text=True,
                         preexec_fn=file_size_limit(10_000), timeout=300)  # the demo set is about 160 kB
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [
        f"cscore: error: cannot write the table to {tmp_path}: {FILE_TOO_LARGE}"], res.stderr[-2000:]
