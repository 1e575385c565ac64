"""The VMC optimisers (AdamW on the plain gradient, SGD on the SR direction) and their schedules:
the learning rate's warmup and cosine decay, and the SPRING momentum's ramp."""
from __future__ import annotations

import torch

from nnqs.common.schedule import warmup_cosine
from nnqs.vmc.config import VMCConfig


def steps_of(cfg: VMCConfig) -> int:
    """The VMC steps of ``cfg``, which must be set (a run sets them from its system: VMCConfig.for_system)."""
    if cfg.steps is None:
        raise ValueError("the config's steps are not set: VMCConfig.for_system(n_qubits) gives the run's")
    return cfg.steps


def lr_factor(step: int, cfg: VMCConfig) -> float:
    """Linear warmup over ``cfg.warmup`` steps, then cosine decay from lr to lr_final (lr / 10)."""
    floor = 0.1 if cfg.lr_final is None else cfg.lr_final / cfg.lr
    return warmup_cosine(step, cfg.warmup, steps_of(cfg), floor)


def momentum_factor(step: int, cfg: VMCConfig) -> float:
    """The SPRING momentum at ``step`` relative to ``cfg.sr_momentum``: 1 throughout with the
    "constant" schedule; with "ramp", 0 during the warmup, then rising as the learning rate's
    cosine falls, (1 - cos(pi t)) / 2 over the decay (t from 0 to 1), so that early, large steps
    are plain minSR and the late, small ones carry the momentum."""
    if cfg.sr_momentum_schedule == "constant":
        return 1.0
    if step < cfg.warmup:
        return 0.0
    return 1.0 - warmup_cosine(step, cfg.warmup, steps_of(cfg), 0.0)  # the learning rate's cosine, 1 -> 0


def make_optimizer(wf, cfg: VMCConfig) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW on the plain gradient, or SGD on the SR direction; warmup + cosine schedule."""
    if cfg.optimizer == "sr":
        opt = torch.optim.SGD(wf.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.AdamW(wf.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, cfg))
    return opt, sched
