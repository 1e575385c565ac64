import numpy as np
import pytest

from hamiltonians import InputError, MoleculeSpec, exact_energy, get_spec, read_fcidump, write_fcidump


def _same(a, b, tol=1e-12):
    assert (a.n_orbitals, a.n_alpha, a.n_beta) == (b.n_orbitals, b.n_alpha, b.n_beta)
    np.testing.assert_allclose(a.h1e, b.h1e, atol=tol)
    np.testing.assert_allclose(a.eri, b.eri, atol=tol)
    assert a.e_core == pytest.approx(b.e_core, abs=tol)


def test_write_read_round_trip_keeps_exact_energy(hams, tmp_path):
    ham = hams["LiH"]
    path = tmp_path / "lih.fcidump"
    write_fcidump(path, ham)
    back = read_fcidump(path)
    _same(ham, back, tol=1e-15)
    assert back.e_hf == pytest.approx(ham.e_hf, abs=1e-10)
    assert exact_energy(back, "fci") == pytest.approx(exact_energy(ham, "fci"), abs=1e-10)


def test_reads_a_file_written_by_pyscf(hams, tmp_path):
    from pyscf.tools import fcidump

    ham = hams["H2O"]
    path = tmp_path / "pyscf.fcidump"
    fcidump.from_integrals(str(path), ham.h1e, ham.eri, ham.n_orbitals, ham.n_electrons, nuc=ham.e_core, ms=0)
    _same(ham, read_fcidump(path), tol=1e-12)


def test_pyscf_reads_our_file(hams, tmp_path):
    from pyscf import ao2mo
    from pyscf.tools import fcidump

    ham = hams["H2O"]
    path = tmp_path / "ours.fcidump"
    write_fcidump(path, ham)
    data = fcidump.read(str(path), verbose=False)
    assert (data["NORB"], data["NELEC"], data["MS2"]) == (7, 10, 0)
    np.testing.assert_allclose(data["H1"], ham.h1e, atol=1e-14)
    np.testing.assert_allclose(ao2mo.restore(1, data["H2"], 7), ham.eri, atol=1e-14)
    assert data["ECORE"] == pytest.approx(ham.e_core, abs=1e-14)


def test_open_shell_and_active_space_from_fcidump(tmp_path):
    from hamiltonians import build_hamiltonian

    full = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1), cache=False)
    path = tmp_path / "oh.fcidump"
    write_fcidump(path, full)
    back = read_fcidump(path)
    assert (back.n_alpha, back.n_beta) == (5, 4)
    active = build_hamiltonian(MoleculeSpec(fcidump=str(path), active=(4, 5)), cache=False)
    assert (active.n_orbitals, active.n_alpha, active.n_beta) == (4, 3, 2)
    direct = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1, active=(4, 5)), cache=False)
    _same(active, direct, tol=1e-9)


HEADER = " &FCI NORB=2,NELEC=2,MS2=0,\n  ORBSYM=1,1,\n  ISYM=1,\n &END\n"


@pytest.mark.parametrize("text, fragment", [
    ("hello\n", "not an FCIDUMP"),
    (" &FCI NELEC=2,\n &END\n 1.0 1 1 0 0\n", "no NORB"),
    (" &FCI NORB=2,NELEC=5,\n &END\n 1.0 1 1 0 0\n", "do not fit"),
    (" &FCI NORB=2,NELEC=2,MS2=1,\n &END\n 1.0 1 1 0 0\n", "MS2=1"),
    (HEADER + " 1.0 1 3 0 0\n", "line 5: orbital index 3 is outside 1..NORB=2"),
    (HEADER + " 1.0 1 1 0\n", "line 5: '1.0 1 1 0' should be 'value i j k l'"),
    (HEADER + " abc 1 1 0 0\n", "line 5: value 'abc' is not a number"),
    (HEADER + " 1.0 1 0 1 0\n", "line 5: indices 1 0 1 0 are none of"),
    (HEADER, "no integrals"),
    (" &FCI NORB=2,NELEC=2,UHF=.TRUE.,\n &END\n 1.0 1 1 0 0\n", "UHF"),
])
def test_bad_fcidump_is_one_clear_input_error(tmp_path, text, fragment):
    path = tmp_path / "bad.fcidump"
    path.write_text(text)
    with pytest.raises(InputError, match=fragment):
        read_fcidump(path)


def test_fortran_exponents_and_slash_terminator(tmp_path):
    path = tmp_path / "h.fcidump"
    path.write_text(" &FCI NORB=1,NELEC=1,MS2=1\n /\n -0.5D+00 1 1 0 0\n 0.0 0 0 0 0\n")
    ham = read_fcidump(path)
    assert ham.h1e[0, 0] == -0.5 and ham.e_hf == -0.5
    assert exact_energy(ham, "ed") == pytest.approx(-0.5)


def test_catalog_active_space_fcidump_matches(hams, tmp_path):
    spec = get_spec("LiH", active=(3, 2))
    from hamiltonians import build_hamiltonian

    ham = build_hamiltonian(spec, cache=False)
    path = tmp_path / "a.fcidump"
    write_fcidump(path, ham)
    assert exact_energy(read_fcidump(path), "ed") == pytest.approx(exact_energy(ham, "fci"), abs=1e-9)
