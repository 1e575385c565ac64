"""The external-space benchmark runs at toy size so it cannot rot."""
from benchmarks.external_space import main
from nnqs.vmc import selection


def test_quick_external_space_benchmark_gives_the_same_set_at_every_fold(capsys):
    default = selection.FOLD_ENTRIES
    every, rarely = main(["--quick", "--threads", "1"])
    assert (every["fold_entries"], rarely["fold_entries"]) == (0, 2**24) and every["n_external"] > 0
    assert rarely["same_keys"] and rarely["n_external"] == every["n_external"]
    assert rarely["coupling_max_difference"] < 1e-12
    assert selection.FOLD_ENTRIES == default  # restored
    assert '"benchmark": "external_space"' in capsys.readouterr().out
