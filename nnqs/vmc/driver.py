"""The VMC loop: a short loop over :func:`nnqs.vmc.step.vmc_step`; everything else is a callback.

:class:`RunState` is all that changes during a run (model, optimiser, schedule,
sampler generator, requested sample count, step); checkpoints save and
restore exactly that, so a resumed run continues the same trajectory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import torch

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.config import config_to_dict
from nnqs.common.distributed import SingleProcess
from nnqs.common.errors import UserError
from nnqs.common.guard import DivergenceGuard
from nnqs.vmc.step import StepResult, VMCConfig, adapt_samples, make_optimizer, vmc_step

Callback = Callable[[StepResult, "RunState"], None]


@dataclass
class RunState:
    wf: torch.nn.Module
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    generator: torch.Generator
    n_samples: int
    step: int = 0  # steps completed
    comm: SingleProcess = field(default_factory=SingleProcess)  # the ranks sharing the run (not checkpointed)


def new_state(wf, cfg: VMCConfig, comm: SingleProcess | None = None) -> RunState:
    opt, sched = make_optimizer(wf, cfg)
    generator = torch.Generator(device=wf.device).manual_seed(cfg.seed)  # the same stream on every rank
    return RunState(wf, opt, sched, generator, cfg.samples, comm=comm or SingleProcess(cfg.device))


def run_vmc(
    state: RunState, ham, cfg: VMCConfig, callbacks: Iterable[Callback] = (), guard: DivergenceGuard | None = None,
) -> list[StepResult]:
    """Run steps ``state.step .. cfg.steps - 1``, calling each callback after every accepted step.

    ``guard`` (default: a fresh :class:`~nnqs.common.guard.DivergenceGuard`) rejects and retries non-finite steps.
    """
    callbacks = list(callbacks)
    guard = DivergenceGuard() if guard is None else guard
    results = []
    while state.step < cfg.steps:
        guard.before_step(state)
        result = vmc_step(
            state.wf, ham, state.opt, state.sched, cfg, state.step, state.n_samples, state.generator, state.comm
        )
        if not guard.accept(result, state):
            continue
        state.n_samples = adapt_samples(result.n_samples, result.n_unique, cfg)
        state.step += 1
        results.append(result)
        for cb in callbacks:
            cb(result, state)
    return results


def save_state(path: str | Path, state: RunState, cfg: VMCConfig, system: dict) -> None:
    """Checkpoint everything needed to continue the run exactly (atomic write)."""
    save_checkpoint(path, "vmc", {
        "step": state.step,
        "n_samples": state.n_samples,
        "model": state.wf.state_dict(),
        "hparams": dict(state.wf.hparams),
        "optimizer": state.opt.state_dict(),
        "scheduler": state.sched.state_dict(),
        "generator": state.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "config": config_to_dict(cfg),
        "system": system,
    })


def load_state(path: str | Path, state: RunState, system: dict) -> None:
    """Restore ``state`` in place from a checkpoint of the same system and model shape."""
    data = load_checkpoint(path, "vmc")
    if data.get("system") != system:
        raise UserError(f"checkpoint {path} is for another system ({data.get('system', {}).get('description')})")
    try:
        state.wf.load_state_dict(data["model"])
        state.opt.load_state_dict(data["optimizer"])
        state.sched.load_state_dict(data["scheduler"])
        state.generator.set_state(data["generator"])
        torch.set_rng_state(data["torch_rng"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise UserError(f"checkpoint {path} does not fit this model: {str(exc).splitlines()[0][:120]}") from None
    state.step, state.n_samples = int(data["step"]), int(data["n_samples"])


class Checkpointer:
    """Saves the run state every ``every`` steps and at the last step."""

    def __init__(self, path: str | Path, cfg: VMCConfig, system: dict) -> None:
        self.path, self.cfg, self.system = Path(path), cfg, system

    def __call__(self, result: StepResult, state: RunState) -> None:
        if state.step % self.cfg.checkpoint_every == 0 or state.step == self.cfg.steps:
            save_state(self.path, state, self.cfg, self.system)
