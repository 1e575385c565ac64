"""The PySCF-solver benchmark runs at toy size: one record, the network's CASCI against PySCF's FCI solver."""
import json

from benchmarks import pyscf_solver


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "solver.jsonl"
    assert pyscf_solver.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    (r,) = records
    assert r["case"] == "H2O/sto-3g:4,4" and 0 <= r["error_mha"] < 0.1
    assert r["rdm1_max_difference"] < 1e-3 and abs(r["rdm2_energy_minus_e_tot_mha"]) < 1e-6
    assert r["s2"] < 1e-3 and r["dipole_difference_au"] < 1e-2
