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


def test_quick_external_space_benchmark_forms_the_same_set_with_either_doubles(capsys):
    from nnqs.vmc import compact_hamiltonian, hamiltonian_terms

    lines = main(["--quick", "--threads", "1", "--doubles", "joined", "elementwise"])
    assert [line["doubles"] for line in lines] == ["joined", "joined", "elementwise", "elementwise"]
    assert all(line["same_keys"] and line["coupling_max_difference"] < 1e-12 for line in lines)
    assert compact_hamiltonian.double_terms is hamiltonian_terms.double_terms  # restored
