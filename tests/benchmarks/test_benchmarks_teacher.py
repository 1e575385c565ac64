"""The teacher benchmark runs at toy size so it cannot rot."""
from benchmarks.common import system_spec
from benchmarks.teacher import main


def test_quick_teacher_benchmark_is_variational_and_falls_with_size(capsys):
    small, large = main(["--quick", "--threads", "1"])
    assert (small["n_configs"], large["n_configs"]) == (16, 64) and small["reference_method"] == "fci"
    assert 0 < large["error_mha"] < small["error_mha"]  # upper bounds of FCI, lower with a larger set
    assert '"benchmark": "teacher"' in capsys.readouterr().out


def test_system_names_give_basis_bond_and_frozen_core():
    spec = system_spec("N2/6-31g@2.2")
    assert (spec.basis, spec.active) == ("6-31g", (16, 10)) and spec.atom.endswith("0 0 2.2")
    assert system_spec("H2O/6-31g").active is None and system_spec("LiH").basis == "sto-3g"
    assert system_spec("N2/cc-pvdz").active == (26, 10)  # 52 qubits


def test_a_given_reference_is_used_and_a_malformed_one_refused(capsys):
    import pytest

    line = main(["--systems", "H2O/sto-3g", "--sizes", "16", "--references", "H2O/sto-3g=-75.0", "--threads", "1"])[0]
    assert line["reference_method"] == "given" and line["error_mha"] == pytest.approx((line["energy"] + 75.0) * 1e3)
    with pytest.raises(SystemExit):
        main(["--references", "H2O/sto-3g:-75.0"])
