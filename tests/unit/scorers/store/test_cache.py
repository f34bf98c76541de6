"""The on-disk statistics cache: keys, verified entries, locking, model identity, CLI."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import time

import numpy as np
import pytest

from cscore.errors import CscoreError
from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.models import identity
from cscore.scorers.models.identity import model_identity
from cscore.scorers.store.cache import CacheError, StatsCache, ids_digest, stats_key
from cscore.tests.support.threads import in_threads


def make_stats(n_items=3, temps=(0.5, 1.0, 2.0), seed=0) -> TokenStats:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, size=n_items)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n = int(offsets[-1])
    logp = -rng.exponential(2.0, size=(len(temps), n))
    logp_max = np.maximum(logp, -rng.exponential(0.5, size=(len(temps), n)))
    return TokenStats(temps, offsets, rng.integers(0, 64, size=n).astype(np.int64), logp, logp_max)


def make_parts(**over) -> dict:
    parts = {"model": {"kind": "hub", "id": "org/tiny", "revision": None, "commit": "abc123", "class": "Llama",
                       "early_exit": None},
             "dtype": "torch.float32", "device": "cpu", "temperatures": [0.5, 1.0, 2.0],
             "ids": ids_digest([([1, 2], [3, 4, 5]), ([6], [7])]), "heads": {"expert": None}}
    parts.update(over)
    return parts


def same(a: TokenStats, b: TokenStats) -> bool:
    return a.temperatures == b.temperatures and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in ((a.offsets, b.offsets), (a.token_ids, b.token_ids), (a.logp, b.logp),
                     (a.logp_max, b.logp_max)))


def test_round_trip_is_bit_identical(tmp_path):
    cache = StatsCache(tmp_path)
    exp = make_stats(seed=1)
    ama = TokenStats(exp.temperatures, exp.offsets, exp.token_ids, exp.logp * 0.5 - 1e-300, exp.logp_max / 3)
    stats = {"expert": exp, "amateur": ama}
    key = stats_key(make_parts())
    assert cache.load(key, TokenStats) is None
    cache.save(key, stats, make_parts(), extra={"models": ["org/tiny"]})
    got, meta = cache.load(key, TokenStats)
    assert list(got) == ["expert", "amateur"]
    assert all(same(stats[h], got[h]) for h in stats)
    assert meta == json.loads((cache.path(key) / "meta.json").read_text())
    assert meta["n_items"] == 3 and meta["heads"] == ["expert", "amateur"] and meta["parts"] == make_parts()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp", ".trash"))]


def test_key_depends_on_every_part():
    base = stats_key(make_parts())
    assert base == stats_key(dict(reversed(list(make_parts().items()))))  # order of keys is irrelevant
    assert base == stats_key(make_parts(temperatures=[0.5, 1, 2]))  # 1 == 1.0
    changed = [
        make_parts(model=dict(make_parts()["model"], commit="abc124")),
        make_parts(model=dict(make_parts()["model"], early_exit=1)),
        make_parts(dtype="torch.bfloat16"),
        make_parts(device="cuda"),
        make_parts(temperatures=[0.5, 1.0]),
        make_parts(ids=ids_digest([([1, 2], [3, 4]), ([5, 6], [7])])),
        make_parts(heads={"expert": None, "amateur": 1}),
        {**make_parts(), "token_budget": 4096},
    ]
    keys = {stats_key(p) for p in changed}
    assert base not in keys and len(keys) == len(changed)
    # ids: a token moved from the prompt to the hypothesis is a different item
    assert ids_digest([([1, 2], [3])]) != ids_digest([([1], [2, 3])])
    assert ids_digest([([1, 2], [3])]) == ids_digest([(np.array([1, 2]), (3,))])
    with pytest.raises(TypeError):
        stats_key({"x": object()})


def test_key_recipe_is_stable():
    """Existing cache entries stay valid: the key of fixed parts never changes without a
    CACHE_SCHEMA (or FORMAT_VERSION) bump."""
    assert stats_key(make_parts()) == "17584d2e58bd762b22413f49dbff086b406af989dc4671e0032beb7d4553b89a"


def test_bad_key_prefixes_are_cache_errors(tmp_path):
    cache = StatsCache(tmp_path)
    for key in ("a" * 64, "a" + "b" * 63):
        cache.save(key, {"expert": make_stats()}, make_parts())
    for prefix, message in (("", "empty key prefix"), ("c", "no cache entry starts with 'c'"),
                            ("a", "is ambiguous: aaaaaaaaaaaa, abbbbbbbbbbb")):
        with pytest.raises(CacheError, match=message) as info:
            cache.resolve(prefix)
        assert isinstance(info.value, CscoreError)
    assert cache.resolve("AB") == "a" + "b" * 63


def compute_with_lock(cache: StatsCache, key: str, counter, seed: int = 0, delay: float = 0.0):
    with cache.lock(key):
        hit = cache.load(key, TokenStats)
        if hit is not None:
            return hit.stats
        with open(counter, "a") as f:
            f.write("x\n")
        time.sleep(delay)  # a slow compute: the other jobs are waiting on the lock meanwhile
        stats = {"expert": make_stats(seed=seed)}
        cache.save(key, stats, make_parts())
        return stats


@pytest.mark.parametrize("damage", ["flip", "truncate", "no_meta", "bad_shape"])
def test_damaged_entry_is_removed_and_recomputed(tmp_path, caplog, damage):
    cache = StatsCache(tmp_path / "c")
    key = stats_key(make_parts())
    counter = tmp_path / "calls"
    compute_with_lock(cache, key, counter)
    entry = cache.path(key)
    npz, meta = entry / "stats.npz", entry / "meta.json"
    if damage == "flip":
        data = bytearray(npz.read_bytes())
        for i in range(len(data) // 2, len(data) // 2 + 8):
            data[i] ^= 0xFF
        npz.write_bytes(bytes(data))
    elif damage == "truncate":
        npz.write_bytes(npz.read_bytes()[:100])
    elif damage == "no_meta":
        meta.unlink()
    else:  # checksum fine, but meta.json disagrees on a shape
        m = json.loads(meta.read_text())
        m["arrays"]["0_logp"]["shape"][1] += 1
        meta.write_text(json.dumps(m))
    assert key in cache.keys()
    with caplog.at_level(logging.WARNING, logger="cscore.scorers.store.cache"):
        assert cache.load(key, TokenStats) is None
    assert "corrupted" in caplog.text
    assert not entry.exists() and key not in cache.keys()
    got = compute_with_lock(cache, key, counter)
    assert counter.read_text().count("x") == 2
    assert same(cache.load(key, TokenStats).stats["expert"], got["expert"])


def test_losing_writer_keeps_the_winner(tmp_path):
    cache = StatsCache(tmp_path)
    key = stats_key(make_parts())
    cache.save(key, {"expert": make_stats(seed=1)}, make_parts(), extra={"who": "first"})
    cache.save(key, {"expert": make_stats(seed=2)}, make_parts(), extra={"who": "second"})
    assert cache.load(key, TokenStats).meta["extra"] == {"who": "first"}
    assert same(cache.load(key, TokenStats).stats["expert"], make_stats(seed=1))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    # a corrupted entry in the way is replaced
    (cache.path(key) / "meta.json").unlink()
    cache.save(key, {"expert": make_stats(seed=3)}, make_parts(), extra={"who": "third"})
    assert same(cache.load(key, TokenStats).stats["expert"], make_stats(seed=3))


def test_clear_drops_the_locks_of_crashed_jobs_only(tmp_path):
    cache = StatsCache(tmp_path)
    k1, k2 = stats_key(make_parts()), stats_key(make_parts(device="cuda"))
    for k in (k1, k2):
        cache.save(k, {"expert": make_stats()}, make_parts())
    stale = cache._lock_path(k1)
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.touch()  # left by a job that was killed
    with cache.lock(k2):
        assert cache.clear() > 0
        assert cache._lock_path(k2).exists()  # held: kept
    assert not stale.exists() and cache.keys() == []


def _worker(root, key, counter, seed):
    cache = StatsCache(root)
    stats = compute_with_lock(cache, key, counter, seed, delay=0.3)
    assert same(cache.load(key, TokenStats).stats["expert"], stats["expert"])


def test_concurrent_jobs_compute_once(tmp_path):
    ctx = multiprocessing.get_context("fork")
    key = stats_key(make_parts())
    counter = tmp_path / "calls"
    procs = [ctx.Process(target=_worker, args=(tmp_path / "c", key, counter, seed)) for seed in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0] * 4
    assert counter.read_text().count("x") == 1
    assert StatsCache(tmp_path / "c").keys() == [key]


def test_lock_excludes_threads(tmp_path):
    cache = StatsCache(tmp_path)
    key = stats_key(make_parts())
    inside, overlap = [], []

    def job():
        with cache.lock(key):
            inside.append(1)
            if len(inside) > 1:
                overlap.append(1)
            time.sleep(0.02)
            inside.pop()

    in_threads([job] * 4)
    assert not overlap


# --- model identity -------------------------------------------------------------------------


@pytest.fixture
def tiny_llama(tmp_path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    path = tmp_path / "tiny"
    model.save_pretrained(path)
    return path, model


def loaded(model, path=None, parent=None, exit_layer=None, **info):
    import torch

    from cscore.scorers.models.models import LoadedModel

    info = dict(info, **({"spec": str(path), "path": str(path)} if path else {}))
    lm = LoadedModel(model, None, str(path or "mem"), torch.device("cpu"), torch.float32, info)
    lm.parent, lm.exit_layer = parent, exit_layer
    return lm


def test_model_identity_of_a_directory_is_memoised(tiny_llama, tmp_path, monkeypatch):
    import torch
    from transformers import LlamaForCausalLM

    monkeypatch.setenv("CSCORE_CACHE", str(tmp_path / "cc"))
    path, model = tiny_llama
    calls = []
    real = identity.sha256_file
    monkeypatch.setattr(identity, "sha256_file", lambda p, *a: calls.append(os.path.basename(p)) or real(p, *a))

    first = model_identity(loaded(model, path))
    assert first["kind"] == "files" and first["class"] == "LlamaForCausalLM" and first["early_exit"] is None
    assert sorted(calls) == ["config.json", "model.safetensors"]
    assert len(list((tmp_path / "cc" / "fingerprints").glob("*.json"))) == 2
    calls.clear()
    assert model_identity(loaded(model, path)) == first
    assert calls == []  # memoised: nothing rehashed
    # the same weights elsewhere: same identity (content-addressed)
    copy_dir = tmp_path / "copy"
    model.save_pretrained(copy_dir)
    assert model_identity(loaded(model, copy_dir)) == first

    # one weight changes -> a new identity
    time.sleep(0.01)
    changed = LlamaForCausalLM.from_pretrained(path)
    with torch.no_grad():
        changed.model.layers[0].mlp.up_proj.weight[0, 0] += 1.0
    changed.save_pretrained(path)
    calls.clear()
    second = model_identity(loaded(changed, path))
    assert second != first and "model.safetensors" in calls

    # early exit: the parent's weights + the exit layer
    ee = model_identity(loaded(model, parent=loaded(model, copy_dir), exit_layer=1))
    assert ee == dict(first, early_exit=1)


def test_model_identity_in_memory_and_hub(tiny_llama):
    import torch

    _, model = tiny_llama
    first = model_identity(loaded(model))
    assert first["kind"] == "state_dict"
    assert model_identity(loaded(model)) == first
    with torch.no_grad():
        model.lm_head.weight[3, 2] += 1e-3
    assert model_identity(loaded(model))["sha256"] != first["sha256"]
    model.config._commit_hash = "0123abcd"
    hub = model_identity(loaded(model, spec="org/tiny", path="org/tiny", revision="main"))
    assert hub == {"kind": "hub", "id": "org/tiny", "revision": "main", "commit": "0123abcd",
                   "class": "LlamaForCausalLM", "early_exit": None}
    assert identity.identity_label(hub) == "org/tiny@main"


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_ls_info_clear(tmp_path, cscore_main, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # rich reads it for each command's console

    def cli(*args, root):
        return cscore_main("cache", *args, "--root", str(root), cwd=tmp_path)

    root = tmp_path / "stats"
    cache = StatsCache(root)
    k1, k2 = stats_key(make_parts()), stats_key(make_parts(device="cuda"))
    cache.save(k1, {"expert": make_stats(n_items=3)}, make_parts())
    cache.save(k2, {"expert": make_stats(n_items=7), "amateur": make_stats(n_items=7)},
               make_parts(device="cuda"), extra={"models": ["org/tiny", "org/tiny[:1]"]})

    out = cli("ls", root=root)
    assert out.returncode == 0, out.stderr
    assert k1[:12] in out.stdout and k2[:12] in out.stdout
    assert "org/tiny[:1]" in out.stdout and "0.5,1,2" in out.stdout and "2 entries" in out.stdout
    assert "KiB" in out.stdout

    out = cli("info", k2[:6], root=root)
    assert out.returncode == 0, out.stderr
    assert k2 in out.stdout and "ok (checksum" in out.stdout and '"device": "cuda"' in out.stdout

    out = cli("info", "zzz", root=root)  # a CacheError: one line, no traceback
    assert out.returncode == 1 and out.stderr == f"cscore cache: no cache entry starts with 'zzz' in {root}\n"
    assert cli("clear", root=root).returncode == 1  # neither keys nor --all

    out = cli("clear", k1[:10], root=root)
    assert out.returncode == 0 and "removed 1 entry" in out.stdout
    assert cache.keys() == [k2]
    out = cli("clear", "--all", root=root)
    assert out.returncode == 0 and "removed 1 entry" in out.stdout and "KiB" in out.stdout
    assert cache.keys() == []
    assert "no statistics entries" in cli("ls", root=root).stdout


def test_get_or_compute_computes_once_then_reads_the_entry(tmp_path):
    """lock -> load -> compute -> save: the first call computes and stores (meta None, on_saved
    called), the second reads what was stored (its meta.json) without computing."""
    cache = StatsCache(tmp_path)
    calls, saved = [], []

    def compute(key):
        calls.append(key)
        return {"expert": make_stats(seed=4)}, {"who": "first"}

    got, meta = cache.get_or_compute(make_parts(), compute, TokenStats, on_saved=lambda: saved.append(1))
    assert meta is None and calls == [stats_key(make_parts())] and saved == [1]
    assert same(got["expert"], make_stats(seed=4))
    again, meta = cache.get_or_compute(make_parts(), compute, TokenStats, on_saved=lambda: saved.append(1))
    assert len(calls) == 1 and saved == [1]
    assert meta["key"] == stats_key(make_parts()) and meta["extra"] == {"who": "first"}
    assert meta["temperatures"] == {"expert": [0.5, 1.0, 2.0]} and "kind" not in meta
    assert meta["n_tokens"] == int(make_stats(seed=4).offsets[-1])
    assert same(again["expert"], make_stats(seed=4))


def test_a_reader_of_another_payload_type_is_refused_and_the_entry_kept(tmp_path):
    from cscore.scorers.judge.stats import DecodedPaths

    cache = StatsCache(tmp_path)
    parts = {"kind": "judge_decode", "decode_format": 1, "test": 1}
    got, _ = cache.get_or_compute(parts, lambda key: ({"paths": DecodedPaths.from_lists([[1, 2], []])}, None),
                                  DecodedPaths)
    key = stats_key(parts)
    meta = cache.read(key, DecodedPaths).meta
    assert meta["kind"] == "judge_decode" and meta["decode_format"] == 1 and meta["temperatures"] == {}
    with pytest.raises(TypeError, match="holds judge_decode, not token statistics"):
        cache.load(key, TokenStats)
    assert cache.load(key, DecodedPaths).stats["paths"].paths() == [[1, 2], []]
    with pytest.raises(TypeError, match="not a cache payload"):
        cache.save(stats_key({"x": 1}), {"expert": object()}, {"x": 1})
