"""The subsampled natural-gradient step (``VMCConfig.sr_rows``) against exact minSR: the whole set
when it fits (the same bits), unbiased metric and force estimates above it, and a run that converges."""
import pytest
import torch

from nnqs.vmc.sr import inclusion_probabilities, sr_direction, subsample_rows
from tests_support import copy_split, ill_conditioned_system


def weights_of(u: int, seed: int) -> torch.Tensor:
    """Weights spread over five decades, one row much heavier than the rest (a Hartree-Fock-like peak)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.exp(5 * torch.randn(u, generator=g, dtype=torch.float64))
    w[0] = 50 * w.sum()
    return w / w.sum()


@pytest.mark.parametrize("rows", [1, 10, 64, 299])
def test_inclusion_probabilities_sum_to_the_rows_and_keep_the_heaviest(rows):
    w = weights_of(300, 0)
    pi = inclusion_probabilities(w, rows)
    assert abs(float(pi.sum()) - rows) < 1e-9 and float(pi.min()) > 0 and float(pi.max()) <= 1
    assert rows < 10 or float(pi[0]) == 1.0  # the peak is kept once the rows are more than a few
    order = torch.argsort(w)
    assert bool((pi[order].diff() >= -1e-15).all())  # heavier rows are at least as likely
    assert torch.equal(inclusion_probabilities(w, 300), torch.ones(300, dtype=torch.float64))


def test_all_rows_when_they_fit_give_the_exact_step():
    w = weights_of(50, 1)
    sample = subsample_rows(w, 50, torch.Generator().manual_seed(0))
    assert torch.equal(sample.index, torch.arange(50)) and torch.equal(sample.weights, w)


def test_subsampled_metric_and_force_are_unbiased():
    """Horvitz-Thompson: the mean over draws of sum_kept (w_i / pi_i) O_i O_i^T and of
    sum_kept (w_i / pi_i) O_i eps_i equals the whole set's (before the kept weights are normalised)."""
    u, p, rows = 200, 6, 40
    g = torch.Generator().manual_seed(2)
    o = torch.randn(u, p, generator=g, dtype=torch.float64)
    eps = torch.randn(u, generator=g, dtype=torch.float64)
    w = weights_of(u, 3)
    pi = inclusion_probabilities(w, rows)
    exact_s, exact_f = (w[:, None] * o).T @ o, (w[:, None] * o).T @ eps
    draws, s, f = 20000, torch.zeros(p, p, dtype=torch.float64), torch.zeros(p, dtype=torch.float64)
    for _ in range(draws):
        keep = torch.rand(u, generator=g, dtype=torch.float64) < pi
        hw = (w / pi)[keep][:, None]
        s += (hw * o[keep]).T @ o[keep]
        f += (hw * o[keep]).T @ eps[keep]
    assert float((s / draws - exact_s).abs().max()) < 0.02 * float(exact_s.abs().max())
    assert float((f / draws - exact_f).abs().max()) < 0.03 * float(exact_f.abs().max())


def test_subsample_direction_approaches_the_exact_one_as_rows_grow():
    """On an SR system of 600 rows: the direction from a subsample's rows is nearer the exact
    minSR direction the more rows it keeps, and equal to it with all of them."""
    jac, e_loc, w, energy = ill_conditioned_system(600, 240, seed=6)
    exact = sr_direction(copy_split(jac), e_loc, w, energy, 1e-3)

    def error(rows: int, seed: int) -> float:
        sample = subsample_rows(w, rows, torch.Generator().manual_seed(seed))
        part = copy_split(jac)
        part.real, part.imag = part.real[sample.index], part.imag[sample.index]
        d = sr_direction(part, e_loc[sample.index], sample.weights, energy, 1e-3)
        return float((d - exact).norm() / exact.norm())

    errors = [sum(error(rows, seed) for seed in range(5)) / 5 for rows in (100, 300, 500)]
    assert errors[0] > errors[1] > errors[2] and error(600, 0) < 1e-9
