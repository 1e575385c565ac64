"""The fit-step benchmark runs at toy size so it cannot rot."""
from benchmarks.fit_step import main


def test_quick_fit_step_benchmark_times_both_minibatches(capsys):
    (line,) = main(["--quick", "--threads", "1"])
    assert line["raw_ms"] > 0 and line["merged_ms"] > 0 and 0 < line["distinct_fraction"] <= 1
    assert line["ratio"] == line["merged_ms"] / line["raw_ms"]
    assert '"benchmark": "fit_step"' in capsys.readouterr().out
