import numpy as np
import pytest

from hamiltonians import InputError, MolecularHamiltonian, MoleculeSpec, build_hamiltonian, exact_energy, get_spec
from hamiltonians.exact import check_size


@pytest.mark.parametrize("name", ["H2", "LiH", "H2O"])
def test_ed_equals_pyscf_fci(hams, name):
    ham = hams[name]
    assert exact_energy(ham, "ed") == pytest.approx(exact_energy(ham, "fci"), abs=1e-8)


def test_known_h2_energy(hams):
    assert exact_energy(hams["H2"]) == pytest.approx(-1.137270174, abs=1e-8)


def test_n2_ed_works_on_the_14400_sector():
    ham = build_hamiltonian(get_spec("N2"), cache=False)
    assert exact_energy(ham, "ed") == pytest.approx(exact_energy(ham, "fci"), abs=1e-8)


def test_active_space_equals_pyscf_casci():
    from pyscf import mcscf

    from hamiltonians.integrals import hamiltonian_from_scf, run_scf

    spec = get_spec("H2O", active=(4, 4))
    mf = run_scf(spec)
    ham = hamiltonian_from_scf(spec, mf)
    casci = mcscf.CASCI(mf, 4, 4)
    casci.verbose = 0
    e_casci = casci.kernel()[0]
    assert exact_energy(ham, "fci") == pytest.approx(e_casci, abs=1e-8)
    assert exact_energy(ham, "ed") == pytest.approx(e_casci, abs=1e-8)


def test_requested_spin_is_respected_when_a_higher_spin_lies_lower():
    # O2's ground state is a triplet; asked for 2S = 0, the answer is the lowest singlet,
    # not the M_S = 0 component of the triplet that also lives in that sector.
    singlet = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; O 0 0 1.2075", spin=0), cache=False)
    triplet = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; O 0 0 1.2075", spin=2), cache=False)
    e_singlet_fci, e_singlet_ed = exact_energy(singlet, "fci"), exact_energy(singlet, "ed")
    assert e_singlet_fci == pytest.approx(e_singlet_ed, abs=1e-8)
    assert e_singlet_fci > exact_energy(triplet, "fci") + 1e-3


def _fake(n, na, nb):
    return MolecularHamiltonian(np.zeros((n, n)), np.zeros((n,) * 4), 0.0, n, na, nb, "big", None)


def test_too_large_systems_get_a_clear_error():
    with pytest.raises(InputError, match=r"1,656,369 determinants.*--method fci"):
        check_size(_fake(13, 5, 5), "ed")
    check_size(_fake(13, 5, 5), "fci")
    with pytest.raises(InputError, match=r"determinants.*nnqs vmc"):
        exact_energy(_fake(40, 10, 10), "fci")
    with pytest.raises(InputError, match="unknown exact method"):
        check_size(_fake(2, 1, 1), "selected-ci")
