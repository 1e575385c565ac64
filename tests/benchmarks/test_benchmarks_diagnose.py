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


def test_each_part_of_the_error_vanishes_when_that_part_is_exact():
    """compare() on vectors built from the exact ground state of a random symmetric matrix: a
    starved entry restored gives the exact energy back, so does the real part of a vector whose
    only flaw is an imaginary part, and the exact signs mend a flipped sign."""
    import numpy as np
    import scipy.sparse as sp

    from benchmarks.diagnose import compare

    rng = np.random.default_rng(0)
    a = rng.normal(size=(30, 30))
    h = sp.csr_matrix(a + a.T)
    values, vectors = np.linalg.eigh(h.toarray())
    e0, c = values[0], vectors[:, 0]
    heavy = int(np.argmax(np.abs(c)))
    light = int(np.argsort(np.abs(c))[len(c) // 2])  # weight well above STARVED_MIN, not the heaviest

    starved = c.copy()
    starved[light] = 0.0
    parts, mask = compare(3.0 * starved, c, h, e0)  # any norm
    assert parts["error_mha"] > 1e-6 and parts["n_starved"] == 1 and mask[light]
    assert parts["error_starved_restored_mha"] == pytest.approx(0.0, abs=1e-9)

    r = rng.normal(size=len(c))
    r -= (r @ c) * c  # orthogonal to c, so the global phase that aligns psi with c is exact
    twisted = (c + 0.01j * r) * np.exp(0.7j)  # any global phase
    parts, _ = compare(twisted, c, h, e0)
    assert parts["error_mha"] > 1e-6 and parts["error_real_part_mha"] == pytest.approx(0.0, abs=1e-9)

    flipped = c.copy()
    flipped[heavy] *= -1.0
    parts, _ = compare(flipped, c, h, e0)
    assert parts["n_wrong_sign"] == 1 and parts["error_mha"] > 1e-3
    assert parts["error_exact_signs_mha"] == pytest.approx(0.0, abs=1e-9)
    assert parts["error_exact_modulus_mha"] == pytest.approx(parts["error_mha"], rel=1e-9)
