import numpy as np
import pytest

from hamiltonians import MoleculeSpec, build_hamiltonian, get_spec
from hamiltonians.integrals import determinant_energy, freeze_core

OH = MoleculeSpec(name="OH", atom="O 0 0 0; H 0 0 0.9697", spin=1)


def test_integrals_have_the_documented_shapes_and_symmetries(hams):
    ham = hams["H2O"]
    n = ham.n_orbitals
    assert (n, ham.n_qubits, ham.n_alpha, ham.n_beta, ham.n_electrons) == (7, 14, 5, 5, 10)
    assert ham.h1e.shape == (n, n) and ham.eri.shape == (n,) * 4
    assert ham.h1e.dtype == ham.eri.dtype == np.float64
    np.testing.assert_allclose(ham.h1e, ham.h1e.T, atol=1e-12)
    for axes in ((1, 0, 2, 3), (0, 1, 3, 2), (2, 3, 0, 1)):
        np.testing.assert_allclose(ham.eri, ham.eri.transpose(axes), atol=1e-12)


@pytest.mark.parametrize("name", ["H2", "LiH", "H2O"])
def test_lowest_determinant_energy_is_the_rhf_energy(hams, name):
    ham = hams[name]
    e = determinant_energy(ham.h1e, ham.eri, ham.e_core, ham.n_alpha, ham.n_beta)
    assert e == pytest.approx(ham.e_hf, abs=1e-9)


def test_open_shell_uses_rohf_orbitals():
    ham = build_hamiltonian(OH, cache=False)
    assert (ham.n_alpha, ham.n_beta, ham.reference) == (5, 4, "ROHF")
    e = determinant_energy(ham.h1e, ham.eri, ham.e_core, ham.n_alpha, ham.n_beta)
    assert e == pytest.approx(ham.e_hf, abs=1e-9)


def test_active_space_in_ao_basis_equals_frozen_core_in_mo_basis(hams):
    full = hams["H2O"]
    active = build_hamiltonian(get_spec("H2O", active=(4, 4)), cache=False)
    h1e, eri, e_core = freeze_core(full.h1e, full.eri, full.e_core, n_core=3, n_active=4)
    assert (active.n_orbitals, active.n_alpha, active.n_beta) == (4, 2, 2)
    np.testing.assert_allclose(active.h1e, h1e, atol=1e-10)
    np.testing.assert_allclose(active.eri, eri, atol=1e-10)
    assert active.e_core == pytest.approx(e_core, abs=1e-9)
    # The frozen core does not change the HF determinant.
    assert determinant_energy(h1e, eri, e_core, 2, 2) == pytest.approx(full.e_hf, abs=1e-9)
