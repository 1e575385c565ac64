"""VMC estimator and gradient against exact enumeration; SR against its dense form; H2 end to end."""
import numpy as np
import pytest
import torch

from hamiltonians import build_hamiltonian, exact_energy, get_spec, sector_hamiltonian
from nnqs.vmc.configurations import occupations_to_tokens
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.sr import per_sample_jacobian, sr_direction
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.estimates import energy_and_loss, final_energy
from nnqs.vmc.vmc_loop import new_state, vmc_steps
from nnqs.vmc.wavefunction import TransformerWavefunction


@pytest.fixture(scope="module")
def lih():
    ham = build_hamiltonian(get_spec("LiH"))
    occupations, matrix = sector_hamiltonian(ham)
    return ham, occupations_to_tokens(torch.from_numpy(occupations)), matrix


def random_wf(ham, seed=0, **kw):
    torch.manual_seed(seed)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=16, n_layers=1,
                                 phase_hidden=16, hf_bias=0.5, dtype=torch.float64, **kw)
    with torch.no_grad():
        for p in wf.parameters():
            p.add_(0.3 * torch.randn_like(p))  # away from the symmetric start
    return wf


def exact_energy_functional(wf, basis, matrix) -> torch.Tensor:
    """<psi|H|psi> / <psi|psi> over the whole enumerated sector, differentiable."""
    psi = torch.exp(wf.log_psi(basis))
    h = torch.from_numpy(matrix.toarray()).to(torch.complex128)
    return ((psi.conj() @ (h @ psi)) / (psi.conj() @ psi)).real


def test_estimator_and_gradient_equal_exact_enumeration(lih):
    ham, basis, matrix = lih
    wf = random_wf(ham)
    compact = CompactHamiltonian.from_molecular(ham)
    weights = torch.exp(wf.log_prob(basis)).detach()  # exact |psi|^2, sums to 1 over the sector
    assert abs(float(weights.sum()) - 1) < 1e-10
    est, loss = energy_and_loss(wf, compact, basis, weights)
    wf.zero_grad()
    loss.backward()
    vmc_grad = [p.grad.clone() for p in wf.parameters()]
    wf.zero_grad()
    exact = exact_energy_functional(wf, basis, matrix)
    exact.backward()
    assert abs(est.energy - exact.item()) < 1e-10
    for g_vmc, p in zip(vmc_grad, wf.parameters()):
        torch.testing.assert_close(g_vmc, p.grad, atol=1e-9, rtol=1e-7)


