"""Divergence guard of the training loop (both modes): reject a non-finite step, roll back,
lower the learning rate.

Before each step the guard keeps an in-memory copy of the run state (model,
optimiser and schedule state, the mode's counters such as the VMC sample count).
After the step it checks that the step's measures (energy, variance, loss -- whichever
the step result has), the gradient norm and every parameter are finite. If not, the step is rejected: the copy is restored, the learning rate
is multiplied by ``lr_factor`` (in the schedule's base rates, so a checkpoint
and a resumed run keep it), the event is reported, and the step is tried again
with fresh samples (the sampler's generator is not rewound). After
``max_failures`` rejections in a row the run stops with a
:class:`DivergenceError`; since rejected steps never reach the callbacks, the
checkpoint on disk is the last good state.
"""
from __future__ import annotations

import copy
import os
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from nnqs.common.errors import UserError


GUARDED = ("energy", "variance", "loss", "grad_norm")  # the step-result fields checked, where present


class DivergenceError(UserError):
    """The run kept producing non-finite values and was stopped (one line)."""


@dataclass
class Snapshot:
    """A copy of everything a step changes, except the sampler's generator."""

    model: dict
    optimizer: dict
    scheduler: dict
    counters: dict


def take_snapshot(state, into: Snapshot | None = None) -> Snapshot:
    """Deep copies of ``state``'s model, optimiser and schedule state dicts, and its counters.

    With ``into`` (an earlier snapshot of the same run), tensors are copied into its buffers
    wherever the structure still matches, in one ``_foreach_copy_``: a step's snapshot then
    costs a memory copy instead of a deep copy of every optimiser tensor."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    model = _copy_tree(state.model.state_dict(), None if into is None else into.model, pairs)
    optimizer = _copy_tree(state.opt.state_dict(), None if into is None else into.optimizer, pairs)
    if pairs:
        torch._foreach_copy_([d for d, _ in pairs], [s for _, s in pairs])
    return Snapshot(model, optimizer, copy.deepcopy(state.sched.state_dict()), copy.deepcopy(state.counters()))


def _copy_tree(src, old, pairs: list):
    """A deep copy of ``src`` (nested dicts, lists, tensors, plain values). Tensors whose
    counterpart in ``old`` has the same shape, dtype and device are reused: their copy is
    queued in ``pairs`` as (destination, source) and left to the caller."""
    if isinstance(src, torch.Tensor):
        if (isinstance(old, torch.Tensor) and old.shape == src.shape and old.dtype == src.dtype
                and old.device == src.device):
            pairs.append((old, src.detach()))
            return old
        return src.detach().clone()
    if isinstance(src, dict):
        same = isinstance(old, dict)
        return {k: _copy_tree(v, old.get(k) if same else None, pairs) for k, v in src.items()}
    if isinstance(src, (list, tuple)):
        same = isinstance(old, type(src)) and len(old) == len(src)
        return type(src)(_copy_tree(v, old[i] if same else None, pairs) for i, v in enumerate(src))
    return copy.deepcopy(src)


def restore_snapshot(state, snap: Snapshot) -> None:
    """Put ``snap`` back into ``state`` (in place)."""
    state.model.load_state_dict(snap.model)
    state.opt.load_state_dict(copy.deepcopy(snap.optimizer))
    state.sched.load_state_dict(copy.deepcopy(snap.scheduler))
    state.set_counters(copy.deepcopy(snap.counters))


def scale_learning_rate(opt: torch.optim.Optimizer, sched, factor: float) -> None:
    """Multiply the current and the scheduled learning rates by ``factor``."""
    for group in opt.param_groups:
        group["lr"] *= factor
    if hasattr(sched, "base_lrs"):
        sched.base_lrs = [lr * factor for lr in sched.base_lrs]
    if getattr(sched, "_last_lr", None) is not None:
        sched._last_lr = [group["lr"] for group in opt.param_groups]


def non_finite_reason(result, wf: torch.nn.Module) -> str | None:
    """What is not finite after a step (energy, variance, loss, gradient, parameters), or None."""
    for name in GUARDED:
        value = getattr(result, name, 0.0)
        if not math.isfinite(value):
            return f"{name} {value}"
    named = list(wf.named_parameters())
    if _all_finite([p for _, p in named]):
        return None
    return next(f"parameter {name}" for name, p in named if not bool(torch.isfinite(p).all()))


def _all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every entry of every tensor is finite (one synchronisation, not one per tensor)."""
    if not tensors:
        return True
    return bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all())


@dataclass
class DivergenceGuard:
    """Wraps each step of :func:`nnqs.common.loop.step_loop`; see the module docstring.

    ``log(line)`` receives one line per event; ``checkpoint`` is named in the
    final error message.
    """

    max_failures: int = 5
    lr_factor: float = 0.5
    log: Callable[[str], None] | None = None
    checkpoint: str | Path | None = None
    failures: int = 0  # rejections in a row
    events: list[dict] = field(default_factory=list)
    _snap: Snapshot | None = None

    def before_step(self, state) -> None:
        """Copy the state about to be stepped from (kept only while its parameters are finite)."""
        if self._snap is None or _all_finite(list(state.model.parameters())):
            self._snap = take_snapshot(state, self._snap)

    def accept(self, result, state) -> bool:
        """True if the step is good; otherwise roll back, lower the rate, maybe stop (raises)."""
        reason = non_finite_reason(result, state.model)
        if reason is None:
            self.failures = 0
            return True
        assert self._snap is not None, "before_step was not called"
        self.failures += 1
        restore_snapshot(state, self._snap)
        scale_learning_rate(state.opt, state.sched, self.lr_factor)
        lr = state.opt.param_groups[0]["lr"]
        event = {"step": state.step, "event": "rollback", "reason": f"non-finite {reason}",
                 "failures_in_a_row": self.failures, "new_lr": lr}
        self.events.append(event)
        self._report(f"step {state.step}: non-finite {reason}; rolled back, learning rate now {lr:.3g} "
                     f"(failure {self.failures}/{self.max_failures})")
        if self.failures >= self.max_failures:
            where = ""
            if self.checkpoint is not None:
                saved = Path(self.checkpoint).is_file()
                where = f"; last good checkpoint: {self.checkpoint}" if saved else "; no checkpoint was written yet"
            raise DivergenceError(f"run diverged {self.failures} times in a row at step {state.step} "
                                  f"(non-finite {reason}){where}")
        return False

    def _report(self, line: str) -> None:
        if self.log is not None:
            self.log(line)


def event_logger(events_file: str | Path | None, stream=None) -> Callable[[str], None]:
    """A ``log`` for :class:`DivergenceGuard`: each line to ``stream`` (stderr) and appended to ``events_file``."""
    import sys
    import time

    stream = sys.stderr if stream is None else stream

    def log(line: str) -> None:
        stream.write(f"nnqs: warning: {line}\n")
        stream.flush()
        if events_file is not None:
            with open(events_file, "a") as fh:
                fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
                fh.flush()
                os.fsync(fh.fileno())

    return log
