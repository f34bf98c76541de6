"""Property-based tests of the statistics cache: any statistics round-trip bit for bit; any damage
to a stored entry (truncation, flipped bits, deleted or replaced files, adversarial JSON in
meta.json) is a miss that removes the entry, never an exception and never different numbers;
leftovers of a killed writer are never read as an entry."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.store.cache import StatsCache, ids_digest, stats_key

FAST = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
HEADS = ("expert", "amateur")


@st.composite
def token_stats(draw) -> TokenStats:
    temps = tuple(draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0]), min_size=1, max_size=3, unique=True)))
    lengths = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    floats = st.floats(-1e4, 0.0, allow_nan=False) | st.sampled_from([-np.inf, -0.0, -1e-300])
    logp = np.array(draw(st.lists(floats, min_size=n * len(temps), max_size=n * len(temps))),
                    dtype=np.float64).reshape(len(temps), n)
    ids = np.array(draw(st.lists(st.integers(0, 2 ** 40), min_size=n, max_size=n)), dtype=np.int64)
    return TokenStats(temps, offsets, ids, logp, np.maximum(logp, -1.0))


def parts(temps) -> dict:
    return {"model": {"kind": "dir", "sha256": "0" * 64}, "dtype": "torch.float32", "device": "cpu",
            "temperatures": list(temps), "ids": ids_digest([([1], [2])]), "heads": {h: None for h in HEADS}}


def same(a: TokenStats, b: TokenStats) -> bool:
    return a.temperatures == b.temperatures and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in ((a.offsets, b.offsets), (a.token_ids, b.token_ids), (a.logp, b.logp), (a.logp_max, b.logp_max)))


@FAST
@given(token_stats(), token_stats())
def test_any_statistics_round_trip_bit_for_bit(tmp_path_factory, expert, amateur):
    cache = StatsCache(tmp_path_factory.mktemp("c"))
    key = stats_key(parts(expert.temperatures))
    cache.save(key, {"expert": expert, "amateur": amateur}, parts(expert.temperatures))
    got = cache.load(key, TokenStats)
    assert list(got.stats) == list(HEADS)
    assert same(got.stats["expert"], expert) and same(got.stats["amateur"], amateur)


@st.composite
def damage(draw):
    """(file, kind, argument) of one damage to an entry."""
    target = draw(st.sampled_from(["stats.npz", "meta.json"]))
    kind = draw(st.sampled_from(["truncate", "flip", "delete", "replace", "json", "swap_heads", "empty_dir"]))
    return target, kind, draw(st.integers(0, 2 ** 31)), draw(st.binary(max_size=32))


def apply(entry, target, kind, where, blob) -> bool:
    """Damage ``entry``; False when the damage left the files as they were."""
    f = entry / ("meta.json" if kind in ("json", "swap_heads") else target)
    data = f.read_bytes()
    if kind == "truncate":
        f.write_bytes(data[:where % max(len(data), 1)])
    elif kind == "flip":
        b = bytearray(data)
        b[where % len(b)] ^= 1 << (where % 8)
        f.write_bytes(bytes(b))
    elif kind == "delete":
        f.unlink()
    elif kind == "replace":
        f.write_bytes(blob)
    elif kind == "json":  # adversarial meta.json: deep nesting, a huge number, a list
        f.write_text(["[" * 50000, "9" * 5000, "[]", "null", '{"key": 1}'][where % 5])
    elif kind == "swap_heads":  # a well-formed meta.json that lies: the heads swapped
        meta = json.loads(data)
        meta["heads"] = meta["heads"][::-1]
        f.write_text(json.dumps(meta, indent=1, sort_keys=True))
    else:  # a crash between mkdir and the first write
        shutil.rmtree(entry)
        entry.mkdir()
    return not (f.exists() and f.read_bytes() == data) or kind == "empty_dir"


@FAST
@given(token_stats(), damage())
def test_damaged_entries_are_misses_never_other_numbers(tmp_path_factory, stats, dmg):
    cache = StatsCache(tmp_path_factory.mktemp("c"))
    key = stats_key(parts(stats.temperatures))
    other = TokenStats(stats.temperatures, stats.offsets, stats.token_ids, stats.logp - 1.0, stats.logp_max - 1.0)
    cache.save(key, {"expert": stats, "amateur": other}, parts(stats.temperatures))
    changed = apply(cache.path(key), *dmg)
    got = cache.load(key, TokenStats)  # never raises
    if got is None:
        assert changed and not cache.path(key).exists() and key not in cache.keys()
    else:  # only a damage that changed nothing
        assert not changed
        assert same(got.stats["expert"], stats) and same(got.stats["amateur"], other)
    cache.save(key, {"expert": stats, "amateur": other}, parts(stats.temperatures))  # recomputed
    assert same(cache.load(key, TokenStats).stats["expert"], stats)


def test_leftovers_of_a_killed_writer_are_not_entries(tmp_path):
    """A writer killed before its rename leaves a .tmp-* dir; it is neither a key nor readable,
    and the next save publishes a complete entry beside it."""
    cache = StatsCache(tmp_path)
    stats = TokenStats((1.0,), np.array([0, 2]), np.array([3, 4]), np.array([[-1.0, -2.0]]), np.array([[-1.0, -1.0]]))
    key = stats_key(parts((1.0,)))
    half = tmp_path / f".tmp-{key[:16]}-dead"
    half.mkdir()
    (half / "stats.npz").write_bytes(b"PK\x03\x04 half")
    assert cache.keys() == [] and cache.load(key, TokenStats) is None and key not in cache
    cache.save(key, {"expert": stats}, parts((1.0,)))
    assert cache.keys() == [key] and same(cache.load(key, TokenStats).stats["expert"], stats)
    os.utime(half, (0, 0))  # older than STALE_TMP_SECONDS: `cscore cache clear --all` removes it
    cache.clear()
    assert not half.exists()
