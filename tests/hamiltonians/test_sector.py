import numpy as np
import pytest

from hamiltonians import sector_basis, sector_dim, sector_hamiltonian
from hamiltonians.sector import sector_states


def test_sector_basis_order_and_counts():
    occ = sector_basis(3, 2, 1)
    assert occ.shape == (sector_dim(3, 2, 1), 6) == (9, 6) and occ.dtype == np.uint8
    np.testing.assert_array_equal(occ[:, 0::2].sum(1), 2)  # alpha = even spin-orbitals
    np.testing.assert_array_equal(occ[:, 1::2].sum(1), 1)
    ints = occ.astype(np.int64) @ (1 << np.arange(6))
    assert np.all(np.diff(ints) > 0)
    np.testing.assert_array_equal(ints, sector_states(3, 2, 1))
    np.testing.assert_array_equal(occ[0], [1, 1, 1, 0, 0, 0])  # lowest integer: the HF determinant


def _openfermion_sector_block(ham, occ):
    """The same block cut out of OpenFermion's full-space matrix (qubit 0 = most significant bit)."""
    from openfermion import get_sparse_operator

    from hamiltonians import get_qubit_operator

    n_qubits = ham.n_qubits
    full = get_sparse_operator(get_qubit_operator(ham), n_qubits=n_qubits).tocsr()
    index = occ.astype(np.int64) @ (1 << np.arange(n_qubits - 1, -1, -1))
    return full[index][:, index].toarray()


@pytest.mark.parametrize("name", ["H2", "LiH"])
def test_sector_matrix_equals_openfermion_full_space_block(hams, name):
    ham = hams[name]
    occ, h = sector_hamiltonian(ham)
    expected = _openfermion_sector_block(ham, occ)
    assert np.abs(expected.imag).max() < 1e-12
    np.testing.assert_allclose(h.toarray(), expected.real, atol=1e-12)


def test_sector_matrix_is_symmetric_and_contains_hf_energy(hams):
    ham = hams["H2O"]
    occ, h = sector_hamiltonian(ham)
    assert h.shape == (441, 441)
    assert abs(h - h.T).max() < 1e-12
    assert h[0, 0] == pytest.approx(ham.e_hf, abs=1e-9)
    assert np.linalg.eigvalsh(h.toarray())[0] < ham.e_hf
