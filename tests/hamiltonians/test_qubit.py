import numpy as np
import pytest

from hamiltonians import MoleculeSpec, build_hamiltonian, get_qubit_operator


def _basis_state_energy(qubit_operator, occupied: list[int]) -> float:
    """<x|H|x> of a computational basis state: only I/Z strings contribute, Z|1> = -|1>."""
    occ = set(occupied)
    total = 0.0
    for term, coef in qubit_operator.terms.items():
        if all(p == "Z" for _, p in term):
            total += coef.real * (-1) ** sum(q in occ for q, _ in term)
    return total


def _hf_occupied(ham) -> list[int]:
    return [2 * p for p in range(ham.n_alpha)] + [2 * p + 1 for p in range(ham.n_beta)]


@pytest.mark.parametrize("name", ["H2", "LiH", "H2O"])
def test_hf_determinant_expectation_is_the_pyscf_hf_energy(hams, name):
    ham = hams[name]
    qop = get_qubit_operator(ham)
    assert _basis_state_energy(qop, _hf_occupied(ham)) == pytest.approx(ham.e_hf, abs=1e-9)


def test_hf_determinant_expectation_open_shell():
    ham = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1), cache=False)
    qop = get_qubit_operator(ham)
    assert _basis_state_energy(qop, _hf_occupied(ham)) == pytest.approx(ham.e_hf, abs=1e-9)


def _fermion_operator_by_loops(ham):
    """Slow twin: H written term by term from the formula in hamiltonians.integrals."""
    from openfermion import FermionOperator

    n = ham.n_orbitals
    op = FermionOperator((), ham.e_core)
    for p in range(n):
        for q in range(n):
            for s in (0, 1):
                op += FermionOperator(((2 * p + s, 1), (2 * q + s, 0)), ham.h1e[p, q])
    for p, q, r, t in np.ndindex(n, n, n, n):
        v = 0.5 * ham.eri[p, q, r, t]
        if abs(v) < 1e-14:
            continue
        for s in (0, 1):
            for u in (0, 1):  # 1/2 (pq|rt) a+_ps a+_ru a_tu a_qs
                op += FermionOperator(((2 * p + s, 1), (2 * r + u, 1), (2 * t + u, 0), (2 * q + s, 0)), v)
    return op


@pytest.mark.parametrize("name", ["H2", "LiH"])
def test_qubit_operator_matches_term_by_term_construction(hams, name):
    from openfermion import jordan_wigner

    ham = hams[name]
    expected = jordan_wigner(_fermion_operator_by_loops(ham))
    difference = get_qubit_operator(ham) - expected
    difference.compress(abs_tol=1e-12)
    assert not difference.terms


def _untruncated_tensors(ham):
    """The convention of hamiltonians.qubit written out by hand, nothing dropped."""
    n = ham.n_orbitals
    one, two = np.zeros((2 * n, 2 * n)), np.zeros((2 * n,) * 4)
    for s in (0, 1):
        one[s::2, s::2] = ham.h1e
        for t in (0, 1):
            two[s::2, t::2, t::2, s::2] = 0.5 * ham.eri.transpose(0, 2, 3, 1)
    return one, two


def test_openfermion_tensors_drop_only_what_does_not_change_the_energy(hams):
    from openfermion import InteractionOperator, jordan_wigner

    from hamiltonians.qubit import spin_orbital_tensors
    from hamiltonians.sector import sector_matrix, sector_states

    ham = hams["H2O"]
    one, two = spin_orbital_tensors(ham)
    full_one, full_two = _untruncated_tensors(ham)
    assert np.abs(one - full_one).max() < 1e-8 and np.abs(two - full_two).max() < 1e-8
    states = sector_states(ham.n_orbitals, ham.n_alpha, ham.n_beta)
    full = sector_matrix(jordan_wigner(InteractionOperator(ham.e_core, full_one, full_two)), states)
    ours = sector_matrix(get_qubit_operator(ham), states)
    assert np.linalg.eigvalsh(ours.toarray())[0] == pytest.approx(np.linalg.eigvalsh(full.toarray())[0], abs=1e-12)
