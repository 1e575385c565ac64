"""The VMC loop: :func:`nnqs.vmc.step.vmc_step` driven by the shared loop skeleton (:func:`vmc_steps`).

:class:`RunState` is all that changes during a run (model, optimiser, schedule,
sampler generator, requested sample count, step); checkpoints (the schema of
:mod:`nnqs.common.checkpoint`) save and restore exactly that, so a resumed run
continues the same trajectory. The history row of a step is :func:`history_row`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import torch

from nnqs.common.checkpoint import save_checkpoint
from nnqs.common.distributed import Communicator, SingleProcess
from nnqs.common.guard import DivergenceGuard
from nnqs.common.interrupt import StopSignal
from nnqs.common.loop import LoopState, step_loop, state_payload
from nnqs.vmc.selection import CoreHamiltonian
from nnqs.vmc.config import VMCConfig
from nnqs.vmc.draws import adapt_samples
from nnqs.vmc.optimizers import make_optimizer
from nnqs.vmc.step import StepResult, vmc_step

KIND = "vmc"
HISTORY_FIELDS = (
    "step", "energy", "error_mha", "stderr", "variance", "n_samples", "n_unique",
    "n_unique_connected", "lr", "grad_norm", "t_sample", "t_local", "t_grad",
)
WALL_TIME_FIELDS = ("t_sample", "t_local", "t_grad")
HISTORY_FLOAT_FORMAT = ".12g"

Callback = Callable[[StepResult, "RunState"], None]


@dataclass(kw_only=True)
class RunState(LoopState):
    """The VMC run state: the shared loop state plus the requested sample count and the ranks."""

    n_samples: int
    core: torch.Tensor | None = None  # selection "core": the core configurations (M, n)
    core_steps: int = 0  # core mode: steps taken since the core's last re-selection (or the start)
    core_ham: CoreHamiltonian | None = None  # H on the core, rebuilt when the core changes (not checkpointed)
    comm: Communicator = field(default_factory=SingleProcess)  # the ranks sharing the run (not checkpointed)

    @property
    def wf(self) -> torch.nn.Module:
        """The wavefunction (the loop state's ``model``)."""
        return self.model

    def counters(self) -> dict:
        counters = {"n_samples": self.n_samples, "core_steps": self.core_steps}
        return counters if self.core is None else {**counters, "core": self.core}

    def set_counters(self, counters: dict) -> None:
        self.n_samples = int(counters["n_samples"])
        # a checkpoint from before the count: the steps since the last multiple of 5 (the cadence then)
        self.core_steps = int(counters.get("core_steps", self.step % 5))
        if "core" in counters:
            self.core = counters["core"].to(self.model.device)


def new_state(wf, cfg: VMCConfig, comm: Communicator | None = None) -> RunState:
    """A fresh run state: optimiser and schedule of ``cfg``, the sampler generator seeded with ``cfg.seed``."""
    opt, sched = make_optimizer(wf, cfg)
    generator = torch.Generator(device=wf.device).manual_seed(cfg.seed)  # the same stream on every rank
    return RunState(model=wf, opt=opt, sched=sched, generator=generator, n_samples=cfg.samples,
                    comm=comm or SingleProcess(cfg.device))


def history_row(result: StepResult, e_exact: float | None) -> dict:
    """One history.csv row of a step (``error_mha``: mHa from the exact energy, None without one)."""
    row = {k: getattr(result, k) for k in HISTORY_FIELDS if k != "error_mha"}
    row["error_mha"] = None if e_exact is None else 1000.0 * (result.energy - e_exact)
    return row


def one_vmc_step(state: RunState, ham, cfg: VMCConfig) -> StepResult:
    """One step of ``state`` (sample, estimate, update), then adapt the requested sample count."""
    t_build = time.perf_counter()
    if state.core is not None and state.comm.world_size == 1 and (state.core_ham is None or state.core_ham.core is not state.core):
        state.core_ham = CoreHamiltonian(ham, state.core, previous=state.core_ham)  # grown from the last core's
    t_build = time.perf_counter() - t_build
    result = vmc_step(state.wf, ham, state.opt, state.sched, cfg, state.step, state.n_samples, state.generator,
                      state.comm, state.core, state.core_ham, state.core_steps)
    result.t_local += t_build  # building H on a new core is part of the local energies' cost
    if cfg.selection == "samples":
        state.n_samples = adapt_samples(result.n_samples, result.n_unique, cfg)
    else:  # the count that gave at most core_samples unique samples: no redraws next step
        state.n_samples = result.n_samples
    if result.core is not None:
        state.core, state.core_steps = result.core, 0
    else:
        state.core_steps += 1
    return result


def vmc_steps(
    state: RunState, ham, cfg: VMCConfig, callbacks: Iterable[Callback] = (), guard: DivergenceGuard | None = None,
    stop: StopSignal | None = None, save: Callable[[RunState], None] | None = None,
) -> list[StepResult]:
    """Run steps ``state.step .. cfg.steps - 1``, calling each callback after every accepted step.

    ``guard`` (default: a fresh :class:`~nnqs.common.guard.DivergenceGuard`) rejects and retries
    non-finite steps; on a signal (``stop``) the loop calls ``save(state)`` and stops
    (:func:`nnqs.common.loop.step_loop`); all ranks agree on stopping.
    """
    def agree(flag: bool) -> bool:
        if state.comm.world_size == 1:
            return flag
        return bool(state.comm.all_reduce_sum(torch.tensor([float(flag)], device=state.wf.device)) > 0)

    return step_loop(state, lambda s: one_vmc_step(s, ham, cfg), cfg.steps, callbacks, guard, stop, save, agree)


def save_state(path: str | Path, state: RunState, cfg: VMCConfig, system: dict, history: dict) -> None:
    """Checkpoint everything needed to continue the run exactly (atomic write); ``history``:
    the history writer's state (:meth:`nnqs.common.history.HistoryWriter.state`)."""
    payload = state_payload(state, cfg, dict(state.wf.hparams), history)
    save_checkpoint(path, KIND, {**payload, "system": system})
