"""The example scripts run end to end at toy size (so they cannot rot)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(script: str, *args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], check=True, cwd=ROOT,
                   capture_output=True, text=True, timeout=600)


def test_molecules_table(tmp_path):
    run_example("molecules_table.py", "--molecules", "H2", "--steps", "3", "--quick", "--out", str(tmp_path))
    rows = json.loads((tmp_path / "table.json").read_text())
    assert rows[0]["molecule"] == "H2" and rows[0]["e_exact"] is not None


def test_n2_dissociation_warm_start(tmp_path):
    run_example("n2_dissociation.py", "--bonds", "1.0", "1.2", "--steps", "1", "--quick", "--out", str(tmp_path))
    rows = json.loads((tmp_path / "curve.json").read_text())
    assert [r["bond"] for r in rows] == [1.0, 1.2]
    assert (tmp_path / "curve.png").is_file()


def test_n2_dissociation_parts_share_one_folder(tmp_path):
    """Two invocations with disjoint --bonds (as two processes would run them) build one curve
    from the finished run folders; a rerun of a bond replaces its row, never duplicates it."""
    run_example("n2_dissociation.py", "--bonds", "1.1", "--steps", "1", "--quick", "--threads", "1", "--out", str(tmp_path))
    run_example("n2_dissociation.py", "--bonds", "1.3", "1.1", "--steps", "1", "--quick", "--threads", "1", "--out", str(tmp_path))
    rows = json.loads((tmp_path / "curve.json").read_text())
    assert [r["bond"] for r in rows] == [1.1, 1.3]
    assert all(r["energy"] >= r["e_exact"] - 1e-9 for r in rows)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["r1.1000", "r1.3000"]


def test_casscf_with_the_network_solver(tmp_path):
    run_example("casscf.py", "--quick", "--out", str(tmp_path))
    row = json.loads((tmp_path / "casscf.json").read_text())
    assert row["converged"] and row["solver_calls_nnqs"] > 1
    # variational on its own orbitals: never below PySCF's exact CASCI there
    assert row["e_casscf_nnqs"] >= row["e_casci_exact_on_nnqs_orbitals"] - 1e-9
