"""Local energy against (H psi)(x)/psi(x) from an explicit matrix."""
import numpy as np
import pytest
import torch

from nnqs.configs import tokens_to_occupations
from nnqs.hamiltonian import CompactHamiltonian
from nnqs.local_energy import local_energy, local_energy_dense
from tests_support import full_index, openfermion_matrix, random_integrals, sector_tokens


def toy_log_psi(n: int, seed: int):
    """A smooth complex log-amplitude of the tokens (one- and two-orbital terms)."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(n, 4, generator=g, dtype=torch.float64)
    w2 = 0.3 * torch.randn(n, 4, n, 4, generator=g, dtype=torch.float64)
    ph = torch.randn(n, 4, generator=g, dtype=torch.float64)

    def fn(tokens: torch.Tensor) -> torch.Tensor:
        one_hot = torch.nn.functional.one_hot(tokens, 4).double()  # (B, n, 4)
        re = torch.einsum("bpi,pi->b", one_hot, w1) + torch.einsum("bpi,piqj,bqj->b", one_hot, w2, one_hot)
        return torch.complex(re, torch.einsum("bpi,pi->b", one_hot, ph))

    return fn


@pytest.mark.parametrize("n, n_alpha, n_beta", [(4, 2, 2), (5, 2, 1)])
@pytest.mark.parametrize("max_connected", [2**22, 7])  # one chunk; many tiny chunks
def test_exact_local_energy_matches_matrix(n, n_alpha, n_beta, max_connected):
    h, g = random_integrals(n, seed=3)
    full = openfermion_matrix(h, g, e_core=-1.3)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    sector = full[idx][:, idx]
    fn = toy_log_psi(n, seed=1)
    ham = CompactHamiltonian(h, g, -1.3, n_alpha, n_beta)
    samples = basis[torch.randperm(len(basis), generator=torch.Generator().manual_seed(0))[: len(basis) // 2]]
    result = local_energy(fn, ham, samples, fn(samples), max_batch=3, max_connected=max_connected)
    reference = local_energy_dense(sector, basis, fn(basis), samples)
    torch.testing.assert_close(result.values, reference, atol=1e-10, rtol=0)
    assert result.n_evaluated <= result.n_unique_connected


def test_sample_space_estimator_uses_only_sampled_configs():
    n, n_alpha, n_beta = 4, 2, 1
    h, g = random_integrals(n, seed=5)
    full = openfermion_matrix(h, g, e_core=0.0)
    basis = sector_tokens(n, n_alpha, n_beta)
    idx = full_index(basis)
    samples = basis[::3]
    sub = full[idx[::3]][:, idx[::3]]  # H restricted to the sample set
    fn = toy_log_psi(n, seed=2)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    result = local_energy(fn, ham, samples, fn(samples), estimator="sample-space")
    reference = local_energy_dense(sub, samples, fn(samples), samples)
    torch.testing.assert_close(result.values, reference, atol=1e-10, rtol=0)
    assert result.n_evaluated == 0


def test_all_amplitudes_evaluated_once():
    n, n_alpha, n_beta = 5, 2, 2
    h, g = random_integrals(n, seed=7)
    ham = CompactHamiltonian(h, g, 0.0, n_alpha, n_beta)
    calls = []
    fn = toy_log_psi(n, seed=3)

    def counting(tokens):
        calls.append(tokens.clone())
        return fn(tokens)

    samples = sector_tokens(n, n_alpha, n_beta)[:20]
    local_energy(counting, ham, samples, fn(samples), max_batch=16, max_connected=50)
    evaluated = torch.cat(calls)
    assert len(torch.unique(evaluated, dim=0)) == len(evaluated)  # no x' evaluated twice
    sample_set = {tuple(t) for t in samples.tolist()}
    assert not any(tuple(t) in sample_set for t in evaluated.tolist())  # samples' amplitudes reused
