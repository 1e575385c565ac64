"""Strict FCIDUMP reading: each family of lying file is refused with one line naming the file and
the line; valid files (written by PySCF's own writers and by ours) read as PySCF's reader reads them."""
import re
import time
import tracemalloc

import numpy as np
import pytest

from hamiltonians import InputError, MoleculeSpec, build_hamiltonian, exact_energy, read_fcidump, write_fcidump
from hamiltonians.fcidump import SYMMETRY_TOL


def pyscf_read(path):
    """(norb, nelec, ms2, h1e, eri (n,)*4, ecore or None) by PySCF's own FCIDUMP reader."""
    from pyscf import ao2mo
    from pyscf.tools import fcidump

    data = fcidump.read(str(path), verbose=False)
    n = data["NORB"]
    return n, data["NELEC"], data["MS2"], data["H1"], ao2mo.restore(1, data["H2"], n), data.get("ECORE")


def assert_same_as_pyscf(path, tol=0.0):
    """Our reading equals PySCF's; ``tol`` where a file holds symmetric partners that differ in the last bit
    (ours keeps the first of them, PySCF the last)."""
    ours = read_fcidump(path)
    n, nelec, ms2, h1e, eri, ecore = pyscf_read(path)
    assert (ours.n_orbitals, ours.n_electrons, ours.n_alpha - ours.n_beta) == (n, nelec, ms2)
    np.testing.assert_allclose(ours.h1e, h1e, rtol=0, atol=tol)
    np.testing.assert_allclose(ours.eri, eri, rtol=0, atol=tol)
    assert ours.e_core == ecore
    return ours


@pytest.fixture(scope="module")
def h2_lines(tmp_path_factory, hams):
    """Lines of H2/STO-3G integrals as PySCF's writer writes them (header 4 lines, core last)."""
    from pyscf.tools import fcidump

    ham = hams["H2"]
    path = tmp_path_factory.mktemp("h2") / "FCIDUMP"
    fcidump.from_integrals(str(path), ham.h1e, ham.eri, 2, 2, nuc=ham.e_core, ms=0)
    lines = path.read_text().splitlines()
    assert lines[3].strip().upper() == "&END" and lines[-1].split()[1:] == ["0", "0", "0", "0"]
    return lines


def write(tmp_path, lines, name="FCIDUMP"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def refused(path, *fragments):
    """The InputError message, after checking it is one line naming the file and each fragment."""
    with pytest.raises(InputError) as info:
        read_fcidump(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message, message
    for fragment in fragments:
        assert re.search(fragment, message), (fragment, message)
    return message


def body_line(lines, indices):
    """Index (0-based, in ``lines``) of the line whose orbital indices are ``indices``."""
    return next(k for k, line in enumerate(lines) if k > 3 and line.split()[1:] == indices.split())


# --- valid files: ours == PySCF's reader ---------------------------------------------------------

def test_pyscf_written_h2_reads_as_pyscf_reads_it(tmp_path, h2_lines, hams):
    ham = assert_same_as_pyscf(write(tmp_path, h2_lines))
    assert exact_energy(ham, "fci") == pytest.approx(exact_energy(hams["H2"], "fci"), abs=1e-12)


def test_from_scf_file_reads_as_pyscf_reads_it(tmp_path):
    from pyscf import gto, scf
    from pyscf.tools import fcidump

    mf = scf.RHF(gto.M(atom="Li 0 0 0; H 0 0 1.5949", basis="sto-3g", verbose=0)).run()
    path = tmp_path / "lih.fcidump"
    fcidump.from_scf(mf, str(path))  # 4-fold: writes (ij|kl) and (kl|ij), equal to ~1e-16
    ham = assert_same_as_pyscf(path, tol=1e-14)
    assert ham.e_hf == pytest.approx(mf.e_tot, abs=1e-9)


def test_our_writer_reads_as_pyscf_reads_it(tmp_path):
    full = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1), cache=False)
    path = tmp_path / "oh.fcidump"
    write_fcidump(path, full)
    assert_same_as_pyscf(path)


