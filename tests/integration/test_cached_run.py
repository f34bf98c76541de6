"""A ``cscore run`` whose statistics are all in the cache imports neither torch nor transformers (issue
47 item 8: their import was most of a cached run's 7-40 s) and writes what the run that computed
them wrote; a changed model folder, or an entry removed from the cache, takes the full path again."""

import json
import shutil
import subprocess
import sys

import pytest

from cscore.tests.support.cli import run_cscore, tiny_args

# cscore's main in a fresh interpreter; at exit, the heavy modules it loaded, on stderr
COMMAND = """
import sys
from cscore.cli.main import main
try:
    main(sys.argv[1:])
finally:
    print("heavy loaded:", [m for m in ("torch", "transformers") if m in sys.modules], file=sys.stderr)
"""
SAME = ("scores.parquet", "correlations.csv", "correlations.md")
TIMED = ("passes", "score_seconds", "statistics_seconds_this_run", "peak_rss_mb")  # this run's own figures


def cscore_in_fresh_process(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", COMMAND, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def untimed(run_dir) -> dict:
    """metrics.json less the figures a run measures of itself (seconds, memory)."""
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["speed"] = {k: v for k, v in metrics["speed"].items() if k not in TIMED}
    return metrics


@pytest.fixture(scope="module")
def first_run(tiny_dirs, tmp_path_factory):
    """The tiny pair's contrast run into an empty cache (computed), then the same run again: the
    second reads its statistics from the cache the full way and records them in the front index."""
    root = tmp_path_factory.mktemp("cached")
    args = [*tiny_args(tiny_dirs), f"cache.dir={root / 'cache'}"]
    for name in ("computed", "read"):
        res = run_cscore("run", *args, f"hydra.run.dir={root / name}", cwd=root)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root, args


def test_a_cached_run_imports_no_torch_and_writes_the_same(first_run):
    root, args = first_run
    assert list((root / "cache" / "front").glob("*.json")), "the full path recorded no front index entry"
    res = cscore_in_fresh_process("run", *args, f"hydra.run.dir={root / 'kept'}", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "heavy loaded: []" in res.stderr, res.stderr[-3000:]
    assert "encoded as the run that cached their statistics encoded them" in res.stderr + res.stdout
    for name in SAME:
        assert (root / "kept" / name).read_bytes() == (root / "computed" / name).read_bytes(), name
    kept, computed = untimed(root / "kept"), untimed(root / "computed")
    assert kept["speed"]["weights"] == {"expert": "not loaded", "amateur": "not loaded"}
    assert kept["speed"]["from_cache"] and not computed["speed"]["from_cache"]
    for key in computed:  # the statistics' figures, the models, the scores: as the run that computed them
        if key != "speed":
            assert kept[key] == computed[key], key
    assert kept["speed"]["threads"] == untimed(root / "read")["speed"]["threads"] == 1


def test_a_changed_tokenizer_file_takes_the_full_path(first_run, tiny_dirs, tmp_path):
    """The front index keys every file of a model folder: a tokenizer file edited in place misses it
    (the full path, with torch, tokenizes again), though the cache entries themselves are unchanged."""
    root, args = first_run
    expert = shutil.copytree(tiny_dirs.expert, tmp_path / "expert")
    args = [a.replace(f"pair.expert.path={tiny_dirs.expert}", f"pair.expert.path={expert}") for a in args]
    res = cscore_in_fresh_process("run", *args, f"hydra.run.dir={tmp_path / 'copy'}", cwd=tmp_path)
    assert res.returncode == 0 and "heavy loaded: ['torch', 'transformers']" in res.stderr, res.stderr[-3000:]
    res = cscore_in_fresh_process("run", *args, f"hydra.run.dir={tmp_path / 'copy_kept'}", cwd=tmp_path)
    assert "heavy loaded: []" in res.stderr, res.stderr[-3000:]
    config = expert / "tokenizer_config.json"
    config.write_text(json.dumps(dict(json.loads(config.read_text()), model_max_length=12345)))
    res = cscore_in_fresh_process("run", *args, f"hydra.run.dir={tmp_path / 'edited'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "heavy loaded: ['torch', 'transformers']" in res.stderr, res.stderr[-3000:]
    assert (tmp_path / "edited" / "scores.parquet").read_bytes() == (root / "computed" / "scores.parquet").read_bytes()


def test_an_entry_removed_from_the_cache_is_computed_again(first_run, tmp_path):
    """A record whose entry is gone (``cscore cache clear`` also drops the records) is no shortcut: the
    full path computes the statistics again."""
    root, args = first_run
    cache = tmp_path / "cache"
    shutil.copytree(root / "cache", cache)
    args = [a if not a.startswith("cache.dir=") else f"cache.dir={cache}" for a in args]
    for entry in cache.iterdir():
        if len(entry.name) == 64:
            shutil.rmtree(entry)
    res = cscore_in_fresh_process("run", *args, f"hydra.run.dir={tmp_path / 'again'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "heavy loaded: ['torch', 'transformers']" in res.stderr
    assert not untimed(tmp_path / "again")["speed"]["from_cache"]
    assert (tmp_path / "again" / "scores.parquet").read_bytes() == (root / "computed" / "scores.parquet").read_bytes()
