"""Localized orbitals: the same Hartree-Fock determinant and the same FCI energy as the canonical ones
(PySCF's own FCI on both sets of integrals), and clear refusals."""
import numpy as np
import pytest

from hamiltonians import InputError, MoleculeSpec, build_hamiltonian
from hamiltonians.molecular import determinant_energy


def fci_energy(ham) -> float:
    from pyscf import fci

    e, _ = fci.direct_spin1.kernel(ham.h1e, ham.eri, ham.n_orbitals, (ham.n_alpha, ham.n_beta), ecore=ham.e_core)
    return float(e)


CHAIN = "; ".join(f"H 0 0 {1.4 * i}" for i in range(6))


@pytest.mark.parametrize("spec", [
    MoleculeSpec(atom=CHAIN),
    MoleculeSpec(atom="O 0 0 0; H 0 0.76 0.59; H 0 -0.76 0.59", active=(5, 6)),  # a frozen core
    MoleculeSpec(atom=CHAIN, charge=1, spin=1),  # ROHF: doubly, singly occupied and virtual blocks
])
def test_localized_orbitals_keep_the_determinant_and_the_fci_energy(spec):
    import dataclasses

    canonical = build_hamiltonian(spec, cache=False)
    local = build_hamiltonian(dataclasses.replace(spec, orbitals="localized"), cache=False)
    assert "localized orbitals" in local.description and local.e_hf == pytest.approx(canonical.e_hf, abs=1e-9)
    for ham in (canonical, local):
        assert determinant_energy(ham.h1e, ham.eri, ham.e_core, ham.n_alpha, ham.n_beta) == pytest.approx(
            canonical.e_hf if spec.active is None else determinant_energy(
                canonical.h1e, canonical.eri, canonical.e_core, canonical.n_alpha, canonical.n_beta), abs=1e-9)
    assert fci_energy(local) == pytest.approx(fci_energy(canonical), abs=1e-9)
    assert not np.allclose(local.h1e, canonical.h1e, atol=1e-3)  # the orbitals did change


def test_localized_orbitals_are_refused_for_fcidump_and_unknown_kinds(tmp_path):
    dump = tmp_path / "x.fcidump"
    dump.write_text("")
    with pytest.raises(InputError, match="need a geometry"):
        MoleculeSpec(fcidump=str(dump), orbitals="localized")
    with pytest.raises(InputError, match="orbitals must be one of"):
        MoleculeSpec(atom=CHAIN, orbitals="natural")


def test_the_cache_key_tells_the_orbitals_apart_and_keeps_the_canonical_one():
    canonical = MoleculeSpec(atom=CHAIN)
    assert MoleculeSpec(atom=CHAIN, orbitals="localized").key() != canonical.key()
    assert MoleculeSpec(atom=CHAIN, orbitals="canonical").key() == canonical.key()
