"""Phase pretraining: targets follow first-order perturbation theory, and the fit reaches them."""
import math

import numpy as np
import torch

from hamiltonians import build_hamiltonian, get_spec, sector_hamiltonian
from nnqs.vmc.configurations import occupations_to_tokens
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.pretrain import perturbative_signs, pretrain_phase
from nnqs.vmc.wavefunction import TransformerWavefunction


def test_targets_match_first_order_signs_and_fit_sets_them():
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    torch.manual_seed(0)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=16, dtype=torch.float64)
    configs, target = perturbative_signs(wf, compact)
    # independent reference: the sector matrix row of the HF determinant
    occ, matrix = sector_hamiltonian(ham)
    basis = {tuple(t): i for i, t in enumerate(occupations_to_tokens(torch.from_numpy(occ)).tolist())}
    hf_row = matrix[basis[tuple(configs[0].tolist())]].toarray().ravel()
    for x, phase in zip(configs[1:].tolist(), target[1:].tolist()):
        element = hf_row[basis[tuple(x)]]
        assert element != 0 and (phase == math.pi) == (element > 0)
    assert len(configs) - 1 == np.count_nonzero(hf_row) - 1  # every nonzero off-diagonal element of the HF row
    loss = pretrain_phase(wf, compact, steps=300)
    assert loss < 1e-3
    with torch.no_grad():
        phi = wf.phase(configs).double()
    relative = torch.cos(phi[1:] - phi[0])
    assert torch.all(torch.sign(relative) == torch.where(target[1:] > 0, -1.0, 1.0))


def test_a_run_fits_its_teacher_on_minibatches_of_pretrain_batch_rows(monkeypatch):
    """VMCConfig.pretrain_batch is the fit's rows per step (the teacher of LiH: whole, far below 4,096)."""
    import nnqs.vmc.run as run
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.pretrain import FIT_ROWS

    seen = {}
    monkeypatch.setattr(run, "fit_to_vector", lambda *args, **kwargs: seen.update(kwargs))
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    for batch in (FIT_ROWS, 64):
        cfg = VMCConfig(pretrain_batch=batch, d_model=8, n_layers=1, phase_hidden=8)
        wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, phase_hidden=8)
        out = run.pretrain(wf, compact, cfg, progress=False)
        assert seen["batch"] == batch and seen["seed"] == cfg.seed and out["n_teacher"] > 1
    assert VMCConfig().pretrain_batch == FIT_ROWS == 1024


def test_a_larger_teacher_is_fitted_for_more_steps(monkeypatch):
    """fit_steps: the configured steps up to FIT_WHOLE configurations, 2 sqrt(N / FIT_WHOLE) times as many
    above, at most FIT_STEPS_GROWTH times (17 sqrt(N / FIT_WHOLE), at most FIT_WIDE_GROWTH, at WIDE_QUBITS qubits
    and more); a run hands that count to the fit."""
    import nnqs.vmc.run as run
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.pretrain import FIT_STEPS_GROWTH, FIT_WHOLE, FIT_WIDE_GROWTH, WIDE_QUBITS, fit_steps

    assert fit_steps(1200, 660) == fit_steps(1200, FIT_WHOLE) == 1200  # every STO-3G teacher of the table
    assert fit_steps(1200, 4 * FIT_WHOLE) == 4800 and fit_steps(1200, 34573) == 6973  # H10 at 1.5 A
    assert fit_steps(1200, 12389) == 4174 and fit_steps(1200, 48138) == 7200  # H2O/6-31G, N2/6-31G
    assert fit_steps(1200, 100 * FIT_WHOLE) == FIT_STEPS_GROWTH * 1200 and fit_steps(0, 10**5) == 0
    # at WIDE_QUBITS qubits and more: 17 sqrt(N / FIT_WHOLE) times, at most FIT_WIDE_GROWTH times
    assert WIDE_QUBITS == 32 and fit_steps(1200, 12389, 26) == 4174 and fit_steps(1200, 34573, 20) == 6973
    assert fit_steps(1200, 48138, 32) == fit_steps(1200, 56026, 32) == FIT_WIDE_GROWTH * 1200 == 68400  # N2/6-31G
    assert fit_steps(1200, 2 * FIT_WHOLE, 52) == round(1200 * 17 * 2**0.5) and fit_steps(1200, FIT_WHOLE, 52) == 1200
    seen = []
    monkeypatch.setattr(run, "fit_to_vector", lambda *args, **kwargs: seen.append(args[3]))
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, phase_hidden=8)
    for whole in (FIT_WHOLE, 4):  # LiH's teacher (a few dozen configurations) as a "large" one
        monkeypatch.setattr(run, "fit_steps", lambda steps, n, q, whole=whole: fit_steps(steps, n, q, whole))
        out = run.pretrain(wf, compact, VMCConfig(pretrain_steps=10, d_model=8, n_layers=1, phase_hidden=8),
                           progress=False)
        assert seen[-1] == fit_steps(10, out["n_teacher"], 2 * ham.n_orbitals, whole)
    assert seen[0] == 10 and seen[1] > 10


