"""`--method dmrg` (block2): energies against PySCF FCI, the extrapolation, the cache, the CLI.

Tests that run DMRG are skipped with a reason where block2 (the optional extra ``.[dmrg]``)
is not installed; the others (missing package, sizes, the fit) run everywhere.
"""
import importlib.util
import json
import sys

import pytest

from hamiltonians import InputError, MoleculeSpec, build_hamiltonian, exact_references, get_spec, write_fcidump
from hamiltonians.dmrg import DmrgSettings, dmrg_energy, extrapolate, resolve_threads, schedule
from hamiltonians.exact import fci_energy
from hamiltonians.sizes import DMRG_MAX_ORBITALS, Size, check_dmrg, check_method
from nnqs.cli import main

HAVE_BLOCK2 = importlib.util.find_spec("pyblock2") is not None
needs_block2 = pytest.mark.skipif(not HAVE_BLOCK2, reason="block2 not installed: pip install -e '.[dmrg]'")
ATOL = 1e-6  # Hartree


@pytest.fixture(scope="module")
def n2():
    return build_hamiltonian(get_spec("N2"), cache=False)


@needs_block2
def test_n2_sto3g_default_bond_dim_matches_fci(n2):
    result = dmrg_energy(n2, threads=1)
    e_fci = fci_energy(n2)
    assert abs(result.energy - e_fci) < ATOL
    assert abs(result.energy_extrapolated - e_fci) < ATOL
    assert result.energy >= e_fci - 1e-9  # variational
    assert [s.sweep for s in result.sweeps] == list(range(1, 13))


@needs_block2
def test_open_shell_doublet_matches_fci():
    """OH radical, 2S = 1: SU(2) DMRG finds the same doublet as FCI (ROHF orbitals)."""
    ham = build_hamiltonian(MoleculeSpec(atom="O 0 0 0; H 0 0 0.9697", spin=1), cache=False)
    result = dmrg_energy(ham, DmrgSettings(bond_dim=64), threads=1)
    assert abs(result.energy - fci_energy(ham)) < ATOL


@needs_block2
def test_frozen_core_6_31g_from_fcidump_matches_fci(tmp_path):
    """H2O/6-31G with the O 1s frozen, restricted to (10 orbitals, 8 electrons), read back from an
    FCIDUMP: 20 qubits with a stretched bond, so the bond dimension matters."""
    spec = MoleculeSpec(atom="O 0 0 0; H 0 0 1.4; H 1.35 0 -0.35", basis="6-31g", active=(10, 8))
    path = tmp_path / "h2o.fcidump"
    write_fcidump(path, build_hamiltonian(spec, cache=False))
    ham = build_hamiltonian(MoleculeSpec(fcidump=str(path)), cache=False)
    result = dmrg_energy(ham, DmrgSettings(bond_dim=200), threads=1)
    e_fci = fci_energy(ham)
    assert abs(result.energy - e_fci) < ATOL and abs(result.energy_extrapolated - e_fci) < ATOL


def test_extrapolation_recovers_the_line_and_leaves_an_exact_mps_alone():
    e0, slope = -76.5, -3.0
    points = [(m, w, e0 + slope * w) for m, w in ((500, 1e-6), (375, 4e-6), (250, 1.2e-5))]
    energy, error = extrapolate(points)
    assert energy == pytest.approx(e0, abs=1e-12)
    assert error == pytest.approx(3e-6, rel=1e-6)
    exact = [(100, 1e-20, -1.0), (75, 3e-20, -1.0 + 1e-14), (50, 0.0, -1.0)]
    assert extrapolate(exact) == (-1.0, 0.0)


def test_schedule_grows_the_bond_dimension_then_reverses_without_noise():
    plan = schedule(400)
    assert len(plan) == 12
    assert [s.bond_dim for s in plan] == [100] * 2 + [200] * 2 + [400] * 4 + [300] * 2 + [200] * 2
    assert all(s.noise == 0 for s in plan[6:]) and all(s.noise > 0 for s in plan[:6])


def test_threads_follow_the_option_then_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads(None) == 3 and resolve_threads(2) == 2
    with pytest.raises(InputError, match="--threads 0"):
        resolve_threads(0)


@needs_block2
def test_second_call_is_a_cache_hit_and_the_key_has_the_bond_dim(monkeypatch):
    import hamiltonians.references as references

    spec = get_spec("LiH")
    first = exact_references(spec, "dmrg", dmrg=DmrgSettings(bond_dim=32), threads=1)
    assert not first.from_cache and first.dmrg["bond_dim"] == 32

    def no_dmrg(*args, **kwargs):
        raise AssertionError("DMRG ran again")

    monkeypatch.setattr(references, "dmrg_energy", no_dmrg)
    second = exact_references(spec, "dmrg", dmrg=DmrgSettings(bond_dim=32), threads=1)
    assert second.from_cache and second.e_exact == first.e_exact and second.dmrg == first.dmrg
    with pytest.raises(AssertionError, match="DMRG ran again"):  # other settings: another entry
        exact_references(spec, "dmrg", dmrg=DmrgSettings(bond_dim=48), threads=1)
    fci = exact_references(spec, "fci")  # the FCI slot of the same molecule is untouched
    assert fci.dmrg is None and abs(fci.e_exact - first.e_exact) < ATOL


@needs_block2
def test_cli_json_is_one_object_and_the_table_shows_both_energies(capsys):
    argv = ["exact", "H2O", "--method", "dmrg", "--bond-dim", "40", "--threads", "1", "--no-cache"]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert captured.err == ""  # quiet in --json mode
    assert data["method"] == "dmrg" and data["dmrg"]["bond_dim"] == 40
    assert abs(data["e_exact"] - fci_energy(build_hamiltonian(get_spec("H2O")))) < ATOL
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "DMRG M=40" in captured.out and "DMRG extrap." in captured.out
    progress = [line for line in captured.err.splitlines() if line.startswith("dmrg sweep")]
    assert len(progress) == 12 and "12/12" in progress[-1] and "dw=" in progress[-1]


def test_without_block2_one_line_says_how_to_install(capsys, monkeypatch):
    for name in ("pyblock2", "pyblock2.driver", "pyblock2.driver.core"):
        monkeypatch.setitem(sys.modules, name, None)  # import now raises ImportError
    code = main(["exact", "H2", "--method", "dmrg", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "pip install -e '.[dmrg]'" in err and "pip install block2" in err


def test_dmrg_size_checks():
    check_dmrg(Size("N2", 18, 16, 5, 5), 500)
    with pytest.raises(InputError, match=f"too many for --method dmrg \\(limit {DMRG_MAX_ORBITALS}\\)"):
        check_dmrg(Size("big", 200, 120, 30, 30), 100)
    with pytest.raises(InputError, match=r"--bond-dim 20000 on 60 orbitals would need .* GiB"):
        check_dmrg(Size("wide", 60, 60, 10, 10), 20000)
    with pytest.raises(InputError, match="--bond-dim 4: use at least 8"):
        DmrgSettings(bond_dim=4)


def test_fci_refusal_offers_dmrg_where_it_fits():
    with pytest.raises(InputError, match=r"too large for --method fci.*use --method dmrg \(~.* GiB, ~.*\)"):
        check_method(Size("N2 cc-pVDZ", 28, 26, 5, 5), "fci")
    with pytest.raises(InputError, match="too large for --method fci") as refused:
        check_method(Size("huge", 300, 120, 30, 30), "fci")
    assert "--method dmrg" not in str(refused.value) and "nnqs vmc" in str(refused.value)
