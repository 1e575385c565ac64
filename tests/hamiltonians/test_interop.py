"""from_pyscf and from_openfermion: a user's PySCF SCF object or OpenFermion InteractionOperator
passed straight in; energies checked against PySCF's own solvers and OpenFermion's sparse operator."""
import numpy as np
import pytest

from hamiltonians import InputError, exact_energy, from_openfermion, from_pyscf
from hamiltonians.qubit import get_interaction_operator

LIH = "Li 0 0 0; H 0 0 1.5949"
H2O = "O 0 0 0; H 0.7572 0 0.5865; H -0.7572 0 0.5865"
OH = "O 0 0 0; H 0 0 0.9697"


def scf_of(atom, spin=0, basis="sto-3g"):
    from pyscf import gto, scf

    mol = gto.M(atom=atom, basis=basis, spin=spin, verbose=0)
    mf = scf.RHF(mol) if spin == 0 else scf.ROHF(mol)
    mf.conv_tol = 1e-11
    return mf.run()


@pytest.fixture(scope="module")
def lih_mf():
    return scf_of(LIH)


# --- from_pyscf ----------------------------------------------------------------------------------

@pytest.mark.parametrize("atom, spin", [(LIH, 0), (OH, 1)])
def test_from_pyscf_gives_pyscf_fci_energy(atom, spin):
    from pyscf import fci

    mf = scf_of(atom, spin)
    ham = from_pyscf(mf)
    solver = fci.FCI(mf)
    e_fci = solver.kernel()[0]
    assert ham.e_hf == pytest.approx(mf.e_tot, abs=1e-9)
    assert ham.reference == ("RHF" if spin == 0 else "ROHF")
    assert exact_energy(ham, "fci") == pytest.approx(e_fci, abs=1e-8)


def test_from_pyscf_active_space_and_frozen_core_give_pyscf_casci_energies():
    from pyscf import mcscf

    mf = scf_of(H2O)
    for kwargs, (ncas, nelecas) in (({"active": (4, 4)}, (4, 4)), ({"frozen": 1}, (6, 8))):
        casci = mcscf.CASCI(mf, ncas, nelecas)
        casci.verbose = 0
        ham = from_pyscf(mf, **kwargs)
        assert (ham.n_orbitals, ham.n_electrons) == (ncas, nelecas)
        assert exact_energy(ham, "ed") == pytest.approx(casci.kernel()[0], abs=1e-8)


def test_from_pyscf_equals_the_spec_path(lih_mf):
    from hamiltonians import build_hamiltonian, MoleculeSpec

    ours = build_hamiltonian(MoleculeSpec(atom=LIH), cache=False)
    ham = from_pyscf(lih_mf)
    assert exact_energy(ham) == pytest.approx(exact_energy(ours), abs=1e-9)
    assert "LiH (sto-3g, charge 0, 2S=0) from PySCF RHF" == ham.description


def test_from_pyscf_refuses_wrong_objects_and_unconverged_scf(lih_mf):
    from pyscf import gto, scf

    with pytest.raises(TypeError, match="needs a PySCF SCF object"):
        from_pyscf(lih_mf.mol)
    with pytest.raises(TypeError, match="needs a PySCF SCF object"):
        from_pyscf("LiH")
    with pytest.raises(InputError, match="UHF orbitals are not restricted"):
        from_pyscf(scf.UHF(lih_mf.mol).run())
    with pytest.raises(InputError, match="has not been run"):
        from_pyscf(scf.RHF(lih_mf.mol))
    stuck = scf.RHF(gto.M(atom=H2O, basis="sto-3g", verbose=0))
    stuck.max_cycle = 1
    stuck.kernel()
    assert not stuck.converged
    with pytest.raises(InputError, match="did not converge"):
        from_pyscf(stuck)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"active": (20, 2)}, "do not fit"),
    ({"active": (2, 3)}, "not a whole number of doubly occupied"),
    ({"active": (3, 2), "frozen": 1}, "not both"),
    ({"frozen": 2}, "frozen=2"),
    ({"frozen": -1}, "frozen=-1"),
])
def test_from_pyscf_refuses_bad_active_spaces(lih_mf, kwargs, fragment):
    with pytest.raises(InputError, match=fragment):
        from_pyscf(lih_mf, **kwargs)


# --- from_openfermion ----------------------------------------------------------------------------

def sector_ground_energy(op, n_alpha, n_beta):
    """Lowest eigenvalue of OpenFermion's sparse JW matrix on the N_alpha/N_beta block (qubit 0 = MSB)."""
    from openfermion import get_sparse_operator

    matrix = get_sparse_operator(op).toarray().real
    n_qubits = op.n_qubits
    bits = (np.arange(2**n_qubits)[:, None] >> (n_qubits - 1 - np.arange(n_qubits))) & 1
    keep = (bits[:, 0::2].sum(1) == n_alpha) & (bits[:, 1::2].sum(1) == n_beta)
    return np.linalg.eigvalsh(matrix[np.ix_(keep, keep)])[0]


