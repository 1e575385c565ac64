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
    """fit_steps: the configured steps up to FIT_WHOLE configurations, sqrt(N / FIT_WHOLE) times as many
    above, at most FIT_STEPS_GROWTH times; a run hands that count to the fit."""
    import nnqs.vmc.run as run
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.pretrain import FIT_STEPS_GROWTH, FIT_WHOLE, fit_steps

    assert fit_steps(1200, 660) == fit_steps(1200, FIT_WHOLE) == 1200  # every STO-3G teacher of the table
    assert fit_steps(1200, 4 * FIT_WHOLE) == 2400 and fit_steps(1200, 34573) == 3486
    assert fit_steps(1200, 100 * FIT_WHOLE) == FIT_STEPS_GROWTH * 1200 and fit_steps(0, 10**5) == 0
    seen = []
    monkeypatch.setattr(run, "fit_to_vector", lambda *args, **kwargs: seen.append(args[3]))
    ham = build_hamiltonian(get_spec("LiH"))
    compact = CompactHamiltonian.from_molecular(ham)
    wf = TransformerWavefunction(ham.n_orbitals, ham.n_alpha, ham.n_beta, d_model=8, n_layers=1, phase_hidden=8)
    for whole in (FIT_WHOLE, 4):  # LiH's teacher (a few dozen configurations) as a "large" one
        monkeypatch.setattr(run, "fit_steps", lambda steps, n, whole=whole: fit_steps(steps, n, whole))
        out = run.pretrain(wf, compact, VMCConfig(pretrain_steps=10, d_model=8, n_layers=1, phase_hidden=8),
                           progress=False)
        assert seen[-1] == fit_steps(10, out["n_teacher"], whole)
    assert seen[0] == 10 and seen[1] > 10
