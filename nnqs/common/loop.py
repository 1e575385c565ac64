"""The training-loop skeleton of both modes, and what a checkpoint saves of it.

:class:`LoopState` is what changes during a run: model, optimizer, LambdaLR schedule, the
run's ``torch.Generator`` (VMC: the sampler's; LM: the batch order's), the step count,
and the mode's own counters (:meth:`LoopState.counters`, restored by a rollback) and
extras (:meth:`LoopState.extras`, saved in a checkpoint). :func:`step_loop` steps it:
the mode's ``step_fn`` does one optimizer step and returns a small result; the
:class:`~nnqs.common.guard.DivergenceGuard` rejects non-finite steps; callbacks
``cb(result, state)`` (history row, checkpoint, progress) run after each accepted step;
a SIGINT/SIGTERM (:mod:`nnqs.common.interrupt`) stops the loop at a step boundary after
a checkpoint. :func:`state_payload` and :func:`restore_state` map a state to the
checkpoint schema of :mod:`nnqs.common.checkpoint` and back, so a resumed run
continues the same trajectory bit for bit.
"""
from __future__ import annotations

import hashlib
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import torch

from nnqs.common.config import config_to_dict
from nnqs.common.errors import UserError
from nnqs.common.guard import DivergenceGuard
from nnqs.common.interrupt import Interrupted, StopSignal

R = TypeVar("R")


@dataclass
class LoopState:
    """The state of a run that a checkpoint saves (see the module docstring)."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    generator: torch.Generator
    step: int = 0  # steps completed

    def counters(self) -> dict:
        """What a rejected step must put back besides model, optimizer and schedule."""
        return {}

    def set_counters(self, counters: dict) -> None:
        """Inverse of :meth:`counters`."""

    def extras(self) -> dict:
        """The mode's state saved in a checkpoint besides the schema's common keys."""
        return self.counters()

    def load_extras(self, extras: dict) -> None:
        """Inverse of :meth:`extras` (resume)."""
        self.set_counters(extras)


Callback = Callable[[Any, LoopState], None]


def step_loop(
    state: LoopState, step_fn: Callable[[LoopState], R], total: int, callbacks: Iterable[Callback] = (),
    guard: DivergenceGuard | None = None, stop: StopSignal | None = None,
    save: Callable[[LoopState], None] | None = None, agree: Callable[[bool], bool] | None = None,
) -> list[R]:
    """Run steps ``state.step .. total - 1``; return the accepted steps' results.

    ``save(state)`` writes a checkpoint when ``stop`` reports a signal (then
    :class:`Interrupted` is raised); ``agree(flag)`` makes all ranks of a multi-process run
    agree on stopping (default: this process decides alone).
    """
    callbacks = list(callbacks)
    guard = DivergenceGuard() if guard is None else guard
    results: list[R] = []
    with stop.deferred() if stop is not None else nullcontext():
        while True:
            honour_stop(state, stop, save, agree)
            if state.step >= total:
                return results
            guard.before_step(state)
            result = step_fn(state)
            if not guard.accept(result, state):
                continue
            state.step += 1
            results.append(result)
            for cb in callbacks:
                cb(result, state)


def honour_stop(
    state: LoopState, stop: StopSignal | None, save: Callable[[LoopState], None] | None = None,
    agree: Callable[[bool], bool] | None = None,
) -> None:
    """At a step boundary: if ``stop`` holds a signal (all ranks agreeing, see :func:`step_loop`),
    ``save(state)`` and raise :class:`Interrupted`; otherwise return."""
    requested = stop is not None and stop.requested
    if stop is not None and (agree(requested) if agree is not None else requested):
        if save is not None:
            save(state)
        raise Interrupted(stop.signum or 2, state.step if save is not None else None)


class Checkpointer:
    """A callback that calls ``save(state)`` every ``every`` steps, every ``seconds`` seconds
    (0: never by time), and at step ``total``; :meth:`save_now` saves at once (once per step)."""

    def __init__(self, save: Callable[[LoopState], None], every: int, seconds: float, total: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.save, self.every, self.seconds, self.total, self.clock = save, every, seconds, total, clock
        self.last_time = clock()
        self.saved_step: int | None = None

    def __call__(self, result: Any, state: LoopState) -> None:
        due_by_time = self.seconds > 0 and self.clock() - self.last_time >= self.seconds
        if state.step % self.every == 0 or state.step >= self.total or due_by_time:
            self.save_now(state)

    def save_now(self, state: LoopState) -> None:
        if self.saved_step != state.step:
            self.save(state)
            self.saved_step, self.last_time = state.step, self.clock()


def state_payload(state: LoopState, cfg: Any, model_config: dict, history: dict) -> dict:
    """The schema's common keys for ``state`` (see :mod:`nnqs.common.checkpoint`)."""
    return {
        "model": state.model.state_dict(),
        "model_config": model_config,
        "optimizer": state.opt.state_dict(),
        "scheduler": state.sched.state_dict(),
        "step": state.step,
        "rng": {"torch": torch.get_rng_state(), "generator": state.generator.get_state(),
                "generator_device": state.generator.device.type},
        "config": config_to_dict(cfg),
        "history": history,
        "extras": state.extras(),
    }


def load_model_weights(model: torch.nn.Module, weights: dict, path: str | Path) -> None:
    """``model.load_state_dict(weights)``, or one line naming the first tensor that does not fit."""
    own = model.state_dict()
    missing = [k for k in own if k not in weights]
    unexpected = [k for k in weights if k not in own]
    if missing or unexpected:
        what = f"lacks {missing[0]}" if missing else f"has {unexpected[0]}, which this model does not"
        raise UserError(f"checkpoint {path} does not fit this model: it {what} (another --n-layers or model kind?)")
    for name, tensor in own.items():
        if tuple(weights[name].shape) != tuple(tensor.shape):
            raise UserError(f"checkpoint {path} does not fit this model: {name} has shape "
                            f"{tuple(weights[name].shape)} there, {tuple(tensor.shape)} here "
                            "(another --d-model, --n-heads or --n-layers?)")
    model.load_state_dict(weights)


def restore_state(data: dict, state: LoopState, path: str | Path) -> bool:
    """Put a checkpoint's model, optimizer, schedule, RNG states, step and extras into ``state``.
    False when the sampler's stream could not be continued (see :func:`restore_generator`)."""
    load_model_weights(state.model, data["model"], path)
    try:
        state.opt.load_state_dict(data["optimizer"])
        state.sched.load_state_dict(data["scheduler"])
        continued = restore_generator(state.generator, data["rng"])
        torch.set_rng_state(data["rng"]["torch"])
        state.step = int(data["step"])
        state.load_extras(data["extras"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise UserError(f"checkpoint {path} cannot be resumed ({reason})") from None
    return continued


def restore_generator(generator: torch.Generator, rng: dict) -> bool:
    """Continue the generator's stream from a checkpoint's ``rng``; True if it was continued.

    A state saved on another kind of device (a CUDA Philox state resumed on the CPU, or the
    reverse: a run moved between machines) does not fit this generator. Its stream cannot go on,
    so the generator is seeded from the stored state's bytes instead: the same checkpoint resumed
    twice still draws the same samples. Returns False then."""
    saved = rng.get("generator_device", generator.device.type)  # older checkpoints: same device kind
    if saved == generator.device.type:
        generator.set_state(rng["generator"])
        return True
    digest = hashlib.sha256(rng["generator"].numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") % 2**63)
    return False
