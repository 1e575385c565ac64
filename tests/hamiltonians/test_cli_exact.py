import json
import subprocess
import sys

import pytest

from nnqs.cli import main
from tests_support import pyscf_references


def test_exact_json_is_one_object(capsys):
    assert main(["exact", "H2", "--json", "--method", "ed"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert out.count("\n") == 1
    assert data["n_qubits"] == 4 and data["sector_dim"] == 4 and data["method"] == "ed"
    assert data["e_exact"] == pytest.approx(pyscf_references("H2")["exact (fci)"], abs=1e-8)


def test_exact_table(capsys):
    assert main(["exact", "LiH"]) == 0
    out = capsys.readouterr().out
    assert "12 qubits" in out and "N_alpha=2" in out and "sector dimension 225" in out
    rows = {line[:18].strip(): float(line[18:].split()[0]) for line in out.splitlines()
            if line[:18].strip() in ("HF", "CCSD(T)", "exact (fci)")}  # fmt: skip
    reference = pyscf_references("LiH")
    assert rows.keys() == reference.keys()
    for method, energy in rows.items():  # the table prints 8 decimals
        assert energy == pytest.approx(reference[method], abs=1e-8), method


def test_exact_fcidump_json_has_null_ccsd_t(capsys, tmp_path, hams):
    from hamiltonians import write_fcidump

    path = tmp_path / "h2o.fcidump"
    write_fcidump(path, hams["H2O"])
    assert main(["exact", "--fcidump", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["e_ccsd_t"] is None and data["n_orbitals"] == 7


def test_molecules(capsys):
    assert main(["molecules"]) == 0
    out = capsys.readouterr().out
    assert "N2" in out and "CCCBDB" in out and "20" in out
    assert main(["molecules", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    n2 = next(r for r in rows if r["name"] == "N2")
    assert (n2["n_electrons"], n2["n_orbitals_sto3g"], n2["n_qubits_sto3g"]) == (14, 10, 20)


@pytest.mark.parametrize("argv, fragment", [
    (["exact", "Unobtainium"], "the catalog has: H2, LiH"),
    (["exact", "--geometry", "N 0 0 0; N 0 0"], "atom 2 'N 0 0'"),
    (["exact", "H2", "--basis", "no-such-basis"], "unknown basis"),
    (["exact", "H2O", "--spin", "1"], "spin 2S=1 is impossible"),
    (["exact", "H2O", "--charge", "1"], "spin 2S=0 is impossible"),
    (["exact", "H2O", "--active", "3", "3"], "active space"),
    (["exact", "H2O", "--active", "20", "4"], "do not fit"),
    (["exact", "--fcidump", "/no/such/file"], "does not exist"),
    (["exact", "H2O", "--basis", "6-31g", "--method", "ed"], "1,656,369 determinants"),
    (["exact", "H2", "--method", "selected-ci"], "invalid choice"),
    (["exact", "H2", "--method", "dmrg", "--bond-dim", "2"], "--bond-dim 2: use at least 8"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_fcidump_file(capsys, tmp_path):
    path = tmp_path / "bad.fcidump"
    path.write_text(" &FCI NORB=2,NELEC=9,\n &END\n 1.0 1 1 0 0\n")
    assert main(["exact", "--fcidump", str(path)]) == 2
    err = capsys.readouterr().err
    assert "NELEC=9" in err and err.count("\n") == 1


def test_console_entry_point_reports_one_line():
    result = subprocess.run([sys.executable, "-m", "nnqs", "exact", "Unobtainium"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("nnqs: error: unknown molecule") and result.stderr.count("\n") == 1
    assert result.stdout == ""
