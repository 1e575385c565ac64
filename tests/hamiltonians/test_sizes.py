"""Size is refused first: before any SCF or integral transform, in one line with the estimate and a way
out that fits; memory that runs out all the same (PySCF threads included) is one line and exit 1."""
import math
import re
import time

import numpy as np
import pytest

import hamiltonians.integrals
from hamiltonians import InputError, MoleculeSpec
from hamiltonians.errors import OutOfMemory, is_memory_failure, memory_guard
from hamiltonians.integrals import estimate_size
from hamiltonians.sizes import MAX_ORBITALS, Size, check_integrals, check_method, duration, gib
from nnqs.cli import main

BENZENE = ("C 0.000 1.396 0; C 1.209 0.698 0; C 1.209 -0.698 0; C 0.000 -1.396 0; C -1.209 -0.698 0; "
           "C -1.209 0.698 0; H 0.000 2.479 0; H 2.147 1.240 0; H 2.147 -1.240 0; H 0.000 -2.479 0; "
           "H -2.147 -1.240 0; H -2.147 1.240 0")
CHAIN_200 = "; ".join(f"H 0 0 {0.74 * i:.2f}" for i in range(200))


@pytest.fixture
def no_scf(monkeypatch):
    """Any SCF or integral transform fails the test: refusals must come before them."""
    def forbidden(*args, **kwargs):
        raise AssertionError("SCF or integrals were started before the size check")

    monkeypatch.setattr(hamiltonians.integrals, "run_scf", forbidden)
    monkeypatch.setattr(hamiltonians.integrals, "active_space_integrals", forbidden)


def one_line_exit(capsys, argv, code=2):
    start = time.perf_counter()
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nnqs: error: ") and "Traceback" not in err, err
    assert time.perf_counter() - start < 15
    return err


# --- the estimate, against independent counts ----------------------------------------------------

def test_estimate_counts_basis_functions_electrons_and_sector_like_pyscf():
    from pyscf import gto
    from pyscf.fci import cistring

    spec = MoleculeSpec(atom=BENZENE, basis="cc-pvtz", active=(30, 12))
    size = estimate_size(spec)
    mol = gto.M(atom=BENZENE, basis="cc-pvtz", verbose=0)
    assert size.n_basis == mol.nao_nr() == 264
    assert (size.n_orbitals, size.n_alpha, size.n_beta) == (30, 6, 6)
    assert size.sector_dim == cistring.num_strings(30, 6) ** 2


def test_estimate_of_an_fcidump_reads_only_its_header(tmp_path):
    path = tmp_path / "FCIDUMP"
    path.write_text(" &FCI NORB=100,NELEC=20,MS2=2,\n &END\n" + "garbage that is never read\n" * 3)
    size = estimate_size(MoleculeSpec(fcidump=str(path), active=(10, 8)))
    assert (size.n_basis, size.n_orbitals, size.n_alpha, size.n_beta, size.from_file) == (100, 10, 5, 3, True)
    assert size.dense_orbitals == 100  # the reader holds the whole file's integrals


def test_formatting_of_estimates():
    assert gib(2**31) == "~2.0 GiB" and "e+" in gib(1e30)
    assert (duration(3), duration(600), duration(3 * 3600), duration(1e12)) == ("~3 s", "~10 min", "~3 h", "~31710 years")


# --- the cases of issue 11, each refused in seconds, before any SCF ------------------------------

def test_benzene_cc_pvtz_ed_is_refused_before_scf_and_does_not_suggest_fci(capsys, no_scf):
    err = one_line_exit(capsys, ["exact", "--geometry", BENZENE, "--basis", "cc-pvtz", "--method", "ed", "--no-cache"])
    assert "528 qubits" in err and "too large for --method ed" in err
    assert "--method fci is over its limit" in err and "use --method fci" not in err
    assert "--active" in err and "nnqs vmc" in err


def test_a_200_atom_hydrogen_chain_is_refused_before_scf(capsys, no_scf):
    err = one_line_exit(capsys, ["exact", "--geometry", CHAIN_200, "--no-cache"])
    assert "too large for --method fci" in err and "400 qubits" in err and "--active" in err


