import numpy as np

from hamiltonians import cache


def test_round_trip_and_corruption(monkeypatch, tmp_path):
    monkeypatch.setenv("NNQS_CACHE_DIR", str(tmp_path / "c"))
    assert cache.load("k", "x", arrays=True) is None
    cache.save("k", "x", {"a": 1.5}, {"m": np.eye(2)})
    meta, arrays = cache.load("k", "x", arrays=True)
    assert meta == {"a": 1.5} and np.array_equal(arrays["m"], np.eye(2))
    (tmp_path / "c" / "k.x.npz").write_bytes(b"not a zip")
    assert cache.load("k", "x", arrays=True) is None
    (tmp_path / "c" / "k.x.json").write_text("[1, 2")
    assert cache.load("k", "x") is None


def test_unwritable_cache_is_skipped(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NNQS_CACHE_DIR", str(blocker / "sub"))
    cache.save("k", "x", {"a": 1})
    assert cache.load("k", "x") is None


def test_default_location(monkeypatch):
    monkeypatch.delenv("NNQS_CACHE_DIR")
    assert str(cache.cache_dir()).endswith(".cache/nnqs")
