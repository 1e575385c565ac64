"""The accuracy benchmark runs at toy size so it cannot rot."""
from benchmarks.accuracy import main


def test_quick_accuracy_benchmark(capsys):
    records = main(["--quick", "--threads", "1"])
    assert len(records) == 1 and records[0]["molecule"] == "H2"
    assert records[0]["e_exact"] < records[0]["energy"] + 1e-9  # variational
    assert '"benchmark": "accuracy"' in capsys.readouterr().out