def test_random_symmetric_integrals_with_omitted_zeros_read_as_pyscf(tmp_path):
    from pyscf import ao2mo
    from pyscf.tools import fcidump

    rng = np.random.default_rng(3)
    n = 4
    h1e = rng.standard_normal((n, n))
    h1e = h1e + h1e.T
    eri = ao2mo.restore(1, ao2mo.restore(8, rng.standard_normal((n,) * 4), n), n)
    eri[np.abs(eri) < 0.5] = 0.0  # some entries omitted from the file, as writers do
    path = tmp_path / "random.fcidump"
    fcidump.from_integrals(str(path), h1e, eri, n, 4, nuc=1.25, ms=2)
    ham = assert_same_as_pyscf(path)
    assert (ham.n_alpha, ham.n_beta) == (3, 1)


def test_both_triangles_of_h_that_agree_are_accepted(tmp_path, h2_lines):
    assert not any(line.split()[1:] in (["2", "1", "0", "0"], ["1", "2", "0", "0"]) for line in h2_lines)
    lines = h2_lines[:-1] + [" 0.25 2 1 0 0", f" {0.25 + SYMMETRY_TOL / 10!r} 1 2 0 0", h2_lines[-1]]
    ham = read_fcidump(write(tmp_path, lines))
    assert ham.h1e[0, 1] == ham.h1e[1, 0] == 0.25


# --- duplicated entries --------------------------------------------------------------------------

def test_duplicated_core_line_is_refused_not_summed(tmp_path, h2_lines):
    lines = h2_lines[:-1] + [h2_lines[-1], h2_lines[-1]]
    message = refused(write(tmp_path, lines), f"line {len(lines)}: the core energy is given again",
                      f"first on line {len(lines) - 1}")
    assert "same value" in message


def test_duplicated_eri_with_another_value_is_refused(tmp_path, h2_lines):
    k = body_line(h2_lines, "1 1 1 1")
    lines = h2_lines[:-1] + [" 0.123 1 1 1 1", h2_lines[-1]]
    refused(write(tmp_path, lines), rf"line {len(lines) - 1}: \(11\|11\) is given again \(0.123 after ",
            f"first on line {k + 1}")


def test_duplicated_h_entry_with_the_same_value_is_refused(tmp_path, h2_lines):
    k = body_line(h2_lines, "2 2 0 0")
    lines = h2_lines[:-1] + [h2_lines[k], h2_lines[-1]]
    refused(write(tmp_path, lines), rf"line {len(lines) - 1}: h\[2,2\] is given again \(the same value")


# --- asymmetric integrals ------------------------------------------------------------------------

def test_asymmetric_one_electron_integrals_are_refused(tmp_path, h2_lines):
    lines = h2_lines[:-1] + [" 0.3 1 2 0 0", " 0.1 2 1 0 0", h2_lines[-1]]
    refused(write(tmp_path, lines), rf"line {len(lines) - 1}: h\[2,1\] = 0.1 differs from its symmetric partner "
            rf"h\[1,2\] = 0.3 on line {len(lines) - 2}", "one-electron integrals are not symmetric")


def test_asymmetric_two_electron_integrals_are_refused(tmp_path, h2_lines):
    k = body_line(h2_lines, "2 2 1 1")
    value = float(h2_lines[k].split()[0])
    lines = h2_lines[:-1] + [f" {value + 1e-6!r} 1 1 2 2", h2_lines[-1]]
    refused(write(tmp_path, lines), rf"line {len(lines) - 1}: \(11\|22\) = .* differs from .* \(22\|11\) .* "
            f"on line {k + 1}", "two-electron integrals are not symmetric")


# --- orbitals outside NORB, fewer orbitals than NORB, absurd NORB ---------------------------------

@pytest.mark.parametrize("entry, index", [(" 0.1 3 1 0 0", 3), (" 0.1 1 1 3 1", 3), (" 0.1 -1 1 0 0", -1)])
def test_integrals_outside_norb_are_refused(tmp_path, h2_lines, entry, index):
    lines = h2_lines[:-1] + [entry, h2_lines[-1]]
    refused(write(tmp_path, lines), f"line {len(lines) - 1}: orbital index {index} is outside 1..NORB=2")


def test_norb_larger_than_the_integrals_is_refused(tmp_path, h2_lines):
    lines = [re.sub(r"NORB=\s*2", "NORB=3", h2_lines[0]), *h2_lines[1:]]
    refused(write(tmp_path, lines), r"line 1: NORB=3 but orbital\(s\) 3 appear in no integral")


