"""The real ansatz psi = sqrt(P) cos(phi): its amplitudes, derivatives, weights and fit against
plain formulas over the enumerated sector; sampled estimates against exact enumeration."""
import numpy as np
import pytest
import torch

from hamiltonians import build_hamiltonian, exact_energy, get_spec, sector_hamiltonian
from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.configurations import occupations_to_tokens
from nnqs.vmc.vmc_loop import KIND, new_state, vmc_steps
from nnqs.vmc.prefix_tree import TreeLogPsi
from nnqs.vmc.pretrain import fit_to_vector, pretrain_phase
from nnqs.vmc.sr import per_sample_jacobian, split_jacobian, sr_direction
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.estimates import energy_and_loss, estimate, final_energy
from nnqs.vmc.wavefunction import TransformerWavefunction


@pytest.fixture(scope="module")
def lih():
    ham = build_hamiltonian(get_spec("LiH"))
    occupations, matrix = sector_hamiltonian(ham)
    return ham, occupations_to_tokens(torch.from_numpy(occupations)), matrix


def real_wf(ham, seed=0):
    torch.manual_seed(seed)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=16, n_layers=1,
                                 phase_hidden=16, hf_bias=0.5, real=True, dtype=torch.float64)
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return wf


def dense_psi(wf, basis) -> torch.Tensor:
    """sqrt(P) cos(phi) over the sector, from the two heads alone (the oracle)."""
    return torch.exp(0.5 * wf.log_prob(basis)) * torch.cos(wf.phase(basis).double())


def test_log_psi_is_sqrt_p_times_cos_phi_with_both_signs(lih):
    ham, basis, _ = lih
    wf = real_wf(ham)
    with torch.no_grad():
        psi = torch.exp(wf.log_psi(basis))
        expected = dense_psi(wf, basis)
    assert bool((expected < 0).any()) and bool((expected > 0).any())
    torch.testing.assert_close(psi.real, expected, atol=1e-14, rtol=1e-12)
    assert float(psi.imag.abs().max()) < 1e-12 * float(psi.abs().max())
    ratio = wf.sampling_ratio(basis)
    torch.testing.assert_close(ratio, torch.cos(wf.phase(basis).double()).square().detach(), atol=0, rtol=0)


def test_jacobians_are_the_derivatives_of_log_abs_psi_and_have_no_imaginary_part(lih):
    ham, basis, _ = lih
    wf = real_wf(ham, seed=1)
    configs = basis[::17]
    params = list(wf.parameters())
    rows = []
    for x in configs:  # autograd of log |sqrt(P) cos phi|, one configuration at a time
        value = torch.log(dense_psi(wf, x.unsqueeze(0)).abs())[0]
        grads = torch.autograd.grad(value, params, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, params)]))
    reference = torch.stack(rows)
    full = per_sample_jacobian(wf, configs, chunk=4)
    torch.testing.assert_close(full.real, reference, atol=1e-10, rtol=1e-8)
    assert float(full.imag.abs().max()) == 0.0
    split = split_jacobian(wf, configs, chunk=5)
    assert split is not None and bool(split.real_columns.all()) and split.imag.shape == (len(configs), 0)
    torch.testing.assert_close(split.real, reference, atol=1e-10, rtol=1e-8)
    g = torch.Generator().manual_seed(2)  # the SR direction: only the real block, the same either way
    e_loc = torch.randn(len(configs), generator=g, dtype=torch.float64).to(torch.complex128)
    w = torch.softmax(torch.randn(len(configs), generator=g, dtype=torch.float64), 0)
    energy = float((w * e_loc.real).sum())
    o = w.sqrt()[:, None] * (reference - (w[:, None] * reference).sum(0))
    lam = 1e-3 * float(o.pow(2).sum(1).mean()) + 1e-12
    dense = torch.linalg.solve(o.T @ o + lam * torch.eye(o.shape[1], dtype=torch.float64), o.T @ (w.sqrt() * (e_loc.real - energy)))
    direction = sr_direction(split, e_loc, w, energy, 1e-3)
    assert float((direction - dense).abs().max()) <= 1e-7 * float(dense.abs().max())
    torch.testing.assert_close(sr_direction(full, e_loc, w, energy, 1e-3), direction, atol=1e-9, rtol=1e-7)


def test_set_estimator_and_gradient_equal_exact_enumeration(lih):
    """Weights |psi|^2 on the whole sector (the core mode's): the energy and the surrogate loss's
    gradient are those of <psi|H|psi> / <psi|psi> with psi = sqrt(P) cos(phi)."""
    ham, basis, matrix = lih
    wf = real_wf(ham, seed=2)
    compact = CompactHamiltonian.from_molecular(ham)
    with torch.no_grad():
        weights = torch.softmax(2 * wf.log_psi(basis).real, 0)
    est, loss = energy_and_loss(wf, compact, basis, weights, "sample-space")
    wf.zero_grad()
    loss.backward()
    vmc_grad = [p.grad.clone() for p in wf.parameters()]
    wf.zero_grad()
    psi = dense_psi(wf, basis)
    h = torch.from_numpy(matrix.toarray())
    exact = (psi @ (h @ psi)) / (psi @ psi)
    exact.backward()
    assert abs(est.energy - exact.item()) < 1e-10
    for g_vmc, p in zip(vmc_grad, wf.parameters()):
        torch.testing.assert_close(g_vmc, p.grad, atol=1e-9, rtol=1e-7)


