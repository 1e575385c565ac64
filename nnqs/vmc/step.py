"""One VMC optimisation step: draw the working set, its energy and gradient
(:mod:`nnqs.vmc.estimates`), the SR direction on all its rows or on a subsample, and the
optimiser's step. Energies in Hartree, times in seconds."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from nnqs.common.distributed import Communicator
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.draws import working_set
from nnqs.vmc.estimates import ONE_PROCESS, EnergyEstimate, energy_and_loss, sampling_ratio
from nnqs.vmc.optimizers import momentum_factor
from nnqs.vmc.prefix_tree import TREE_ROWS, TreeLogPsi
from nnqs.vmc.selection import CoreHamiltonian, reselection_every, select_core
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


def vmc_step(
    wf, ham, opt, sched, cfg: VMCConfig, step: int, n_samples: int, generator, comm: Communicator = ONE_PROCESS,
    core: torch.Tensor | None = None, core_ham: CoreHamiltonian | None = None, core_steps: int | None = None,
) -> StepResult:
    """Sample (joined to the ``core`` in core mode), estimate, back-propagate, clip, update; in core
    mode re-select the core every :func:`~nnqs.vmc.selection.reselection_every` steps (``result.core``);
    return what was measured.
    ``core_ham``: H on ``core`` (:class:`~nnqs.vmc.selection.CoreHamiltonian`; one process), from which
    the set's local energies are taken instead of enumerating every row's connections. ``core_steps``: the
    steps already taken on ``core`` (None: counted from step 0, as if the core were re-selected on schedule)."""
    t0 = time.perf_counter()
    configs, weights, log_psi, drawn, net = working_set(wf, cfg, n_samples, generator, core, comm)
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
        set_sr_gradient(wf, rows, local, weights, est.energy, cfg.sr_shift, comm, previous, momentum, net,
                        mixed=cfg.subsampled(len(configs)))
    else:
        loss.backward()
        comm.sum_gradients(wf.parameters())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(wf.parameters(), cfg.clip(len(configs))))
    if cfg.optimizer == "sr" and cfg.sr_momentum:
        for p in wf.parameters():  # the direction applied (after clipping): the next step's momentum
            opt.state[p]["sr_previous"] = p.grad.detach().clone()
    new_core = None  # re-selected before the update, so amplitudes inside and outside the set are of one model
    core_rows = 0 if core is None else len(core)  # core mode may start from fresh samples alone
    if log_psi is not None and reselects(core_steps, cfg, core_rows, ham.n_connected, step):
        ranker = TreeLogPsi(net, min(cfg.max_batch, TREE_ROWS), torch.float32)  # ranks amplitudes: float32 suffices
        new_core = select_core(ranker, ham, configs, log_psi, cfg.core_threshold, cfg.core_max, cfg.max_batch,
                               est.energy, comm).configs
    lr = opt.param_groups[0]["lr"]
    opt.step()
    sched.step()
    t3 = time.perf_counter()
    stderr = est.stderr if log_psi is None else 0.0  # core mode: a deterministic Rayleigh quotient of the set
    return StepResult(
        step, est.energy, est.variance, stderr, drawn, len(configs), lr, grad_norm,
        t1 - t0, t2 - t1, t3 - t2, est.n_unique_connected, core=new_core,
    )


def reselects(core_steps: int | None, cfg: VMCConfig, core_rows: int, n_connected: int, step: int = 0) -> bool:
    """Whether a step taken after ``core_steps`` steps on a core of ``core_rows`` configurations with
    ``n_connected`` connections each re-selects it: the last step of every
    :func:`~nnqs.vmc.selection.reselection_every` steps (at once where the rule has come down below the
    steps taken; counted from the last re-selection, so a rule that grows does not re-select early).
    ``core_steps`` None (a caller that does not count): on schedule from step 0, by ``step``."""
    every = reselection_every(cfg.core_every, cfg.core_entries, core_rows, n_connected)
    return (step % every if core_steps is None else core_steps) >= every - 1


def sr_rows(
    configs: torch.Tensor, est: EnergyEstimate, cfg: VMCConfig, step: int, comm: Communicator = ONE_PROCESS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows the natural-gradient step is formed on, as this rank's share: configurations
    ``(K_r, n)``, local energies ``(K_r,)`` and weights ``(K_r,)`` (summing to 1 over the ranks).
    Up to ``cfg.sr_exact_max`` configurations, the whole set ``configs`` ``(U, n)`` (exact minSR);
    above, a subsample of expected size ``cfg.subsample_size(U)`` (:func:`nnqs.vmc.sr.subsample_rows`), drawn
    from a generator seeded by the run's seed and the step (the same on every rank, and on resume)."""
    if not cfg.subsampled(len(configs)):
        return comm.share(configs), est.local_energies, est.weights
    generator = torch.Generator(device=configs.device).manual_seed(cfg.seed * 1_000_003 + step)
    sample = subsample_rows(comm.unshare(est.weights), cfg.subsample_size(len(configs)), generator)
    local = comm.unshare(est.local_energies)[sample.index]
    return comm.share(configs[sample.index]), comm.share(local), comm.share(sample.weights)


def set_sr_gradient(
    wf, configs: torch.Tensor, local_energies: torch.Tensor, weights: torch.Tensor, energy: float, shift: float,
    comm: Communicator = ONE_PROCESS, previous: torch.Tensor | None = None, momentum: float = 0.0, net=None,
    mixed: bool = False,
) -> None:
    """Write the natural-gradient direction into the parameters' ``.grad``; ``configs`` ``(K, n)``,
    ``local_energies`` ``(K,)`` and ``weights`` ``(K,)``: this rank's share of the rows (:func:`sr_rows`),
    ``energy``: the working set's (Hartree). ``net``: the network whose Jacobian is taken (a float32
    copy of ``wf``, :func:`nnqs.vmc.draws.pass_network`; default ``wf``); the blocks are float64. ``mixed``:
    the mixed-precision solve (:func:`nnqs.vmc.sr.gram_solve`; the subsampled steps)."""
    net = wf if net is None else net
    jacobian = split_jacobian(net, configs)  # two real blocks when modulus and phase share no parameter
    if jacobian is None:
        jacobian = per_sample_jacobian(net, configs)
    direction = sr_direction(jacobian, local_energies, weights, energy, shift, comm,
                             previous=previous, momentum=momentum, mixed=mixed)
    offset = 0
    for p in wf.parameters():
        p.grad = direction[offset : offset + p.numel()].view_as(p).to(p.dtype)
        offset += p.numel()