def test_rows_drawn_by_modulus_estimate_the_same_loss_and_the_rate_falls_to_its_floor():
    """Batches(by_modulus=True): cross-entropy rows drawn by |c| and reweighted give the loss of every row
    in expectation (enumerated: the expected weight of each row is its |c|^2); the rate schedule starts at lr
    and ends at decay * lr, monotone between."""
    from nnqs.vmc.pretrain import Batches, _schedule

    c = torch.tensor([0.9, -0.3, 0.2, 0.1, -0.05, 0.01], dtype=torch.float64)
    weight2, sign_weight = c**2 / (c**2).sum(), c.abs() / c.abs().sum()
    draw = Batches(weight2, sign_weight, batch=4096, seed=3, by_modulus=True)
    expected = torch.zeros_like(c)
    for _ in range(50):
        rows, w, _, _ = next(draw)
        expected.index_add_(0, rows, w)
    assert torch.allclose(expected / 50, weight2, rtol=0.05, atol=1e-4)  # 204,800 draws
    # the heaviest row takes a share |c| / sum|c| of the draws, not |c|^2 (0.58 against 0.86)
    assert abs(float((rows == 0).double().mean()) - float(sign_weight[0])) < 0.03
    rate = _schedule(5e-3, 0.05, 100)
    values = [rate(k) for k in range(100)]
    assert values[0] == 5e-3 and abs(values[-1] - 2.5e-4) < 1e-12
    assert all(a >= b for a, b in zip(values, values[1:]))
    assert _schedule(2e-3, 1.0, 100)(57) == 2e-3


def test_a_minibatch_with_each_row_once_has_the_loss_and_gradient_of_its_draws():
    """merged: the drawn rows (with repeats) and the distinct rows with summed weights give the same fit loss
    and the same gradient (float64, autograd on both), with fewer rows."""
    from nnqs.vmc.configurations import all_configurations, in_sector
    from nnqs.vmc.pretrain import Batches, _fit_loss, merged

    configs = all_configurations(6)
    configs = configs[in_sector(configs, 2, 2)]
    c = torch.linspace(1.0, 0.01, len(configs), dtype=torch.float64) * torch.tensor([1.0, -1.0]).repeat(len(configs))[: len(configs)]
    c = c / c.norm()
    target = torch.where(c * c[0] >= 0, 0.0, math.pi).double()
    torch.manual_seed(1)
    wf = TransformerWavefunction(6, 2, 2, d_model=8, n_layers=1, phase_hidden=8, real=True, dtype=torch.float64)
    for by_modulus in (False, True):
        draw = next(Batches(c**2, c.abs() / c.abs().sum(), batch=300, seed=5, by_modulus=by_modulus))
        once = merged(*draw)
        assert len(once[0]) < len(draw[0]) and len(torch.unique(once[0])) == len(once[0])
        losses, grads = [], []
        for rows in (draw, once):
            wf.zero_grad()
            loss = _fit_loss(wf, configs, target, *rows)
            loss.backward()
            losses.append(loss.detach())
            grads.append(torch.cat([p.grad.flatten() for p in wf.parameters()]))
        assert torch.allclose(losses[0], losses[1], rtol=1e-12, atol=1e-14)
        assert torch.allclose(grads[0], grads[1], rtol=1e-10, atol=1e-13)


def test_a_minibatch_fit_takes_its_own_rate_decay_and_draw(monkeypatch):
    """run.pretrain hands fit_to_vector both rates, the decay and the draw; fit_to_vector alone decides:
    a teacher above ``whole`` is fitted from pretrain_lr_sampled down its cosine, one of at most ``whole``
    (every STO-3G teacher) at pretrain_lr throughout (seen in the rate Adam is given at each step)."""
    import nnqs.vmc.pretrain as pretrain
    import nnqs.vmc.run as run
    from nnqs.vmc.config import VMCConfig

    seen = []
    monkeypatch.setattr(run, "fit_to_vector", lambda *args, **kwargs: seen.append((args[4], kwargs)))
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    cfg = VMCConfig(d_model=8, n_layers=1, phase_hidden=8)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, phase_hidden=8)
    run.pretrain(wf, compact, cfg, progress=False)
    ((lr, kw),) = seen
    assert lr == cfg.pretrain_lr == 2e-3 and kw["lr_sampled"] == cfg.pretrain_lr_sampled
    assert kw["decay"] == cfg.pretrain_decay and kw["by_modulus"] is (cfg.pretrain_draw == "modulus")

    from nnqs.vmc.configurations import all_configurations, in_sector

    configs = all_configurations(ham.n_orbitals)
    configs = configs[in_sector(configs, ham.n_alpha, ham.n_beta)][:40]
    vector = torch.linspace(1.0, 0.1, len(configs), dtype=torch.float64)
    vector = vector / vector.norm()
    rates = []
    step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **k: (rates.append(self.param_groups[0]["lr"]),
                                                                          step(self, *a, **k))[1])
    for whole in (len(configs), 4):
        rates.append(whole)
        pretrain.fit_to_vector(wf, configs, vector, 5, 2e-3, batch=8, whole=whole, decay=0.1, lr_sampled=5e-3)
    assert rates[:6] == [len(configs)] + [2e-3] * 5
    assert rates[6] == 4 and rates[7] == 5e-3 and abs(rates[-1] - 5e-4) < 1e-12