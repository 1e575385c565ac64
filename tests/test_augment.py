"""Sample-set augmentation against the sector matrix: the selected y are those with the largest
|sum_{x in S} H[y, x] psi(x)|, and the augmented sample-space energy is the truncated state's energy."""
import numpy as np
import pytest
import torch

from hamiltonians import build_hamiltonian, get_spec, sector_hamiltonian
from nnqs.augment import strongest_connected
from nnqs.configurations import occupations_to_tokens
from nnqs.hamiltonian import CompactHamiltonian
from nnqs.vmc import VMCConfig, augmented, energy_and_loss
from nnqs.driver import new_state, run_vmc
from nnqs.wavefunction import TransformerWavefunction


@pytest.fixture(scope="module")
def h2o():
    ham = build_hamiltonian(get_spec("H2O"))
    occupations, matrix = sector_hamiltonian(ham)
    basis = occupations_to_tokens(torch.from_numpy(occupations))
    return ham, CompactHamiltonian.from_molecular(ham), basis, matrix.toarray()


def random_wf(ham, seed=0):
    torch.manual_seed(seed)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=16, n_layers=1,
                                 phase_hidden=16, hf_bias=2.0, dtype=torch.float64)  # fmt: skip
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return wf


def rows_of(basis: torch.Tensor, configs: torch.Tensor) -> list[int]:
    index = {tuple(t): i for i, t in enumerate(basis.tolist())}
    return [index[tuple(t)] for t in configs.tolist()]


@pytest.mark.parametrize("max_connected", [2**22, 700])  # one chunk; many chunks (same y from several)
def test_strongest_connected_equals_matrix_ranking(h2o, max_connected):
    ham, compact, basis, matrix = h2o
    wf = random_wf(ham)
    configs, _ = wf.sample(2000, generator=torch.Generator().manual_seed(3))
    assert 5 < len(configs) < 400  # leaves configurations outside the samples
    with torch.no_grad():
        log_psi = wf.log_psi(configs)
    m = 40
    chosen = strongest_connected(compact, configs, log_psi, m, max_connected=max_connected)
    # oracle: v = H[:, S] psi_S over the whole sector, outside S, largest |v| first
    s_rows = rows_of(basis, configs)
    v = matrix[:, s_rows] @ torch.exp(log_psi).numpy()
    outside = np.ones(len(basis), bool)
    outside[s_rows] = False
    expected = np.sort(np.abs(v[outside]))[::-1][:m]
    got = np.abs(v[rows_of(basis, chosen)])
    assert chosen.dtype == configs.dtype and chosen.shape == (m, ham.n_orbitals)
    assert not set(rows_of(basis, chosen)) & set(s_rows)  # none of them is a sample
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-14)  # the same |v|, in order


def test_augmented_sample_space_energy_is_the_truncated_state_energy(h2o):
    ham, compact, basis, matrix = h2o
    wf = random_wf(ham, seed=1)
    configs, _ = wf.sample(500, generator=torch.Generator().manual_seed(4))
    everything, weights = augmented(wf, compact, configs, 30)
    assert everything.shape[0] == configs.shape[0] + 30
    with torch.no_grad():
        log_psi = wf.log_psi(everything)
    torch.testing.assert_close(weights, torch.exp(2 * log_psi.real))  # exact model probabilities
    est, _ = energy_and_loss(wf, compact, everything, weights, "sample-space", n_draws=500)
    rows = rows_of(basis, everything)
    psi = torch.exp(log_psi).numpy()
    truncated = (psi.conj() @ matrix[np.ix_(rows, rows)] @ psi).real / (psi.conj() @ psi).real
    assert est.energy == pytest.approx(truncated, abs=1e-10)
    assert est.energy >= float(np.linalg.eigvalsh(matrix)[0]) - 1e-10  # variational


def test_augmented_run_steps_and_records_the_extra_count(h2o):
    ham, compact, _, _ = h2o
    cfg = VMCConfig(steps=3, samples=10**4, d_model=8, n_layers=1, phase_hidden=8, unique_min=0, unique_max=64,
                    augment=16, estimator="sample-space")  # fmt: skip
    state = new_state(random_wf(ham), cfg)
    results = run_vmc(state, compact, cfg)
    assert [r.extra["n_augmented"] for r in results] == [16, 16, 16]
    assert all(np.isfinite(r.energy) and r.n_samples == results[0].n_samples for r in results)