def test_absurd_norb_over_h2_integrals_is_refused_before_any_large_allocation(tmp_path, h2_lines):
    lines = [re.sub(r"NORB=\s*2", "NORB=120", h2_lines[0]), *h2_lines[1:]]
    path = write(tmp_path, lines)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        refused(path, r"NORB=120 but orbital\(s\) 3, 4, 5, 6, 7, \.\.\. appear in no integral \(118 of 120\)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20 and time.perf_counter() - start < 5  # 120**4 doubles would be 1.5 GiB
    lines[0] = lines[0].replace("NORB=120", "NORB=99999999")
    refused(write(tmp_path, lines), "NORB=99999999 is more orbitals than the dense integrals can hold")


# --- truncated body ------------------------------------------------------------------------------

def test_a_file_cut_at_any_line_boundary_is_refused(tmp_path, h2_lines):
    for keep in range(5, len(h2_lines)):  # header + at least one entry, never the core line
        message = refused(write(tmp_path, h2_lines[:keep], f"cut{keep}"))
        assert "truncated" in message or "appear in no integral" in message, message
    assert "line 4: no integrals after the header" in refused(write(tmp_path, h2_lines[:4], "header-only"))
    assert "line 5: the file ends without the core-energy line" in refused(write(tmp_path, h2_lines[:5], "one"))


def test_a_file_cut_inside_a_line_is_refused(tmp_path, h2_lines):
    cut = "\n".join(h2_lines)[:-len(h2_lines[-1]) // 2]  # half of the core-energy line
    path = tmp_path / "cut"
    path.write_text(cut)
    refused(path, f"line {len(h2_lines)}: ")


def test_entries_after_the_core_line_are_refused(tmp_path, h2_lines):
    lines = h2_lines + [" 0.01 2 1 1 1"]
    refused(write(tmp_path, lines), f"line {len(lines)}: an entry follows the core-energy line")


# --- where PySCF's reader falls short (why our reader fills the arrays) ---------------------------

def test_pyscf_reader_takes_an_orbital_energy_line_for_the_core_energy(tmp_path, h2_lines):
    path = write(tmp_path, h2_lines[:-1] + [" -0.578 1 0 0 0", h2_lines[-1]])
    assert read_fcidump(path).e_core == float(h2_lines[-1].split()[0]) == pyscf_read(path)[5]
    after = write(tmp_path, h2_lines + [" -0.578 1 0 0 0"], "energy-after-core")
    assert pyscf_read(after)[5] == -0.578  # the orbital energy silently became the core energy
    refused(after, "an entry follows the core-energy line")


def test_pyscf_reader_stops_at_a_blank_line_ours_reads_on(tmp_path, h2_lines):
    path = write(tmp_path, h2_lines[:5] + [""] + h2_lines[5:])
    ours = read_fcidump(path)
    assert pyscf_read(path)[5] is None  # PySCF never saw the core line (nor the integrals before it)
    assert ours.e_core == float(h2_lines[-1].split()[0])


def test_pyscf_reader_cannot_parse_fortran_exponents(tmp_path, h2_lines):
    value, *idx = h2_lines[-1].split()
    path = write(tmp_path, h2_lines[:-1] + [f" {float(value):.16E} {' '.join(idx)}".replace("E", "D")])
    with pytest.raises(ValueError):
        pyscf_read(path)
    assert read_fcidump(path).e_core == pytest.approx(float(value), abs=1e-15)


def test_pyscf_reader_lets_duplicates_overwrite_silently(tmp_path, h2_lines):
    lines = h2_lines[:-1] + [" 0.123 1 1 1 1", h2_lines[-1]]
    path = write(tmp_path, lines)
    assert pyscf_read(path)[4][0, 0, 0, 0] == 0.123
    refused(path, "given again")


def test_nnqs_exact_refuses_a_lying_fcidump_with_one_line_and_exit_2(tmp_path, h2_lines, capsys):
    from nnqs.cli import main

    path = write(tmp_path, h2_lines + [h2_lines[-1]])  # the case: a duplicated core line
    assert main(["exact", "--fcidump", str(path), "--method", "ed", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"line {len(h2_lines) + 1}: the core energy is given again" in err