def test_a_200_atom_hydrogen_chain_in_vmc_is_refused_before_scf(capsys, no_scf, tmp_path):
    err = one_line_exit(capsys, ["vmc", "--geometry", CHAIN_200, "--steps", "1", "--out", str(tmp_path / "run")])
    assert re.search(r"200 orbitals \(200 basis functions\) are too many for the dense two-electron integrals "
                     r"\(~14.9 GiB, after an SCF and transform of ~\d+ (min|h); limit 128 orbitals\)", err), err


def test_fcidump_header_norb_120_over_h2_integrals_is_refused_quickly(capsys, no_scf, tmp_path, hams):
    from hamiltonians import write_fcidump
    from hamiltonians.cache import cache_dir

    path = tmp_path / "h2.fcidump"
    write_fcidump(path, hams["H2"])
    path.write_text(re.sub(r"NORB=2", "NORB=120", path.read_text()))
    err = one_line_exit(capsys, ["exact", "--fcidump", str(path)])
    assert "NORB=120 but orbital(s) 3, 4, 5, 6, 7, ... appear in no integral (118 of 120)" in err
    assert sum(f.stat().st_size for f in cache_dir().glob("*")) < 2**20  # no 1.6 GB cache entry


def test_ed_over_its_limit_suggests_fci_only_where_fci_fits(capsys):
    err = one_line_exit(capsys, ["exact", "H2O", "--basis", "6-31g", "--method", "ed"])
    assert "1,656,369 determinants" in err and "use --method fci (~" in err


def test_method_and_integral_limits_on_sizes():
    check_method(Size("x", 13, 13, 5, 5), "fci")
    with pytest.raises(InputError, match=r"too large for --method ed .*use --method fci"):
        check_method(Size("x", 13, 13, 5, 5), "ed")
    with pytest.raises(InputError, match=r"--method fci is over its limit \(100,000,000\) too"):
        check_method(Size("x", 40, 40, 10, 10), "ed")
    check_integrals(Size("x", 500, MAX_ORBITALS, 4, 4))  # a big basis with a small enough active space
    with pytest.raises(InputError, match="129 orbitals"):
        check_integrals(Size("x", 129, 129, 4, 4))
    with pytest.raises(InputError, match="the SCF and integrals of 2000 basis functions would take"):
        check_integrals(Size("x", 2000, 10, 4, 4))


def test_fci_memory_estimate_is_the_size_of_its_vectors():
    size = Size("x", 12, 12, 4, 4)
    fci_bytes, _ = size.method_cost("fci")
    assert fci_bytes == 30 * 8 * math.comb(12, 4) ** 2


# --- out of memory inside PySCF: one line, exit 1 ------------------------------------------------

def _numpy_memory_error():
    np.empty(2**40)  # 8 TiB: numpy's MemoryError at once, "Unable to allocate 8.00 TiB ..."


def _pyscf_thread_memory_error(*args, **kwargs):
    """As PySCF's integral code fails: a MemoryError in a worker thread, re-raised on join."""
    from pyscf import lib

    thread = lib.ThreadWithTraceBack(target=_numpy_memory_error)
    thread.start()
    thread.join()


def _pyscf_executor_memory_error(*args, **kwargs):
    from pyscf import lib

    with lib.call_in_background(_numpy_memory_error) as background:
        background()


THREAD_WARNING = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


@THREAD_WARNING
@pytest.mark.parametrize("failure", [_numpy_memory_error, _pyscf_thread_memory_error, _pyscf_executor_memory_error])
def test_memory_failure_inside_pyscf_integrals_is_one_line_exit_1(capsys, monkeypatch, failure):
    monkeypatch.setattr(hamiltonians.integrals, "active_space_integrals", lambda *a, **k: failure())
    err = one_line_exit(capsys, ["exact", "LiH", "--no-cache"], code=1)
    assert "out of memory in the integrals of LiH" in err and "--active" in err


@THREAD_WARNING
def test_pyscf_thread_error_really_wraps_the_memory_error():
    from pyscf.lib import ThreadRuntimeError

    for failure in (_pyscf_thread_memory_error, _pyscf_executor_memory_error):
        with pytest.raises(ThreadRuntimeError) as info:
            failure()
        assert is_memory_failure(info.value)
    assert not is_memory_failure(RuntimeError("a different failure"))


def test_memory_guard_leaves_other_errors_alone():
    with pytest.raises(RuntimeError, match="other"), memory_guard("step", "way out"):
        raise RuntimeError("other")
    with pytest.raises(OutOfMemory, match="out of memory in step; way out"), memory_guard("step", "way out"):
        _numpy_memory_error()
