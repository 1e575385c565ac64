"""The sampled 1-RDM (nnqs.vmc.sampled_rdm) against its slow twin: PySCF's dense contraction of the
network's exact vector over the whole sector."""
import numpy as np
import pytest
import torch

from nnqs.vmc.civector import to_pyscf
from nnqs.vmc.sampled_rdm import rdm1_estimate, single_moves
from nnqs.vmc.wavefunction import TransformerWavefunction
from tests_support import sector_tokens

N, NA, NB = 5, 2, 2


@pytest.fixture(scope="module")
def state():
    """A random real-ansatz network, its sector and its exact normalised vector on it."""
    torch.manual_seed(11)
    wf = TransformerWavefunction(N, NA, NB, d_model=16, n_layers=1, n_heads=2, phase_hidden=16, hf_bias=0.5,
                                 real=True, dtype=torch.float64)
    configs = sector_tokens(N, NA, NB)
    with torch.no_grad():
        for name, p in wf.named_parameters():
            if name.startswith("phase"):
                p.normal_(0.0, 1.5)  # phases spread over [0, 2 pi): amplitudes of both signs
        psi = torch.exp(wf.log_psi(configs)).real.double().numpy()
    assert (psi < 0).sum() > 10 and (psi > 0).sum() > 10  # the signs are exercised
    return wf, configs, psi / np.linalg.norm(psi)


def exact_rdm1(configs, psi):
    from pyscf.fci import direct_spin1

    return direct_spin1.make_rdm1(to_pyscf(configs, psi, N, (NA, NB)), N, (NA, NB))


def test_single_moves_conserve_spin_and_stay_in_the_sector(state):
    _, configs, _ = state
    rows, p, q, sign, y = single_moves(configs)
    assert len(rows) == len(configs) * 2 * NA * (N - NA)  # every occupied -> empty move of each spin
    assert ((y & 1).sum(1) == NA).all() and ((y >> 1).sum(1) == NB).all()
    assert set(sign.unique().tolist()) == {-1.0, 1.0}


def test_whole_sector_with_exact_weights_equals_pyscfs_contraction(state):
    wf, configs, psi = state
    rng = np.random.default_rng(0)
    f = rng.normal(size=(N, N))
    est = rdm1_estimate(wf, configs, torch.ones(len(configs)), torch.as_tensor(psi**2), functionals=[f + f.T],
                        rows_per_pass=37)
    ref = exact_rdm1(configs, psi)
    assert np.abs(est.rdm1 - ref).max() < 1e-12
    assert est.functionals[0] == pytest.approx(float(((f + f.T) * ref).sum()), abs=1e-11)
    assert np.trace(est.rdm1) == pytest.approx(NA + NB, abs=1e-12)


def test_samples_agree_with_the_exact_rdm_within_their_errors(state):
    wf, configs, psi = state
    ref = exact_rdm1(configs, psi)
    errors = []
    for n_samples in (2_000, 200_000):
        gen = torch.Generator().manual_seed(1)
        samples, counts = wf.sample(n_samples, generator=gen)
        with torch.no_grad():
            ratios = wf.sampling_ratio(samples)
        est = rdm1_estimate(wf, samples, counts, ratios)
        assert np.abs(est.rdm1 - ref).max() <= 5 * est.stderr.max()
        assert np.allclose(est.rdm1, est.rdm1.T) and np.trace(est.rdm1) == pytest.approx(NA + NB, abs=1e-9)
        assert np.linalg.eigvalsh(est.rdm1).min() > -5 * est.stderr.max()  # PSD within its error
        errors.append(est.stderr.max())
    assert errors[1] < errors[0] / 5  # 100x the samples: about 10x smaller
