import pytest

from hamiltonians import MoleculeSpec, exact_references, get_spec, write_fcidump
from hamiltonians.cache import cache_dir

KEYS = {"n_orbitals", "n_qubits", "n_alpha", "n_beta", "sector_dim", "e_hf", "e_ccsd", "e_ccsd_t",
        "e_exact", "e_core", "method", "name", "description", "wall_s"}


def test_h2_references_and_sizes():
    refs = exact_references(get_spec("H2"), "ed", cache=False)
    assert (refs.n_orbitals, refs.n_qubits, refs.n_alpha, refs.n_beta, refs.sector_dim) == (2, 4, 1, 1, 4)
    assert refs.e_ccsd_t == pytest.approx(refs.e_exact, abs=1e-7)  # CCSD is exact for 2 electrons
    assert refs.e_hf > refs.e_exact
    assert KEYS <= set(refs.to_dict())


def test_lih_references_are_ordered():
    refs = exact_references(get_spec("LiH"), cache=False)
    assert refs.e_hf > refs.e_ccsd > refs.e_exact - 1e-6
    assert abs(refs.e_ccsd_t - refs.e_exact) < 1e-4


def test_open_shell_gets_uccsd_t():
    refs = exact_references(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1), cache=False)
    assert refs.reference == "ROHF"
    assert abs(refs.e_ccsd_t - refs.e_exact) < 2e-3


def test_fcidump_input_has_no_coupled_cluster(hams, tmp_path):
    path = tmp_path / "lih.fcidump"
    write_fcidump(path, hams["LiH"])
    refs = exact_references(MoleculeSpec(fcidump=str(path)), cache=False)
    assert refs.e_ccsd is None and refs.e_ccsd_t is None
    assert refs.e_hf == pytest.approx(hams["LiH"].e_hf, abs=1e-10)
    assert refs.reference == "FCIDUMP"


def test_second_run_comes_from_cache_and_corrupt_entries_are_recomputed():
    spec = get_spec("LiH", active=(4, 2))
    first = exact_references(spec)
    second = exact_references(spec)
    assert not first.from_cache and second.from_cache
    assert second.to_dict() | {"wall_s": 0, "from_cache": 0} == first.to_dict() | {"wall_s": 0, "from_cache": 0}
    for path in cache_dir().glob(f"{spec.key()}.*"):
        path.write_bytes(b"\x00garbage{")
    third = exact_references(spec)
    assert not third.from_cache and third.e_exact == pytest.approx(first.e_exact, abs=1e-10)
    ed = exact_references(spec, "ed")  # another method: exact part recomputed, the rest cached
    assert ed.e_exact == pytest.approx(first.e_exact, abs=1e-8) and ed.e_ccsd == third.e_ccsd


def test_a_cached_reference_that_is_not_finite_is_recomputed():
    import json

    spec = get_spec("H2")
    first = exact_references(spec)
    path = cache_dir() / f"{spec.key()}.refs.json"
    stored = json.loads(path.read_text())
    path.write_text(json.dumps(stored | {"e_ccsd_t": float("nan")}))  # NaN: valid to json, a float to Python
    again = exact_references(spec)
    assert not again.from_cache and again.e_ccsd_t == pytest.approx(first.e_ccsd_t, abs=1e-10)


def test_a_system_too_large_for_fci_still_gets_hf_and_ccsd_t(monkeypatch):
    """``vmc`` past FCI's limit: no exact energy, but HF and CCSD(T) as the coupled-cluster solver gives them."""
    import hamiltonians.sizes as sizes
    from nnqs.vmc.run import references_for

    spec = get_spec("LiH")
    full = exact_references(spec, cache=False)
    monkeypatch.setattr(sizes, "FCI_MAX_DIM", 10)
    with pytest.raises(Exception, match="too large for --method fci"):
        exact_references(spec, cache=False)
    refs = references_for(spec)
    assert refs["e_exact"] is None
    assert refs["e_hf"] == pytest.approx(full.e_hf, abs=1e-9)
    assert refs["e_ccsd_t"] == pytest.approx(full.e_ccsd_t, abs=1e-8)
    none = exact_references(spec, method="none", cache=False)
    assert none.e_exact is None and none.e_ccsd == pytest.approx(full.e_ccsd, abs=1e-8)
