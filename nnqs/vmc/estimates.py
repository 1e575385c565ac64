"""Energy estimates of a VMC state: weighted statistics of local energies, the surrogate loss whose
gradient is the VMC gradient, and the reported energy from fresh samples.

Energy E = sum_i w_i E_loc(x_i), w_i = count_i / n_samples, over the unique
samples of the autoregressive sampler (exact, independent draws from |psi|^2,
so the standard error is sqrt(Var E_loc / n_samples)). Gradient
dE/dtheta = 2 Re sum_i w_i (E_loc(x_i) - E)^* d log psi(x_i) / dtheta, obtained
by back-propagating the surrogate loss of :func:`energy_and_loss`.
Energies and statistics are float64, in Hartree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from nnqs.common.distributed import Communicator, SingleProcess
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.draws import draw
from nnqs.vmc.local_energy import CONNECTED_DTYPE, share_local_energy


@dataclass
class EnergyEstimate:
    """Weighted statistics of local energies."""

    energy: float
    variance: float
    stderr: float
    local_energies: torch.Tensor  # (U,) complex128
    weights: torch.Tensor  # (U,) float64
    n_unique_connected: int = 0
    n_unique: int = 0  # unique samples over all ranks (U is this rank's share)


ONE_PROCESS = SingleProcess()


def estimate(
    local_energies: torch.Tensor, counts: torch.Tensor, comm: Communicator = ONE_PROCESS,
    ratios: torch.Tensor | None = None,
) -> EnergyEstimate:
    """Mean, variance and standard error of ``local_energies`` (U,) weighted by ``counts`` (U,)
    (this rank's share: sums run over all ranks of ``comm``).

    ``ratios`` (U,): samples drawn from P whose target is |psi|^2 = ratio x P (the real ansatz)
    carry the weight ``count x ratio``, normalised; the standard error is then that of the
    self-normalised importance-sampling mean, ``sqrt(sum n r^2 |E_loc - E|^2) / sum n r``."""
    totals = comm.all_reduce_sum(torch.stack([counts.sum(), torch.tensor(len(counts), device=counts.device)]))
    n = totals[0]
    if ratios is None:
        w = counts.to(torch.float64) / n.to(torch.float64)
    else:
        q = counts.to(torch.float64) * ratios.double()
        w = q / comm.all_reduce_sum(q.sum())
    mean = comm.all_reduce_sum((w * local_energies).sum())
    spread = (local_energies - mean).abs() ** 2
    var = comm.all_reduce_sum((w * spread).sum())
    energy, variance = float(mean.real), float(var)
    if ratios is None:
        stderr = math.sqrt(variance / float(n))
    else:  # w^2 / n = q^2 / (n Q^2): sum_i n_i r_i^2 spread_i / Q^2
        stderr = math.sqrt(float(comm.all_reduce_sum((w * w / counts.to(torch.float64).clamp_min(1) * spread).sum())))
    return EnergyEstimate(energy, variance, stderr, local_energies, w, 0, int(totals[1]))


def share_estimate(
    wf, ham, configs: torch.Tensor, counts: torch.Tensor, estimator: str, max_batch: int, comm: Communicator,
    known_log_psi: torch.Tensor | None = None, connected_dtype: str = CONNECTED_DTYPE,
    ratios: torch.Tensor | None = None, local: torch.Tensor | None = None,
) -> tuple[EnergyEstimate, torch.Tensor]:
    """Energy statistics of the sample set and this rank's log psi (with its graph when grad is on).
    ``local`` ``(U,)``: the local energies of all ``configs``, when already known (one process).
    ``known_log_psi`` ``(U,)``: log psi of all ``configs`` already computed, reused when grad is off;
    ``connected_dtype``: the precision of the network passes over the connected x'; ``ratios``
    ``(U,)``: |psi|^2 / P of sampled ``configs`` (:func:`estimate`)."""
    if known_log_psi is not None and not torch.is_grad_enabled():
        log_psi = comm.share(known_log_psi)
    else:
        log_psi = wf.log_psi(comm.share(configs))
    if local is not None:
        values, n_unique_connected = local, 0
    else:
        values, n_unique_connected = share_local_energy(wf, ham, configs, log_psi, estimator, max_batch, comm,
                                                        connected_dtype)
    est = estimate(values, comm.share(counts), comm, None if ratios is None else comm.share(ratios))
    est.n_unique_connected = n_unique_connected
    return est, log_psi


def energy_and_loss(
    wf, ham: CompactHamiltonian, configs: torch.Tensor, counts: torch.Tensor,
    estimator: str = "exact", max_batch: int = 8192, comm: Communicator = ONE_PROCESS,
    known_log_psi: torch.Tensor | None = None, connected_dtype: str = CONNECTED_DTYPE,
    ratios: torch.Tensor | None = None, local: torch.Tensor | None = None,
) -> tuple[EnergyEstimate, torch.Tensor]:
    """Energy statistics and the surrogate loss whose gradient is the VMC gradient.

    loss = 2 Re sum_i w_i conj(E_loc_i - E) log psi(x_i), with E_loc and E held constant.
    ``configs``, ``counts`` are the whole sample set; with several ranks each computes its
    share (``est`` holds the share's local energies and weights) and the loss of its share.
    """
    est, log_psi = share_estimate(wf, ham, configs, counts, estimator, max_batch, comm, known_log_psi, connected_dtype,
                                  ratios, local)
    centred = (est.local_energies - est.energy).conj()
    loss = 2.0 * (est.weights * centred * log_psi.to(torch.complex128)).sum().real
    return est, loss


# Most unique configurations of the reported energy's fresh draw (fewer samples above it): its exact
# local energy costs about 0.1 s per configuration at 32 qubits, and 10^12 samples of a broad
# 32-qubit distribution are millions of configurations (23 GB were seen before this bound).
FINAL_UNIQUE_MAX = 16384
# Most connections (unique configurations x connected configurations per configuration) of the reported
# energy's exact local energy: each costs about 4 us (one thread, float32 passes through the prefix tree),
# so the bound is about 9 minutes. It binds above about 8,000 connections per configuration (the 48- and
# 52-qubit systems): H2O/cc-pVDZ (12,635 per configuration) takes at most 10,622 unique configurations
# instead of 16,384 (10,743 took 548 s; benchmarks/RESULTS.md); at 32 qubits FINAL_UNIQUE_MAX binds first.
FINAL_CONNECTED_MAX = 2**27
# The reported energy's draw halves its sample count while over the bound (a step's quarters it): the unique
# count lands between half the bound and the bound, not anywhere down to a quarter of it.
FINAL_SHRINK = 2


def final_unique_max(ham: CompactHamiltonian) -> int:
    """Most unique configurations of the reported energy's draw on ``ham``: :data:`FINAL_UNIQUE_MAX`, or
    fewer where their connections would pass :data:`FINAL_CONNECTED_MAX`."""
    return max(1, min(FINAL_UNIQUE_MAX, FINAL_CONNECTED_MAX // max(1, ham.n_connected)))


def final_energy(
    wf, ham, n_samples: int, generator, max_batch: int = 8192, comm: Communicator = ONE_PROCESS,
    unique_max: int | None = None, connected_dtype: str = CONNECTED_DTYPE,
) -> EnergyEstimate:
    """Energy from fresh samples with the exact local energy (no gradient); at most ``unique_max``
    unique configurations (default :func:`final_unique_max`; 0: no limit; see :func:`draw`)."""
    if unique_max is None:
        unique_max = final_unique_max(ham)
    with torch.no_grad():
        configs, counts = draw(wf, n_samples, generator, unique_max, FINAL_SHRINK)
        return share_estimate(wf, ham, configs, counts, "exact", max_batch, comm,
                              connected_dtype=connected_dtype, ratios=sampling_ratio(wf, configs, max_batch))[0]


def sampling_ratio(wf, configs: torch.Tensor, max_batch: int = 8192) -> torch.Tensor | None:
    """``|psi|^2 / P`` ``(U,)`` of sampled ``configs`` (the real ansatz), or None where it is 1."""
    with torch.no_grad():
        return wf.sampling_ratio(configs, chunk_size=max_batch)
