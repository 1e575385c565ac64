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

import math
from typing import Callable

import torch

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.keys import unpack
from nnqs.vmc.wavefunction import in_dtype


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


# The teacher fit (:func:`fit_to_vector`):
#   loss = - sum_x c_x^2 log P(x)  +  sum_x (|c_x| / sum |c|) (1 - cos(phi(x) - phi(x_0) - theta_x)),
# theta_x = 0 or pi by the sign of c_x relative to c_{x_0} (the first configuration). The first term is the
# cross entropy of P against c^2 (minimal at P = c^2 on the set, nothing outside); the second sets relative
# signs, weighted by |c| so that light configurations still count. For the real ansatz (psi = sqrt(P) cos phi)
# the signs are absolute: phi(x_0) is replaced by 0, so the fit ends with cos phi near +-1, |psi|^2 near P.
# With a communicator of several ranks each rank evaluates its share of the terms, the gradients are
# summed, and every rank takes the same Adam step. With a ``dtype`` other than the model's (float32 for a
# float64 model) a copy in that precision is fitted and its parameters copied back at the end: 2.6x faster
# at 26 qubits, and the fit only has to bring the network near the vector, which the float64 VMC refines.
#
# Above FIT_WHOLE configurations the teacher fit takes each Adam step on a minibatch of FIT_ROWS rows drawn
# from the vector (by c^2 for the cross entropy, by |c| for the signs), so that a step costs the same for a
# set of 4,096 and of 65,536; at or below it every row enters every step. The fit is limited by its steps,
# not by its rows: on H8 at 1.5 A (4,533 configurations, 1,200 steps) 1,024 rows a step left the network
# +11.35 mHa above the teacher in 94 s, 4,096 rows +9.23 in 377 s, and 1,024 rows for 2,400 steps +9.23 in
# 177 s (benchmarks/RESULTS.md, "What we tried"; on H10 the trade-off of "Beyond exact diagonalisation").
FIT_WHOLE = 4096
FIT_ROWS = 1024
# A teacher of N > FIT_WHOLE configurations is fitted for FIT_STEPS_SCALE x sqrt(N / FIT_WHOLE) times the
# configured steps, at most FIT_STEPS_GROWTH times: the minibatch fit of a larger vector needs more steps to
# carry it, and its error falls as 1 / steps. On H10 at 1.5 A (34,573 configurations) 3,486 / 6,972 / 10,458
# steps left the network +7.26 / +3.81 / +2.29 mHa above the teacher in 286 / 644 / 910 s, where the VMC
# steps take about 7 minutes to bring it from +7.3 to +3.8 (benchmarks/RESULTS.md, "Beyond exact
# diagonalisation").
FIT_STEPS_SCALE = 2
FIT_STEPS_GROWTH = 6
# At WIDE_QUBITS qubits and more the fit is the run's work (a run whose VMC steps are not set takes
# nnqs.vmc.config.WIDE_STEPS of them): FIT_WIDE_SCALE x sqrt(N / FIT_WHOLE) times the configured steps, at most
# FIT_WIDE_GROWTH times. On N2/6-31G at 1.1 A (48,138 configurations) the network's energy went from +3.90 mHa
# (7,200 steps, then 300 VMC steps) to +2.92 / +2.22 / +1.823 / +1.673 (14,400 / 28,800 / 57,600 / 68,400
# steps), and with these defaults +1.691 in 52 minutes; at 2.2 A from +8.80 to +4.28 in 48 minutes. 68,400 (the
# cap) keeps the run within 90 minutes on the 2 cores at the slowest fit measured here (14.9 steps a second; 23
# to 26 on another day). The scale puts the teachers of 32 qubits past about 46,000 configurations at the cap.
WIDE_QUBITS = 32
FIT_WIDE_SCALE = 17
FIT_WIDE_GROWTH = 57