def test_from_openfermion_round_trips_our_operator_and_its_exact_energy(hams):
    ham = hams["LiH"]
    op = get_interaction_operator(ham)
    back = from_openfermion(op, ham.n_alpha, ham.n_beta)
    np.testing.assert_allclose(back.h1e, ham.h1e, atol=1e-8)
    np.testing.assert_allclose(back.eri, ham.eri, atol=1e-8)
    assert back.e_core == ham.e_core and back.e_hf == pytest.approx(ham.e_hf, abs=1e-8)
    assert exact_energy(back, "ed") == pytest.approx(sector_ground_energy(op, 2, 2), abs=1e-8)


def test_from_openfermion_reads_openfermions_own_normal_ordered_layout(hams):
    from openfermion import FermionOperator, get_interaction_operator as of_interaction_operator

    ham = hams["H2"]
    n = ham.n_orbitals
    fermion = FermionOperator((), ham.e_core)  # H term by term, as the formula in hamiltonians.molecular says
    for p, q in np.ndindex(n, n):
        for s in (0, 1):
            fermion += FermionOperator(((2 * p + s, 1), (2 * q + s, 0)), ham.h1e[p, q])
    for p, q, r, t in np.ndindex(n, n, n, n):
        for s in (0, 1):
            for u in (0, 1):
                fermion += FermionOperator(((2 * p + s, 1), (2 * r + u, 1), (2 * t + u, 0), (2 * q + s, 0)),
                                           0.5 * ham.eri[p, q, r, t])
    op = of_interaction_operator(fermion)  # OpenFermion's layout, not ours
    back = from_openfermion(op, 1, 1)
    np.testing.assert_allclose(back.h1e, ham.h1e, atol=1e-12)
    np.testing.assert_allclose(back.eri, ham.eri, atol=1e-12)
    assert exact_energy(back, "fci") == pytest.approx(sector_ground_energy(op, 1, 1), abs=1e-10)


def _with(op, one=None, two=None, constant=None):
    from openfermion import InteractionOperator

    return InteractionOperator(op.constant if constant is None else constant,
                               op.one_body_tensor if one is None else one, op.two_body_tensor if two is None else two)


def test_from_openfermion_refuses_wrong_types_and_spin_dependent_operators(hams):
    op = get_interaction_operator(hams["H2"])
    with pytest.raises(TypeError, match="needs an openfermion.InteractionOperator"):
        from_openfermion(hams["H2"], 1, 1)
    with pytest.raises(TypeError, match="must be integers"):
        from_openfermion(op, 1.0, 1)
    with pytest.raises(InputError, match="n_alpha=1, n_beta=2"):
        from_openfermion(op, 1, 2)
    with pytest.raises(InputError, match="n_alpha=3"):
        from_openfermion(op, 3, 1)
    one = op.one_body_tensor.copy()
    one[1, 1] += 0.1  # beta orbital 0 differs from alpha orbital 0
    with pytest.raises(InputError, match="one-body tensor is not spin-free"):
        from_openfermion(_with(op, one=one), 1, 1)
    one = op.one_body_tensor.copy()
    one[0, 1] = one[1, 0] = 0.05  # alpha-beta mixing
    with pytest.raises(InputError, match="one-body tensor is not spin-free"):
        from_openfermion(_with(op, one=one), 1, 1)
    two = op.two_body_tensor.copy()
    two[0, 2, 2, 0] += 0.1  # an alpha-alpha element the alpha-beta block does not have
    with pytest.raises(InputError, match="two-body tensor is not spin-free"):
        from_openfermion(_with(op, two=two), 1, 1)
    with pytest.raises(InputError, match="imaginary"):
        from_openfermion(_with(op, one=op.one_body_tensor + 0.1j * np.eye(4)), 1, 1)


def test_from_openfermion_refuses_integrals_of_complex_orbitals():
    from hamiltonians import MolecularHamiltonian

    rng = np.random.default_rng(1)
    eri = rng.standard_normal((2, 2, 2, 2))
    eri = eri + eri.transpose(2, 3, 0, 1)  # (pq|rs) = (rs|pq) only: 4-fold, as complex orbitals give
    fake = MolecularHamiltonian(np.eye(2), eri, 0.0, 2, 1, 1, "4-fold", None)
    with pytest.raises(InputError, match="8-fold symmetry of real orbitals"):
        from_openfermion(get_interaction_operator(fake), 1, 1)
