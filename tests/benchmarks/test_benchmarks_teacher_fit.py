"""The teacher-fit benchmark runs at toy size so it cannot rot."""
import pytest

from benchmarks.teacher_fit import main, parse_fits


def test_quick_teacher_fit_benchmark_is_variational_and_improves_with_steps(capsys):
    short, longer = main(["--quick", "--threads", "1"])
    assert (short["steps"], longer["steps"]) == (30, 60) and short["energy_on"] == "sector"
    assert 0 <= longer["e_above_teacher_mha"] < short["e_above_teacher_mha"]  # far above the teacher after so few steps
    assert '"benchmark": "teacher_fit"' in capsys.readouterr().out


def test_malformed_fits_are_refused():
    assert parse_fits(["1024:1200", "64:5"]) == [(1024, 1200), (64, 5)]
    for bad in (["1024"], ["a:5"], ["0:5"], ["64:-1"]):
        with pytest.raises(ValueError):
            parse_fits(bad)
    with pytest.raises(SystemExit):
        main(["--fits", "1024-1200"])
