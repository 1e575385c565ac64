"""Variational Monte Carlo: energy, gradient and one optimisation step.

Energy E = sum_i w_i E_loc(x_i), w_i = count_i / n_samples, over the unique
samples of the autoregressive sampler (exact, independent draws from |psi|^2,
so the standard error is sqrt(Var E_loc / n_samples)). Gradient
dE/dtheta = 2 Re sum_i w_i (E_loc(x_i) - E)^* d log psi(x_i) / dtheta, obtained
by back-propagating the surrogate loss of :func:`energy_and_loss`.
Energies and statistics are float64, in Hartree.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from nnqs.common.distributed import Communicator, SingleProcess
from nnqs.vmc.local_energy import CONNECTED_DTYPE, share_local_energy
from nnqs.vmc.prefix_tree import TREE_ROWS, TreeLogPsi
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.common.schedule import warmup_cosine
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.selection import CoreHamiltonian, select_core, set_weights, unique_union
from nnqs.vmc.sampler import UniqueLimit
from nnqs.vmc.sr import per_sample_jacobian, split_jacobian, sr_direction, subsample_rows


@dataclass
class StepResult:
    """What one VMC step measured (energies in Hartree, times in seconds)."""

    step: int
    energy: float
    variance: float
    stderr: float
    n_samples: int
    n_unique: int
    lr: float
    grad_norm: float
    t_sample: float
    t_local: float
    t_grad: float
    n_unique_connected: int = 0
    extra: dict = field(default_factory=dict)
    core: torch.Tensor | None = None  # core mode: the re-selected core (M, n), when this step re-selected it

    @property
    def t_step(self) -> float:
        return self.t_sample + self.t_local + self.t_grad


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


def lr_factor(step: int, cfg: VMCConfig) -> float:
    """Linear warmup over ``cfg.warmup`` steps, then cosine decay from lr to lr_final (lr / 10)."""
    floor = 0.1 if cfg.lr_final is None else cfg.lr_final / cfg.lr
    return warmup_cosine(step, cfg.warmup, cfg.steps, floor)


def momentum_factor(step: int, cfg: VMCConfig) -> float:
    """The SPRING momentum at ``step`` relative to ``cfg.sr_momentum``: 1 throughout with the
    "constant" schedule; with "ramp", 0 during the warmup, then rising as the learning rate's
    cosine falls, (1 - cos(pi t)) / 2 over the decay (t from 0 to 1), so that early, large steps
    are plain minSR and the late, small ones carry the momentum."""
    if cfg.sr_momentum_schedule == "constant":
        return 1.0
    if step < cfg.warmup:
        return 0.0
    return 1.0 - warmup_cosine(step, cfg.warmup, cfg.steps, 0.0)  # the learning rate's cosine, 1 -> 0


def make_optimizer(wf, cfg: VMCConfig) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW on the plain gradient, or SGD on the SR direction; warmup + cosine schedule."""
    if cfg.optimizer == "sr":
        opt = torch.optim.SGD(wf.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.AdamW(wf.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
    return opt, sched


def adapt_samples(n_samples: int, n_unique: int, cfg: VMCConfig) -> int:
    """Grow or shrink the requested sample count to keep the unique count in the window."""
    if cfg.unique_min and n_unique < cfg.unique_min:
        return min(n_samples * 2, 10**12)
    if cfg.unique_max and n_unique > cfg.unique_max:
        return max(n_samples // 4, 100)
    return n_samples


# Most unique configurations of the reported energy's fresh draw (fewer samples above it): its exact
# local energy costs about 0.1 s per configuration at 32 qubits, and 10^12 samples of a broad
# 32-qubit distribution are millions of configurations (23 GB were seen before this bound).
FINAL_UNIQUE_MAX = 16384


def draw(wf, n_samples: int, generator, unique_max: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample; while more than ``unique_max`` unique configurations would come back, redraw with a
    quarter of the samples (sampling is cheap, the unique set is what the rest of a step costs).
    A draw over the limit is abandoned as soon as that is certain (:class:`UniqueLimit`), so a
    broad distribution never holds millions of prefixes in memory; 100 samples are always kept."""
    while True:
        limit = unique_max if n_samples > 100 else 0
        try:
            return wf.sample(n_samples, generator=generator, max_unique=limit)
        except UniqueLimit:
            n_samples = max(100, n_samples // 4)


def working_set(
    wf, cfg: VMCConfig, n_samples: int, generator, core: torch.Tensor | None, comm: Communicator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int]:
    """The configurations a step works on ``(U, n)``, their weights ``(U,)`` (counts, or |psi|^2
    renormalised on the set for ``selection = "core"``), log psi ``(U,)`` where it was computed
    (core mode), and the number of samples drawn."""
    if cfg.selection == "samples":
        configs, counts = draw(wf, n_samples, generator, cfg.unique_max)
        comm.check_same_samples(configs, counts)
        return configs, counts, None, int(counts.sum())
    samples, counts = draw(wf, n_samples, generator, cfg.core_samples)
    comm.check_same_samples(samples, counts)
    configs = samples if core is None else unique_union(core, samples)
    with torch.no_grad():  # each rank its share of the set, then every rank holds all of it
        log_psi = comm.unshare(wf.log_psi(comm.share(configs), chunk_size=cfg.max_batch))
    return configs, set_weights(log_psi), log_psi, int(counts.sum())


def vmc_step(
    wf, ham, opt, sched, cfg: VMCConfig, step: int, n_samples: int, generator, comm: Communicator = ONE_PROCESS,
    core: torch.Tensor | None = None, core_ham: CoreHamiltonian | None = None,
) -> StepResult:
    """Sample (joined to the ``core`` in core mode), estimate, back-propagate, clip, update; in core
    mode re-select the core every ``cfg.core_every`` steps (``result.core``); return what was measured.
    ``core_ham``: H on ``core`` (:class:`~nnqs.vmc.selection.CoreHamiltonian`; one process), from which
    the set's local energies are taken instead of enumerating every row's connections."""
    t0 = time.perf_counter()
    configs, weights, log_psi, drawn = working_set(wf, cfg, n_samples, generator, core, comm)
    estimator = cfg.estimator if cfg.selection == "samples" else "sample-space"  # core: the set's Rayleigh quotient
    t1 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    ratios = sampling_ratio(wf, configs, cfg.max_batch) if log_psi is None else None  # core: weights are |psi|^2
    local = None
    if log_psi is not None and core_ham is not None and comm.world_size == 1:
        local = core_ham.local_energies(ham, configs, log_psi)
    with torch.set_grad_enabled(cfg.optimizer != "sr"):  # SR takes its own per-sample gradients
        est, loss = energy_and_loss(wf, ham, configs, weights, estimator, cfg.max_batch, comm, log_psi,
                                    cfg.connected_dtype, ratios, local)
    t2 = time.perf_counter()
    if cfg.optimizer == "sr":
        previous, momentum = None, cfg.sr_momentum * momentum_factor(step, cfg)
        if momentum and all("sr_previous" in opt.state[p] for p in wf.parameters()):
            previous = torch.cat([opt.state[p]["sr_previous"].reshape(-1).double() for p in wf.parameters()])
        rows, local, weights = sr_rows(configs, est, cfg, step, comm)
        set_sr_gradient(wf, rows, local, weights, est.energy, cfg.sr_shift, comm, previous, momentum)
    else:
        loss.backward()
        comm.sum_gradients(wf.parameters())
    sampled = cfg.optimizer == "sr" and subsampled(len(configs), cfg)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(wf.parameters(), cfg.grad_clip_sampled if sampled else cfg.grad_clip))
    if cfg.optimizer == "sr" and cfg.sr_momentum:
        for p in wf.parameters():  # the direction applied (after clipping): the next step's momentum
            opt.state[p]["sr_previous"] = p.grad.detach().clone()
    new_core = None  # re-selected before the update, so amplitudes inside and outside the set are of one model
    if log_psi is not None and step % cfg.core_every == cfg.core_every - 1:
        ranker = TreeLogPsi(wf, min(cfg.max_batch, TREE_ROWS), torch.float32)  # ranks amplitudes: float32 suffices
        new_core = select_core(ranker, ham, configs, log_psi, cfg.core_threshold, cfg.core_max, cfg.max_batch,
                               est.energy if cfg.core_rule == "first-order" else None, comm).configs
    lr = opt.param_groups[0]["lr"]
    opt.step()
    sched.step()
    t3 = time.perf_counter()
    stderr = est.stderr if log_psi is None else 0.0  # core mode: a deterministic Rayleigh quotient of the set
    return StepResult(
        step, est.energy, est.variance, stderr, drawn, len(configs), lr, grad_norm,
        t1 - t0, t2 - t1, t3 - t2, est.n_unique_connected, core=new_core,
    )


def subsampled(n_rows: int, cfg: VMCConfig) -> bool:
    """Whether the SR step on a working set of ``n_rows`` is taken on a subsample (above ``sr_exact_max``)."""
    return n_rows > max(cfg.sr_exact_max, cfg.sr_rows)


def sr_rows(
    configs: torch.Tensor, est: EnergyEstimate, cfg: VMCConfig, step: int, comm: Communicator = ONE_PROCESS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows the natural-gradient step is formed on, as this rank's share: configurations
    ``(K_r, n)``, local energies ``(K_r,)`` and weights ``(K_r,)`` (summing to 1 over the ranks).
    Up to ``cfg.sr_exact_max`` configurations, the whole set ``configs`` ``(U, n)`` (exact minSR);
    above, a subsample of expected size ``cfg.sr_rows`` (:func:`nnqs.vmc.sr.subsample_rows`), drawn
    from a generator seeded by the run's seed and the step (the same on every rank, and on resume)."""
    if not subsampled(len(configs), cfg):
        return comm.share(configs), est.local_energies, est.weights
    generator = torch.Generator(device=configs.device).manual_seed(cfg.seed * 1_000_003 + step)
    sample = subsample_rows(comm.unshare(est.weights), cfg.sr_rows, generator)
    local = comm.unshare(est.local_energies)[sample.index]
    return comm.share(configs[sample.index]), comm.share(local), comm.share(sample.weights)


def set_sr_gradient(
    wf, configs: torch.Tensor, local_energies: torch.Tensor, weights: torch.Tensor, energy: float, shift: float,
    comm: Communicator = ONE_PROCESS, previous: torch.Tensor | None = None, momentum: float = 0.0,
) -> None:
    """Write the natural-gradient direction into the parameters' ``.grad``; ``configs`` ``(K, n)``,
    ``local_energies`` ``(K,)`` and ``weights`` ``(K,)``: this rank's share of the rows (:func:`sr_rows`),
    ``energy``: the working set's (Hartree)."""
    jacobian = split_jacobian(wf, configs)  # two real blocks when modulus and phase share no parameter
    if jacobian is None:
        jacobian = per_sample_jacobian(wf, configs)
    direction = sr_direction(jacobian, local_energies, weights, energy, shift, comm,
                             previous=previous, momentum=momentum)
    offset = 0
    for p in wf.parameters():
        p.grad = direction[offset : offset + p.numel()].view_as(p).to(p.dtype)
        offset += p.numel()


def final_energy(
    wf, ham, n_samples: int, generator, max_batch: int = 8192, comm: Communicator = ONE_PROCESS,
    unique_max: int = FINAL_UNIQUE_MAX, connected_dtype: str = CONNECTED_DTYPE,
) -> EnergyEstimate:
    """Energy from fresh samples with the exact local energy (no gradient); at most ``unique_max``
    unique configurations (0: no limit; see :func:`draw`)."""
    with torch.no_grad():
        configs, counts = draw(wf, n_samples, generator, unique_max)
        return share_estimate(wf, ham, configs, counts, "exact", max_batch, comm,
                              connected_dtype=connected_dtype, ratios=sampling_ratio(wf, configs, max_batch))[0]


def sampling_ratio(wf, configs: torch.Tensor, max_batch: int = 8192) -> torch.Tensor | None:
    """``|psi|^2 / P`` ``(U,)`` of sampled ``configs`` (the real ansatz), or None where it is 1."""
    with torch.no_grad():
        return wf.sampling_ratio(configs, chunk_size=max_batch)