def fit_steps(steps: int, n_teacher: int, n_qubits: int = 0, whole: int = FIT_WHOLE) -> int:
    """The Adam steps of the fit to a teacher of ``n_teacher`` configurations on ``n_qubits`` qubits, ``steps``
    configured (the steps of a teacher of at most ``whole``): ``steps x min(FIT_STEPS_SCALE x sqrt(n_teacher /
    whole), FIT_STEPS_GROWTH)``, or with FIT_WIDE_SCALE and FIT_WIDE_GROWTH at WIDE_QUBITS qubits and more."""
    if n_teacher <= whole:
        return steps
    scale, growth = (FIT_WIDE_SCALE, FIT_WIDE_GROWTH) if n_qubits >= WIDE_QUBITS else (FIT_STEPS_SCALE,
                                                                                         FIT_STEPS_GROWTH)
    return round(steps * min(scale * math.sqrt(n_teacher / whole), growth))


def fit_to_vector(
    wf, configs: torch.Tensor, coefficients: torch.Tensor, steps: int, lr: float,
    on_step: Callable[[int, float], None] | None = None, comm=None, dtype: torch.dtype | None = None,
    batch: int = FIT_ROWS, seed: int = 0, start: dict | None = None, save: Callable[[dict], None] | None = None,
    whole: int = FIT_WHOLE, decay: float = 1.0, by_modulus: bool = False, lr_sampled: float | None = None,
) -> float:
    """Supervised fit of modulus *and* sign to a vector ``coefficients`` ``(M,)`` (real, normalised)
    on ``configs`` ``(M, n)``, by Adam at learning rate ``lr``; return the final loss (the loss, the
    minibatches of ``batch`` rows above ``whole`` configurations, ``dtype`` and ``comm``: the section above).
    ``on_step(step, loss)`` is called after every step (progress). ``save(state)`` is offered the
    fit's state after every step (a run writes it every ``checkpoint_seconds``); ``start``, such a
    state, continues that fit exactly: the same steps, draws and result as one never stopped.
    A minibatch fit (more than ``whole`` rows) starts from ``lr_sampled`` where given (else ``lr``) and,
    with ``decay`` < 1, lowers it along a cosine to ``decay`` times it at the last step; a fit of every
    row keeps ``lr``. ``by_modulus``: :class:`Batches`. This is the one place that tells the two apart.
    """
    model = in_dtype(wf, dtype)
    weight2 = coefficients.double().pow(2) / coefficients.double().pow(2).sum()
    sign_weight = coefficients.double().abs() / coefficients.double().abs().sum()
    target = torch.where(coefficients * coefficients[0] >= 0, 0.0, math.pi).double()
    draw = Batches(weight2, sign_weight, batch, seed, by_modulus) if len(configs) > whole else None
    terms = None if draw else _full_terms(len(configs), weight2, sign_weight, comm)
    if draw is not None and lr_sampled is not None:
        lr = lr_sampled
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    rate = _schedule(lr, decay if draw else 1.0, steps)
    first, value = _restore(start, model, opt, draw) if start else (0, float("nan"))
    for step in range(first, steps):
        rows = merged(*next(draw)) if draw else terms
        for group in opt.param_groups:
            group["lr"] = rate(step)
        if comm is not None and comm.world_size > 1 and draw:
            rows = tuple(comm.share(t) for t in rows)
        loss = _fit_loss(model, configs, target, *rows)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if comm is not None:
            comm.sum_gradients(model.parameters())
            loss = comm.all_reduce_sum(loss.detach())
        opt.step()
        value = float(loss.detach())
        if save is not None:
            save({"step": step + 1, "loss": value, "model": model.state_dict(), "optimizer": opt.state_dict(),
                  "generator": None if draw is None else draw.generator.get_state()})
        if on_step is not None:
            on_step(step, value)
    if model is not wf:
        with torch.no_grad():
            for mine, fitted in zip(wf.parameters(), model.parameters()):
                mine.copy_(fitted)
    return value


def _schedule(lr: float, decay: float, steps: int) -> Callable[[int], float]:
    """The learning rate of step ``k``: ``lr`` down a half cosine to ``decay * lr`` at the last step."""
    return lambda k: lr * (decay + (1 - decay) * 0.5 * (1 + math.cos(math.pi * k / max(1, steps - 1))))


