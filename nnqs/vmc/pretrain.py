"""Pretraining: the phase head's signs from first-order perturbation theory (teacher "mp1"), or a
supervised fit of modulus and sign to a selected-CI vector (teacher "sci", :func:`fit_to_vector`).

Sign pretraining from first-order perturbation theory:

For a configuration x' connected to the Hartree-Fock determinant |0>, first-order
perturbation theory gives c(x') / c(0) = -H[x', 0] / (E_x' - E_0) with
E_x' > E_0, so the relative sign of x' is -sign(H[x', 0]) in the same
Jordan-Wigner basis the local energy uses. A short supervised fit sets the
phase head to those signs (phi(x') - phi(0) = 0 or pi) before VMC starts.

Why: VMC from random phases stalls on plateaus where important excitations
carry the wrong sign; their amplitudes are pushed down before their phases can
turn (seen on H2O with exact enumeration: 6 of the 31 configurations of weight
> 1e-5 had the wrong sign at a 24 mHa plateau).
"""
from __future__ import annotations

import copy
import math
from typing import Callable

import torch

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.keys import unpack


def perturbative_signs(wf, ham: CompactHamiltonian) -> tuple[torch.Tensor, torch.Tensor]:
    """Configurations connected to HF ``(M, n)`` (HF first) and their target phases ``(M,)`` in {0, pi}."""
    hf = wf.hf_config().unsqueeze(0)
    conn = ham.connections(hf)
    keep = conn.elements[0] != 0
    targets = unpack(conn.keys[0][keep], ham.n_orbitals).to(hf.device)
    phases = (conn.elements[0][keep] > 0).to(torch.float64) * math.pi
    return torch.cat([hf, targets]), torch.cat([phases.new_zeros(1), phases])


def pretrain_phase(wf, ham: CompactHamiltonian, steps: int = 200, lr: float = 1e-2) -> float:
    """Fit the phase head so phi(x') - phi(HF) matches the perturbative signs; return the final
    mean loss 1 - cos(phi(x') - phi(HF) - target) (0 when every sign is right)."""
    configs, target = perturbative_signs(wf, ham)
    params = [p for name, p in wf.named_parameters() if name.startswith("phase")]
    assert params, "the wavefunction has no phase parameters"
    opt = torch.optim.Adam(params, lr=lr)
    loss = torch.zeros(())
    for _ in range(steps):
        phi = wf.phase(configs).double()
        reference = 0.0 if wf.real else phi[0]  # real ansatz: signs are cos(phi), absolute
        loss = (1 - torch.cos(phi[1:] - reference - target[1:])).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return float(loss.detach())


def fit_to_vector(
    wf, configs: torch.Tensor, coefficients: torch.Tensor, steps: int, lr: float,
    on_step: Callable[[int, float], None] | None = None, comm=None, dtype: torch.dtype | None = None,
) -> float:
    """Supervised fit of modulus *and* sign to a vector ``coefficients`` ``(M,)`` (real, normalised)
    on ``configs`` ``(M, n)``, by Adam at learning rate ``lr`` (``VMCConfig.pretrain_lr`` in a run);
    return the final loss.

    loss = - sum_x c_x^2 log P(x)  +  sum_x (|c_x| / sum |c|) (1 - cos(phi(x) - phi(x_0) - theta_x)),
    theta_x = 0 or pi by the sign of c_x relative to c_{x_0} (the first configuration). The first
    term is the cross entropy of P against c^2 (minimal at P = c^2 on the set, nothing outside);
    the second sets relative signs, weighted by |c| so that light configurations still count.
    For the real ansatz (psi = sqrt(P) cos phi) the signs are absolute: phi(x_0) is replaced by 0,
    so the fit ends with cos phi near +-1 and |psi|^2 near P.
    ``on_step(step, loss)`` is called after every step (progress).

    With a communicator ``comm`` of several ranks, rank r evaluates the terms of its share
    ``configs[r::K]`` (and, on ranks > 0, the reference configuration x_0 with no term of its
    own, for its phase), the gradients are summed, and every rank takes the same Adam step.

    With ``dtype`` other than the model's (``torch.float32`` for a float64 model) a copy of the
    model in that precision is fitted and its parameters are copied back at the end: the fit is
    matrix products over every token of the set, 2.6x faster in float32 at 26 qubits, and it
    only has to bring the network near the vector, which the float64 VMC then refines.
    """
    target_model = wf
    if dtype is not None and dtype != next(wf.parameters()).dtype:
        wf = copy.deepcopy(wf).to(dtype)
    weight2 = coefficients.double().pow(2)
    weight2 = weight2 / weight2.sum()
    sign_weight = coefficients.double().abs() / coefficients.double().abs().sum()
    target = torch.where(coefficients * coefficients[0] >= 0, 0.0, math.pi).double()
    if comm is not None and comm.world_size > 1:
        rows = comm.share(torch.arange(len(configs), device=configs.device))
        weight2, sign_weight = weight2[rows], sign_weight[rows]
        if comm.rank > 0:  # the phase reference x_0 (rank 0's first row) first, with no term here
            rows = torch.cat([rows.new_zeros(1), rows])
            weight2, sign_weight = (torch.cat([w.new_zeros(1), w]) for w in (weight2, sign_weight))
        configs, target = configs[rows], target[rows]
    opt = torch.optim.Adam(wf.parameters(), lr=lr)
    value = float("nan")
    for step in range(steps):
        log_prob, phase = wf.log_prob(configs), wf.phase(configs).double()
        reference = 0.0 if wf.real else phase[0]
        loss = -(weight2 * log_prob).sum() + (sign_weight * (1 - torch.cos(phase - reference - target))).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if comm is not None:
            comm.sum_gradients(wf.parameters())
            loss = comm.all_reduce_sum(loss.detach())
        opt.step()
        value = float(loss.detach())
        if on_step is not None:
            on_step(step, value)
    if wf is not target_model:
        with torch.no_grad():
            for mine, fitted in zip(target_model.parameters(), wf.parameters()):
                mine.copy_(fitted)
    return value
