"""nnqs.FCISolver in PySCF's CASCI against PySCF's own FCI solver; the CI-vector bridge against an
exact eigenvector; one clear ValueError for each kind of bad input."""
import numpy as np
import pytest

import nnqs
from nnqs.solver import active_hamiltonian
from nnqs.vmc.civector import reorder_sign, to_pyscf
from tests_support import sector_tokens


@pytest.fixture(scope="module")
def water():
    from pyscf import gto, scf

    mol = gto.M(atom="O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587", basis="sto-3g", verbose=0)
    return scf.RHF(mol).run()


def test_the_ci_bridge_maps_an_exact_eigenvector_onto_pyscfs():
    """Our H diagonalised on the whole sector, mapped with the reordering sign, is PySCF's FCI vector."""
    from pyscf import fci

    from hamiltonians import MolecularHamiltonian
    from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
    from nnqs.vmc.selection import set_hamiltonian
    from tests_support import random_integrals

    h1e, eri = random_integrals(4, seed=3)
    ham = MolecularHamiltonian(h1e=h1e, eri=eri, e_core=0.0, n_orbitals=4, n_alpha=2, n_beta=2, description="r", e_hf=None)
    configs = sector_tokens(4, 2, 2)
    w, v = np.linalg.eigh(set_hamiltonian(CompactHamiltonian.from_molecular(ham), configs).toarray())
    e_ref, ci_ref = fci.direct_spin1.kernel(h1e, eri, 4, (2, 2), tol=1e-12)
    assert w[0] == pytest.approx(e_ref, abs=1e-9)
    ours = to_pyscf(configs, v[:, 0], 4, (2, 2))
    assert abs(abs(float((ours * ci_ref).sum())) - 1) < 1e-8
    assert set(np.unique(reorder_sign(configs)).tolist()) == {-1.0, 1.0}  # the sign is exercised


def test_casci_with_the_network_equals_pyscfs_fci_solver(water):
    from pyscf import mcscf

    reference = mcscf.CASCI(water, 4, 4)
    reference.verbose = 0
    reference.kernel()
    mc = mcscf.CASCI(water, 4, 4)
    mc.verbose = 0
    mc.fcisolver = nnqs.FCISolver(steps=30, seed=1)
    assert mc.fcisolver.steps == 30 and mc.fcisolver.config().seed == 1
    mc.kernel()
    assert mc.e_tot == pytest.approx(reference.e_tot, abs=1e-4)  # 0.1 mHa
    assert mc.e_tot >= reference.e_tot - 1e-9  # variational
    dm1 = mc.fcisolver.make_rdm1(mc.ci, 4, (2, 2))
    dm1_ref = reference.fcisolver.make_rdm1(reference.ci, 4, (2, 2))
    assert np.abs(dm1 - dm1_ref).max() < 1e-3 and np.trace(dm1) == pytest.approx(4.0, abs=1e-10)
    assert np.allclose(dm1, dm1.T, atol=1e-12)
    dm1b, dm2 = mc.fcisolver.make_rdm12(mc.ci, 4, (2, 2))
    assert np.einsum("ppqq->", dm2) == pytest.approx(4 * 3, abs=1e-8)  # N(N-1)
    h1, e_core = mc.get_h1eff()
    h2 = mc.get_h2eff()
    from pyscf import ao2mo

    contraction = np.einsum("pq,pq->", h1, dm1b) + 0.5 * np.einsum("pqrs,pqrs->", ao2mo.restore(1, h2, 4), dm2)
    assert contraction + e_core == pytest.approx(mc.e_tot, abs=1e-9)  # energy and 2-RDM agree
    s2, multiplicity = mc.fcisolver.spin_square(mc.ci, 4, (2, 2))
    assert s2 < 1e-3 and multiplicity == pytest.approx(1.0, abs=2e-3)
    assert np.isfinite(mc.fcisolver.e_sampled)
    assert mc.fcisolver.core_weight > 0.999  # the core holds nearly all of the state


def test_a_core_smaller_than_the_sector_gives_the_sampled_rdm_with_errors(water):
    """CAS(4,4) has 36 determinants; a core of at most 12 leaves part of the state outside it, whose
    1-RDM then comes from samples (the estimator itself is held against PySCF in test_sampled_rdm)."""
    from pyscf import mcscf

    reference = mcscf.CASCI(water, 4, 4)
    reference.verbose = 0
    reference.kernel()
    mc = mcscf.CASCI(water, 4, 4)
    mc.verbose = 0
    mc.fcisolver = nnqs.FCISolver(steps=30, seed=1, core_max=12, teacher_max=12)
    mc.kernel()
    solver = mc.fcisolver
    assert 0.9 < solver.core_weight < 1.0
    dm1 = solver.rdm1_sampled
    assert dm1.shape == (4, 4) and np.allclose(dm1, dm1.T) and np.trace(dm1) == pytest.approx(4.0, abs=1e-9)
    assert solver.rdm1_stderr.shape == (4, 4) and (solver.rdm1_stderr >= 0).all()
    dm1_ref = reference.fcisolver.make_rdm1(reference.ci, 4, (2, 2))
    assert np.abs(dm1 - dm1_ref).max() < 2e-2  # the network's state, near FCI's


@pytest.mark.parametrize("args, words", [
    ((np.eye(3), np.zeros((3, 3, 3, 3)), 3, (2, 1, 0)), "nelec must be an int or a pair"),
    ((np.eye(3), np.zeros((3, 3, 3, 3)), 3, "4"), "nelec must be an int or a pair"),
    ((np.eye(3), np.zeros((3, 3, 3, 3)), 3, (4, 1)), "does not fit in 3 orbitals"),
    ((np.triu(np.ones((3, 3))), np.zeros((3, 3, 3, 3)), 3, 2), "h1e is not symmetric"),
    ((np.eye(4), np.zeros((3, 3, 3, 3)), 3, 2), "h1e must be a finite real (3, 3)"),
    ((np.eye(3), np.zeros(7), 3, 2), "eri is not an active-space integral array"),
    ((np.eye(3), np.arange(81.0).reshape(3, 3, 3, 3), 3, 2), "8-fold symmetry"),
    ((np.eye(40), np.zeros(1), 40, (20, 20)), "determinants; FCISolver holds at most"),
])
def test_bad_input_is_one_clear_value_error(args, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        active_hamiltonian(*args)


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="unknown setting 'stepz'"):
        nnqs.FCISolver(stepz=3)


def test_state_averaged_casscf_is_refused_in_one_clear_line(water):
    from pyscf import mcscf

    mc = mcscf.CASSCF(water, 4, 4)
    mc.verbose = 0
    mc.fcisolver = nnqs.FCISolver(steps=2)
    mc = mcscf.state_average_(mc, [0.5, 0.5])
    with pytest.raises(ValueError, match="ground state only"):
        mc.kernel()
