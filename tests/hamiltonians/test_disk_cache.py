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


def test_an_fcidump_hamiltonian_is_named_alike_on_a_cache_miss_and_hit(monkeypatch, tmp_path):
    """The name is part of a run's checkpoint: a run started on a cache miss must resume on the hit."""
    from hamiltonians import MolecularHamiltonian, MoleculeSpec, build_hamiltonian, write_fcidump
    from tests_support import random_integrals

    monkeypatch.setenv("NNQS_CACHE_DIR", str(tmp_path / "c"))
    h, g = random_integrals(4, seed=2)
    write_fcidump(tmp_path / "r.fcidump", MolecularHamiltonian(h, g, 0.5, 4, 2, 1, "random", None))
    for active in (None, (3, 3)):
        spec = MoleculeSpec(name="r.fcidump", fcidump=str(tmp_path / "r.fcidump"), active=active)
        miss, hit = build_hamiltonian(spec), build_hamiltonian(spec)
        assert miss.description == hit.description == spec.describe()
        assert np.array_equal(miss.eri, hit.eri)
