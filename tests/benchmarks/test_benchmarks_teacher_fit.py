"""The teacher-fit benchmark runs at toy size so it cannot rot."""
import pytest

from benchmarks.teacher_fit import main, parse_fits, parse_models


def test_quick_teacher_fit_benchmark_is_variational_and_improves_with_steps(capsys):
    short, longer = main(["--quick", "--threads", "1"])
    assert (short["steps"], longer["steps"]) == (30, 60) and short["energy_on"] == "sector"
    assert 0 <= longer["e_above_teacher_mha"] < short["e_above_teacher_mha"]  # far above the teacher after so few steps
    assert '"benchmark": "teacher_fit"' in capsys.readouterr().out
    from nnqs.vmc.config import VMCConfig

    assert short["decay"] == VMCConfig().pretrain_decay  # minibatches: the rate falls to decay x lr


def test_a_fit_of_every_row_records_the_constant_rate_it_took(capsys):
    """A fit with at least as many rows as the teacher holds keeps its rate (``fit_to_vector``), so its record
    says decay 1 whatever ``--decays`` asked."""
    from benchmarks.teacher_fit import records

    (line,) = records("H6@1.5", [(4096, 5)], 5e-3, 1, [(32, 2, 64, 4)], [0.05], ["modulus"])
    assert line["rows"] >= line["n_teacher"] and line["decay"] == 1.0


def test_malformed_fits_are_refused():
    assert parse_fits(["1024:1200", "64:5"]) == [(1024, 1200), (64, 5)]
    for bad in (["1024"], ["a:5"], ["0:5"], ["64:-1"]):
        with pytest.raises(ValueError):
            parse_fits(bad)
    with pytest.raises(SystemExit):
        main(["--fits", "1024-1200"])


def test_models_take_an_optional_head_count_that_divides_the_width():
    assert parse_models(["32x2x64", "32x2x64x2"]) == [(32, 2, 64, 4), (32, 2, 64, 2)]
    for bad in (["32x2"], ["32x2x64x3"], ["32x2x64x0"], ["32x2x64x2x1"], ["ax2x64"]):
        with pytest.raises(ValueError):
            parse_models(bad)


def test_the_split_is_zero_on_the_teacher_and_variational_on_the_fit(capsys):
    """The split of what a fit gets wrong: the teacher's own vector has nothing wrong; a fitted network's
    vectors on the teacher's set are never below the teacher (the lowest eigenvector of H on that set)."""
    import torch

    from benchmarks.teacher_fit import split, teacher_for
    from nnqs.vmc.selection import set_hamiltonian

    _, compact, sci = teacher_for("H6@1.5")
    matrix = set_hamiltonian(compact, sci.configs)

    class Teacher:  # log psi of the teacher's coefficients, as the real ansatz gives it
        def log_psi(self, configs, chunk_size=None):
            c = sci.coefficients.double()
            return torch.complex(c.abs().log(), torch.pi * (c < 0).double())

    exact = split(Teacher(), matrix, sci.coefficients, sci.energy, sci.configs)
    for key in ("e_set_mha", "e_modulus_mha", "e_sign_mha", "wrong_sign_weight", "infidelity"):
        assert abs(exact[key]) < 1e-8, key
    (line,) = main(["--system", "H6@1.5", "--threads", "1", "--fits", "64:30", "--models", "8x1x8"])
    assert line["d_model"] == 8 and line["parameters"] > 0
    assert min(line["e_set_mha"], line["e_modulus_mha"], line["e_sign_mha"]) > -1e-9
    assert 0 <= line["wrong_sign_weight"] <= 1 and 0 < line["infidelity"] <= 1
    with pytest.raises(SystemExit):
        main(["--models", "32x2"])