def test_importance_weights_and_their_standard_error_follow_the_written_formulas():
    g = torch.Generator().manual_seed(3)
    counts = torch.randint(1, 6, (9,), generator=g)
    ratios = torch.rand(9, generator=g, dtype=torch.float64)
    e_loc = torch.randn(9, generator=g, dtype=torch.float64).to(torch.complex128)
    est = estimate(e_loc, counts, ratios=ratios)
    r = np.repeat(ratios.numpy(), counts.numpy())  # every sample on its own
    e = np.repeat(e_loc.real.numpy(), counts.numpy())
    mean = (r * e).sum() / r.sum()
    assert est.energy == pytest.approx(mean, abs=1e-14)
    assert est.variance == pytest.approx((r * (e - mean) ** 2).sum() / r.sum(), rel=1e-12)
    assert est.stderr == pytest.approx(np.sqrt((r**2 * (e - mean) ** 2).sum()) / r.sum(), rel=1e-12)
    plain = estimate(e_loc, counts, ratios=torch.ones(9, dtype=torch.float64))  # ratio 1: the plain estimate
    reference = estimate(e_loc, counts)
    assert plain.energy == pytest.approx(reference.energy, abs=1e-14) and plain.stderr == pytest.approx(reference.stderr, rel=1e-12)


def test_sampled_energy_of_the_real_ansatz_is_its_exact_energy(lih):
    """Samples come from P; with the cos^2 weights the reported energy is <psi|H|psi> / <psi|psi>,
    not the energy of the P-weighted mixture."""
    ham, basis, matrix = lih
    wf = real_wf(ham, seed=4)
    compact = CompactHamiltonian.from_molecular(ham)
    with torch.no_grad():
        psi = dense_psi(wf, basis)
        h = torch.from_numpy(matrix.toarray())
        exact = float((psi @ (h @ psi)) / (psi @ psi))
        p = torch.exp(wf.log_prob(basis))
        unweighted = float((p * (h @ psi) / psi).sum())  # what ignoring the weights would report
        est = final_energy(wf, compact, 10**12, torch.Generator().manual_seed(0))
    assert abs(unweighted - exact) > 100 * est.stderr  # the test tells the two apart
    assert abs(est.energy - exact) < 5 * est.stderr + 1e-9


def test_tree_log_psi_of_the_real_ansatz_is_its_log_psi(lih):
    ham, basis, _ = lih
    wf = real_wf(ham, seed=5)
    with torch.no_grad():
        exact = wf.log_psi(basis)
    tree = TreeLogPsi(wf, rows=7)(basis)
    torch.testing.assert_close(tree.real, exact.real, atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.cos(tree.imag), torch.cos(exact.imag), atol=0, rtol=0)  # the same signs


def test_fit_sets_absolute_signs(lih):
    """The fit of the real ansatz to the exact ground state: signs by cos(phi) itself, not relative
    to a reference, so psi and the vector overlap (up to one global sign) near 1."""
    ham, basis, matrix = lih
    w, v = np.linalg.eigh(matrix.toarray())
    c = torch.from_numpy(v[:, 0])
    keep = c.abs() > 1e-3
    configs, coefficients = basis[keep], c[keep] / c[keep].norm()
    wf = real_wf(ham, seed=6)
    fit_to_vector(wf, configs, coefficients, steps=400, lr=1e-2)
    with torch.no_grad():
        psi = dense_psi(wf, basis)
    overlap = float((psi @ c) ** 2 / (psi @ psi))
    assert overlap > 0.99
    heavy = c.abs() > 0.05
    assert torch.equal(torch.sign(psi[heavy] * c[heavy][0] * psi[heavy][0]), torch.sign(c[heavy]))
    assert float(torch.cos(wf.phase(configs[:1]).detach().double()).abs()) > 0.9  # absolute: cos(phi) itself near +-1


def test_checkpoint_rebuilds_the_real_ansatz(lih, tmp_path):
    ham, basis, _ = lih
    wf = real_wf(ham, seed=7)
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, KIND, {"model_config": dict(wf.hparams), "model": wf.state_dict()})
    data = load_checkpoint(path, KIND)
    again = TransformerWavefunction(**data["model_config"])
    again.load_state_dict(data["model"])
    assert again.real
    with torch.no_grad():
        torch.testing.assert_close(again.log_psi(basis), wf.log_psi(basis), atol=0, rtol=0)


@pytest.mark.parametrize("selection", ["samples", "core"])
def test_h2_end_to_end_reaches_fci_with_the_real_ansatz(selection):
    ham = build_hamiltonian(get_spec("H2"))
    e_fci = exact_energy(ham)
    cfg = VMCConfig(steps=150, selection=selection, lr=0.1, ansatz="real")
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=cfg.d_model, n_layers=cfg.n_layers,
                                 phase_hidden=cfg.phase_hidden, real=True, dtype=torch.float64)
    compact = CompactHamiltonian.from_molecular(ham)
    pretrain_phase(wf, compact, 300)  # absolute perturbative signs, as a run without a teacher vector starts
    state = new_state(wf, cfg)
    if selection == "core":
        state.core = wf.hf_config().unsqueeze(0)
    vmc_steps(state, compact, cfg)
    final = final_energy(wf, compact, 10**12, state.generator)
    assert abs(final.energy - e_fci) < 1e-4, (final.energy, e_fci)