def test_per_sample_jacobian_matches_autograd_loop(lih):
    ham, basis, _ = lih
    wf = random_wf(ham)
    configs = basis[:7]
    jac = per_sample_jacobian(wf, configs, chunk=3)
    for i in range(len(configs)):
        for part, column in (("real", jac[i].real), ("imag", jac[i].imag)):
            wf.zero_grad()
            getattr(wf.log_psi(configs[i : i + 1])[0], part).backward()
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in wf.parameters()])
            torch.testing.assert_close(column, flat, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("separate_phase", [False, True])  # general 2U x 2U solve; two U x U blocks
def test_sr_direction_equals_dense_parameter_space_solve(separate_phase):
    g = torch.Generator().manual_seed(0)
    u, p = 6, 15
    jac = torch.complex(torch.randn(u, p, generator=g, dtype=torch.float64), torch.randn(u, p, generator=g, dtype=torch.float64))
    if separate_phase:  # parameters 0..8 move the modulus only, 9..14 the phase only
        jac = torch.complex(jac.real * (torch.arange(p) < 9), jac.imag * (torch.arange(p) >= 9))
    e_loc = torch.complex(torch.randn(u, generator=g, dtype=torch.float64), 0.1 * torch.randn(u, generator=g, dtype=torch.float64))
    w = torch.rand(u, generator=g, dtype=torch.float64)
    w = w / w.sum()
    energy = float((w * e_loc.real).sum())
    shift = 1e-3
    direction = sr_direction(jac, e_loc, w, energy, shift)
    o = w.sqrt()[:, None] * (jac - (w[:, None] * jac).sum(0))
    eps = w.sqrt() * (e_loc - energy)
    s = (o.conj().T @ o).real
    force = (o.conj().T @ eps).real
    lam = shift * float(torch.cat([o.real, o.imag]).pow(2).sum(1).mean())
    dense = torch.linalg.solve(s + (lam + 1e-12) * torch.eye(p, dtype=torch.float64), force)
    torch.testing.assert_close(direction, dense, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("selection, lr", [("samples", 0.1), ("core", 0.1)])
def test_h2_end_to_end_reaches_fci(selection, lr):
    ham = build_hamiltonian(get_spec("H2"))
    e_fci = exact_energy(ham)
    cfg = VMCConfig(steps=150, selection=selection, lr=lr)
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=cfg.d_model,
                                 n_layers=cfg.n_layers, phase_hidden=cfg.phase_hidden, dtype=torch.float64)
    state = new_state(wf, cfg)
    if selection == "core":
        state.core = wf.hf_config().unsqueeze(0)  # the core mode's start without a teacher
    compact = CompactHamiltonian.from_molecular(ham)
    results = vmc_steps(state, compact, cfg)
    assert len(results) == 150
    final = final_energy(wf, compact, 10**12, state.generator)
    assert abs(final.energy - e_fci) < 1e-4, (final.energy, e_fci)
    assert np.isfinite(final.stderr)


@pytest.mark.parametrize("lr", [0.1, 2e-3])
def test_learning_rate_warms_up_then_decays_to_a_tenth(lr):
    from nnqs.vmc.optimizers import lr_factor

    cfg = VMCConfig(steps=100, lr=lr, warmup=5)
    factors = [lr_factor(s, cfg) for s in range(100)]
    assert factors[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert all(a >= b for a, b in zip(factors[4:], factors[5:]))  # never rises after warmup (a small lr too)
    assert lr_factor(100, cfg) == pytest.approx(0.1)
    assert lr_factor(100, VMCConfig(steps=100, lr=lr, lr_final=lr / 4)) == pytest.approx(0.25)


def test_sr_momentum_step_solves_the_spring_least_squares(lih):
    """With ``sr_momentum`` mu, the second step's update is d = argmin |X d - e|^2 + lam |d - mu d_1|^2
    (d_1 the first step's applied direction, kept in the optimiser's state): solved here in
    parameter space, (S + lam) d = f + lam mu d_1, on the whole sector as the working set."""
    from nnqs.vmc.vmc_loop import one_vmc_step
    from nnqs.vmc.local_energy import local_energy

    ham, basis, _ = lih
    wf = random_wf(ham)
    cfg = VMCConfig(steps=4, selection="core", sr_momentum=0.9, sr_momentum_schedule="constant", grad_clip=1e9,
                    core_every=1000, lr=0.01)
    state = new_state(wf, cfg)
    state.core = basis  # the working set is the whole sector, whatever is sampled
    compact = CompactHamiltonian.from_molecular(ham)
    one_vmc_step(state, compact, cfg)
    state.step += 1
    previous = torch.cat([state.opt.state[p]["sr_previous"].reshape(-1) for p in wf.parameters()])
    before = torch.cat([p.detach().reshape(-1).clone() for p in wf.parameters()])
    with torch.no_grad():
        log_psi = wf.log_psi(basis)
    w = torch.exp(2 * log_psi.real - torch.logsumexp(2 * log_psi.real, 0))
    e_loc = local_energy(wf.log_psi, compact, basis, log_psi).values
    energy = float((w * e_loc.real).sum())
    jac = per_sample_jacobian(wf, basis)
    o = w.sqrt()[:, None] * (jac - (w[:, None] * jac).sum(0))
    s = (o.conj().T @ o).real
    force = (o.conj().T @ (w.sqrt() * (e_loc - energy))).real
    lam = cfg.sr_shift * float(torch.cat([o.real, o.imag]).pow(2).sum(1).mean()) + 1e-12
    expected = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force + lam * 0.9 * previous)
    lr = state.opt.param_groups[0]["lr"]
    one_vmc_step(state, compact, cfg)
    applied = (before - torch.cat([p.detach().reshape(-1) for p in wf.parameters()])) / lr
    torch.testing.assert_close(applied, expected, atol=1e-7 * float(expected.abs().max()), rtol=0)
    plain = torch.linalg.solve(s + lam * torch.eye(len(s), dtype=torch.float64), force)
    assert float((applied - plain).abs().max()) > 1e-3 * float(plain.abs().max())  # the momentum moved it


def test_momentum_ramp_is_zero_at_the_peak_learning_rate_and_full_at_the_end():
    from nnqs.vmc.optimizers import lr_factor, momentum_factor

    cfg = VMCConfig(steps=105, warmup=5)
    ramp = [momentum_factor(s, cfg) for s in range(106)]
    assert ramp[:6] == [0.0] * 6  # warmup, then the peak learning rate
    assert all(a <= b for a, b in zip(ramp, ramp[1:])) and ramp[105] == pytest.approx(1.0)
    for s in range(5, 106):  # the momentum rises exactly as the cosine learning rate falls
        assert ramp[s] == pytest.approx((1.0 - lr_factor(s, cfg)) / 0.9)
    assert momentum_factor(0, VMCConfig(sr_momentum_schedule="constant")) == 1.0


def test_sample_count_adapts_to_the_unique_window_of_plain_sampled_vmc():
    """unique_min / unique_max (selection "samples"): double below the window, quarter above it."""
    from nnqs.vmc.draws import adapt_samples

    cfg = VMCConfig(selection="samples", unique_min=100, unique_max=1000)
    assert adapt_samples(4000, 50, cfg) == 8000
    assert adapt_samples(4000, 5000, cfg) == 1000
    assert adapt_samples(4000, 500, cfg) == 4000
    assert adapt_samples(400, 5000, cfg) == 100  # never below 100 samples
    assert adapt_samples(4000, 50, VMCConfig(selection="samples", unique_min=0)) == 4000  # 0: off


def test_an_older_runs_config_with_a_retired_setting_still_loads(tmp_path):
    """config.toml files written before core_rule was removed hold its only remaining value."""
    from nnqs.common.config import build_config
    from nnqs.common.errors import UserError

    (tmp_path / "old.toml").write_text('core_rule = "first-order"\nsteps = 3\n')
    assert build_config(VMCConfig, tmp_path / "old.toml").steps == 3
    (tmp_path / "other.toml").write_text('core_rule = "amplitude"\n')
    with pytest.raises(UserError, match="core_rule = 'amplitude' is no longer supported"):
        build_config(VMCConfig, tmp_path / "other.toml")


def test_the_reported_energys_unique_bound_follows_the_connections(lih, monkeypatch):
    """Where unique samples x connections would pass FINAL_CONNECTED_MAX, the reported energy's draw
    keeps fewer unique configurations (between half the bound and the bound), and stays an unbiased
    estimate: within a few standard errors of <psi|H|psi> over the whole sector."""
    import nnqs.vmc.estimates as estimates

    ham, basis, matrix = lih
    compact = CompactHamiltonian.from_molecular(ham)
    wf = random_wf(ham)
    assert estimates.final_unique_max(compact) == estimates.FINAL_UNIQUE_MAX  # 4 orbitals: far from the bound
    monkeypatch.setattr(estimates, "FINAL_CONNECTED_MAX", 40 * compact.n_connected)
    assert estimates.final_unique_max(compact) == 40
    with torch.no_grad():
        exact = float(exact_energy_functional(wf, basis, matrix))
    found = final_energy(wf, compact, 10**12, torch.Generator().manual_seed(0))
    assert 20 <= found.n_unique <= 40
    assert abs(found.energy - exact) < 4 * found.stderr, (found.energy, exact, found.stderr)


def test_a_run_whose_steps_are_not_set_takes_them_from_its_qubits_and_saves_them(tmp_path, monkeypatch):
    """steps None: STEPS, or WIDE_STEPS at WIDE_QUBITS qubits and more (H2 has 4 here, by a lowered bound);
    the run's config.toml and result hold the count, so a resumed run keeps it; a set count is kept."""
    import dataclasses

    import nnqs.vmc.config as config
    from nnqs.common.config import build_config
    from nnqs.vmc.config import steps_for, toy_config
    from nnqs.vmc.optimizers import lr_factor
    from nnqs.vmc.run import run_molecule

    assert VMCConfig().steps is None and steps_for(20) == steps_for(26) == 300 and steps_for(32) == steps_for(52) == 20
    assert VMCConfig(steps=7).for_system(32).steps == 7 and VMCConfig().for_system(31).steps == 300
    with pytest.raises(ValueError, match="steps are not set"):
        lr_factor(0, VMCConfig())
    monkeypatch.setattr(config, "STEPS", 3)
    monkeypatch.setattr(config, "WIDE_STEPS", 2)
    unset = dataclasses.replace(toy_config(1), steps=None, threads=1)
    for wide, expected in ((64, 3), (4, 2)):
        monkeypatch.setattr(config, "WIDE_QUBITS", wide)
        out = tmp_path / f"wide_{wide}"
        result = run_molecule(get_spec("H2"), unset, out, progress=False, exact=False)
        assert result["steps"] == expected and build_config(VMCConfig, out / "config.toml").steps == expected
        assert len((out / "history.csv").read_text().splitlines()) == expected + 1
