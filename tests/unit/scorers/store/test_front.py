"""The statistics cache's front index (scorers/store/front.py): the device known without torch, model
folders fingerprinted whole, records complete or ignored, dropped by ``clear``."""

import numpy as np

from cscore.scorers.engine.stats import TokenStats
from cscore.scorers.engine.tokenize import EncodedItem
from cscore.scorers.store import front
from cscore.scorers.store.cache import FRONT_DIR, StatsCache

ITEMS = [EncodedItem("a prompt", [5, 6, 7], [8, 9], False), EncodedItem("", [], [1], True)]


def test_the_device_is_known_without_torch_only_where_it_is_certain(monkeypatch):
    monkeypatch.setattr(front, "no_accelerator", lambda: True)
    assert front.device_and_dtype("auto", "auto") == ("cpu", "torch.float32")
    assert front.device_and_dtype("auto", "bf16") == ("cpu", "torch.bfloat16")
    assert front.device_and_dtype("cuda:1", "auto") == ("cuda", "torch.bfloat16")
    assert front.device_and_dtype("tpu", "auto") is None and front.device_and_dtype("cpu", "int8") is None
    monkeypatch.setattr(front, "no_accelerator", lambda: False)  # a GPU may be there: only torch knows auto
    assert front.device_and_dtype("auto", "auto") is None
    assert front.device_and_dtype("cpu", "auto") == ("cpu", "torch.float32")


def test_a_folder_fingerprint_covers_every_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert front.folder_fingerprint(tmp_path) is None  # no weights: keyed by its tensors, once loaded
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "tokenizer.json").write_text('{"v": 1}')
    first = front.folder_fingerprint(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"v": 2}')
    assert front.folder_fingerprint(tmp_path) not in (None, first)


def test_a_record_reads_back_and_a_damaged_one_is_none(tmp_path):
    index = front.FrontIndex(tmp_path)
    index.write("k" * 64, ITEMS, {"passes": [{"label": "expert", "parts": {"ids": "x"}}], "models": {}})
    items, record = index.read("k" * 64)
    assert items == ITEMS and record["passes"][0]["label"] == "expert"
    (tmp_path / FRONT_DIR / f"{'k' * 64}.npz").write_bytes(b"not the arrays")
    assert index.read("k" * 64) is None and index.read("m" * 64) is None


def test_the_key_covers_the_code_and_the_libraries():
    assert front.front_key({"a": 1}) == front.front_key({"a": 1}) != front.front_key({"a": 2})
    assert len(front.code_digest()) == 64 and "transformers" in front.library_versions()


def test_clear_drops_the_records_with_the_entries(tmp_path):
    cache = StatsCache(tmp_path)
    stats = TokenStats((1.0,), np.array([0, 1], dtype=np.int64), np.array([3]), np.zeros((1, 1)), np.zeros((1, 1)))
    cache.save("a" * 64, {"expert": stats}, {"ids": "x"})
    front.FrontIndex(tmp_path).write("b" * 64, ITEMS, {"passes": [], "models": {}})
    cache.clear()
    assert not cache.keys() and not (tmp_path / FRONT_DIR).exists()
