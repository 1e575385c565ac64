"""The end-of-run benchmark runs at toy size so it cannot rot."""
from benchmarks.end_of_run import main


def test_quick_end_of_run_benchmark_gives_the_same_side_numbers_both_ways(capsys):
    (line,) = main(["--quick", "--threads", "1"])
    assert line["core_max_difference"] < 1e-10 and line["n_core"] >= 2
    assert line["e_subspace"] <= line["e_core"] + 1e-12  # H diagonalised on the core is below psi's quotient there
    for name in ("final_default", "final_unique_max_only"):
        assert 1 <= line[name]["n_unique"] <= line[name]["unique_max"]
    assert '"benchmark": "end_of_run"' in capsys.readouterr().out
