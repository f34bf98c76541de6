"""Storage faults: a full disk or a file-size limit, and a read-only statistics cache. A run either
finishes (the cache just stores nothing) or stops with one line; nothing half-written is ever
read as a cache entry or a complete run. The file-size limit is a real failure (RLIMIT_FSIZE in a
subprocess: writes fail with EFBIG); the read-only cache is a real read-only bind mount only with
CSCORE_ALLOW_SYSTEM_CHANGES=1 (root), and otherwise targeted fault injection, named as such.
scripts/reliability.py repeats these on a small tmpfs."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cscore import rundir
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.store import cache as cache_mod
from cscore.scorers.store.cache import StatsCache, ids_digest, stats_key


def stats(n_tokens=4000, seed=0) -> TokenStats:
    rng = np.random.default_rng(seed)
    offsets = np.array([0, n_tokens // 2, n_tokens])
    logp = -rng.exponential(size=(2, n_tokens))
    return TokenStats((0.5, 1.0), offsets, rng.integers(0, 100, n_tokens), logp, np.maximum(logp, -0.5))


PARTS = {"model": {"kind": "dir", "sha256": "1" * 64}, "temperatures": [0.5, 1.0], "ids": ids_digest([([1], [2])])}
KEY = stats_key(PARTS)


def file_size_limit(limit: int):
    def apply():  # in the child: writes past `limit` bytes fail with EFBIG instead of killing it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_cache_save_past_a_file_size_limit_stores_nothing(tmp_path):
    code = ("import sys, json; sys.path.insert(0, %r)\n"
            "from test_reliability_storage import stats, PARTS, KEY\n"
            "from cscore.scorers.store.cache import StatsCache\n"
            "c = StatsCache(sys.argv[1])\n"
            "print(json.dumps({'saved': c.save(KEY, {'expert': stats()}, PARTS) is not None, 'keys': c.keys()}))"
            % str(Path(__file__).parent))
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")], capture_output=True, text=True,
                         preexec_fn=file_size_limit(20000), timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == {"saved": False, "keys": []}
    assert "cannot store entry" in res.stderr and "File too large" in res.stderr
    assert [p.name for p in (tmp_path / "c").iterdir()] in ([".locks"], [])  # no temp dir left behind
    c = StatsCache(tmp_path / "c")  # without the limit: stored and read back
    c.save(KEY, {"expert": stats()}, PARTS)
    assert c.load(KEY, TokenStats).stats["expert"].logp.tobytes() == stats().logp.tobytes()


def use_cache(c: StatsCache, key: str, compute) -> tuple[TokenStats, bool]:
    """What the engine does with the cache (scorers/api.py): read under the lock, else compute and store."""
    with c.lock(key):
        hit = c.load(key, TokenStats)
        if hit is not None:
            return hit.stats["expert"], True
        got = compute()
        c.save(key, {"expert": got}, PARTS)
        return got, False


def check_read_only(c: StatsCache, caplog) -> None:
    computed = []
    got, cached = use_cache(c, KEY, lambda: computed.append(1) or stats(seed=9))
    assert cached and not computed and got.logp.tobytes() == stats().logp.tobytes()
    other = stats_key({**PARTS, "temperatures": [1.0]})
    got, cached = use_cache(c, other, lambda: stats(seed=3))
    assert not cached and got.logp.tobytes() == stats(seed=3).logp.tobytes()
    assert c.keys() == [KEY]
    assert "not writable" in caplog.text and "cannot store entry" in caplog.text


def test_read_only_cache_fault_injection(tmp_path, monkeypatch, caplog):
    """Fault injection (no mount): creating the lock file and writing an entry fail with EROFS, as
    they do in a read-only folder."""
    c = StatsCache(tmp_path / "c")
    c.save(KEY, {"expert": stats()}, PARTS)

    def read_only_lock(path):
        raise OSError(errno.EROFS, "Read-only file system (injected)", str(path))

    def read_only_save(self, *args):
        raise OSError(errno.EROFS, "Read-only file system (injected)")

    monkeypatch.setattr(cache_mod, "file_lock", read_only_lock)
    monkeypatch.setattr(StatsCache, "_save", read_only_save)
    check_read_only(c, caplog)


@pytest.mark.skipif(os.environ.get("CSCORE_ALLOW_SYSTEM_CHANGES") != "1" or os.geteuid() != 0,
                    reason="mounts a read-only bind mount: needs root and CSCORE_ALLOW_SYSTEM_CHANGES=1")
def test_read_only_cache_real_mount(tmp_path, caplog):
    src, ro = tmp_path / "c", tmp_path / "ro"
    StatsCache(src).save(KEY, {"expert": stats()}, PARTS)
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True)
        check_read_only(StatsCache(ro), caplog)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


@pytest.mark.slow
def test_run_past_a_file_size_limit_stops_in_one_line(tiny_dirs, tmp_path):
    """A real `cscore run` whose writes fail (EFBIG past 16 kB: scores.parquet and the cache entry
    are bigger, Hydra's config copies are not): one line, exit 1, nothing complete; a re-run
    without the limit finishes."""
    rows = [{"source": f"The council met on day {i} to discuss the new bridge and the river.",
             "hypothesis": f"The council discussed the bridge on day {i}.", "q": i % 5} for i in range(60)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    out, c = tmp_path / "run", tmp_path / "cache"
    args = [sys.executable, "-m", "cscore.cli.main", "run", f"pair.expert.path={tiny_dirs.expert}",
            "pair.amateur.path=null", "pair.amateur.early_exit=2", "pair.name=tiny", "runtime.progress=false",
            "data=table", f"data.path={tmp_path / 't.csv'}", "data.task=summarization", "data.columns.human=[q]",
            f"hydra.run.dir={out}", f"cache.dir={c}"]
    res = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, preexec_fn=file_size_limit(16000),
                         timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == f"cscore: error: cannot write to {out}: File too large"
    assert "Traceback" not in res.stderr
    assert not rundir.is_complete(out) and StatsCache(c).keys() == []
    assert not [p for p in c.iterdir() if p.name.startswith(".tmp")]
    res = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert rundir.is_complete(out) and len(StatsCache(c).keys()) == 1


def test_run_dir_that_cannot_be_made_is_one_line(tmp_path, cscore_main):
    """hydra.run.dir under a file: Hydra's own mkdir failed with a traceback before cscore ran."""
    (tmp_path / "notes.txt").write_text("a file")
    res = cscore_main("run", f"hydra.run.dir={tmp_path / 'notes.txt' / 'run'}", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == f"cscore: error: hydra.run.dir={tmp_path / 'notes.txt' / 'run'}: " \
                                 f"{tmp_path / 'notes.txt'} is a file, not a folder"


@pytest.mark.skipif(os.environ.get("CSCORE_ALLOW_SYSTEM_CHANGES") != "1" or os.geteuid() != 0,
                    reason="mounts a read-only bind mount: needs root and CSCORE_ALLOW_SYSTEM_CHANGES=1")
def test_sweep_dir_on_a_read_only_file_system(tmp_path, cscore_main):
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(src), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(ro)], check=True)
        res = cscore_main("run", "-m", "method.gamma=0.1,0.2", f"hydra.sweep.dir={ro / 'sweep'}", cwd=tmp_path)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert res.returncode == 2 and f"cannot make a folder in {ro} (read-only" in res.stderr