def _fit_loss(model, configs: torch.Tensor, target: torch.Tensor, rows_p: torch.Tensor, w_p: torch.Tensor,
              rows_s: torch.Tensor, w_s: torch.Tensor) -> torch.Tensor:
    """The fit's loss (:func:`fit_to_vector`) on the rows ``rows_p`` (cross entropy, weights ``w_p``) and
    ``rows_s`` (signs, weights ``w_s``) of ``configs``."""
    reference = 0.0 if model.real else model.phase(configs[:1]).double()[0]
    phase = model.phase(configs[rows_s]).double()
    return -(w_p * model.log_prob(configs[rows_p])).sum() + (w_s * (1 - torch.cos(phase - reference - target[rows_s]))).sum()


def merged(rows_p: torch.Tensor, w_p: torch.Tensor, rows_s: torch.Tensor, w_s: torch.Tensor) -> tuple:
    """A minibatch (:class:`Batches`) with each drawn row once, its weights summed: the same loss and
    gradient for fewer rows through the network. Rows are drawn with replacement and by |c|, so the heavy ones
    repeat: of 1,024 draws from N2/6-31G's teacher of 48,138 about 800 are distinct, and a fit step took 0.68x the
    time with one thread (0.53-0.76x on the 6-31G and H10 teachers; benchmarks/RESULTS.md, "What a fit misses")."""
    def once(rows: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        distinct, inverse = torch.unique(rows, return_inverse=True)
        return distinct, weights.new_zeros(len(distinct)).index_add_(0, inverse, weights)

    return (*once(rows_p, w_p), *once(rows_s, w_s))


def _restore(state: dict, model, opt: torch.optim.Optimizer, draw: "Batches | None") -> tuple[int, float]:
    """Load a fit ``state`` (offered to ``save`` by :func:`fit_to_vector`); its step and loss."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if draw is not None:
        draw.generator.set_state(state["generator"])
    return int(state["step"]), float(state["loss"])


def _full_terms(m: int, weight2: torch.Tensor, sign_weight: torch.Tensor, comm) -> tuple:
    """Every row in every step: this rank's rows ``configs[r::K]`` and their weights, twice."""
    rows = torch.arange(m, device=weight2.device)
    if comm is not None and comm.world_size > 1:
        rows = comm.share(rows)
    return rows, weight2[rows], rows, sign_weight[rows]


class Batches:
    """Endless minibatches: ``batch`` rows drawn by ``weight2`` and ``batch`` by ``sign_weight``, each
    row weighted ``1 / batch``, from ``generator`` (seeded by ``seed``: the same draws on every rank).
    With ``by_modulus`` the cross-entropy rows are drawn by ``sign_weight`` too, each weighted
    ``weight2 / (sign_weight * batch)`` (the same expected loss; fewer draws spent on the heaviest rows)."""

    def __init__(self, weight2: torch.Tensor, sign_weight: torch.Tensor, batch: int, seed: int,
                 by_modulus: bool = False) -> None:
        self.weight2, self.sign_weight, self.batch, self.by_modulus = weight2, sign_weight, batch, by_modulus
        self.generator = torch.Generator(device=weight2.device).manual_seed(seed)
        self.each = torch.full((batch,), 1.0 / batch, dtype=torch.float64, device=weight2.device)

    def __next__(self) -> tuple:
        if self.by_modulus:
            rows = torch.multinomial(self.sign_weight, self.batch, replacement=True, generator=self.generator)
            ratio = self.weight2[rows] / (self.sign_weight[rows] * self.batch)
            return (rows, ratio, torch.multinomial(self.sign_weight, self.batch, replacement=True, generator=self.generator),
                    self.each)
        return (torch.multinomial(self.weight2, self.batch, replacement=True, generator=self.generator), self.each,
                torch.multinomial(self.sign_weight, self.batch, replacement=True, generator=self.generator), self.each)
