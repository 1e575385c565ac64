"""The diagnosis at toy size, held against the run's own sampled energy and PySCF's FCI energy."""
import json

import pytest

from benchmarks.diagnose import main, quick_run


def test_diagnosis_agrees_with_the_run_and_fci(tmp_path, capsys):
    run = quick_run(tmp_path)  # what --quick diagnoses
    (record,) = main(["--system", "H2", "--runs", str(run)])
    result = json.loads((run / "result.json").read_text())
    assert record["e_exact"] == pytest.approx(result["e_exact"], abs=1e-9)  # Lanczos on the sector = PySCF FCI
    # the network's exact energy on the whole sector = the run's energy from 10^12 samples, exact local energies
    assert record["error_mha"] == pytest.approx(result["error_mha"], abs=max(0.01, 5000 * result["energy_stderr"]))
    for key in ("error_mha", "error_exact_signs_mha", "error_exact_modulus_mha", "error_starved_restored_mha",
                "error_real_part_mha"):
        assert record[key] > -1e-9  # variational: no state lies below the ground energy
    assert 0.0 <= record["infidelity"] < 1.0 and record["n_sector"] == 4
    assert record["n_starved"] > 0 or record["error_starved_restored_mha"] == record["error_mha"]
    assert record["outside_core_weight"] is not None and record["n_core"] >= 1
    assert json.loads(capsys.readouterr().out.strip()) == record


def test_a_sector_too_large_is_one_line():
    with pytest.raises(SystemExit, match="more than the 200,000"):
        main(["--system", "H2O/6-31g", "--runs", "nowhere"])


def test_a_folder_without_a_checkpoint_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no checkpoint at"):
        main(["--system", "H2", "--runs", str(tmp_path)])
