"""The loop skeleton: checkpoints by step count and by elapsed time, and a signal that stops
the loop at a step boundary after a checkpoint (a second signal stops at once)."""
import signal

import pytest
import torch

from nnqs.common.interrupt import Interrupted, StopSignal
from nnqs.common.loop import Checkpointer, LoopState, step_loop


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Result:
    loss, grad_norm = 1.0, 0.5


def toy_state() -> LoopState:
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return LoopState(model=model, opt=opt, sched=torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0),
                     generator=torch.Generator())


def test_checkpoints_by_step_count_by_elapsed_time_and_at_the_end():
    clock, saved = Clock(), []
    checkpointer = Checkpointer(lambda s: saved.append(s.step), every=4, seconds=60.0, total=10, clock=clock)
    state = toy_state()

    def step(s):
        clock.now += 35.0 if s.step in (4, 5) else 1.0  # two slow steps after the save at step 4
        return Result()

    step_loop(state, step, 10, [checkpointer])
    assert saved == [4, 6, 8, 10]  # 4 and 8 by count, 6 by time (70 s after 4), 10 at the end
    checkpointer.save_now(state)
    assert saved == [4, 6, 8, 10]  # once per step


def test_a_signal_stops_the_loop_at_the_next_step_boundary_after_a_checkpoint():
    state, saved, stop = toy_state(), [], StopSignal()

    def step(s):
        if s.step == 3:
            stop._handle(signal.SIGTERM, None)  # as if SIGTERM arrived during step 4
        return Result()

    with pytest.raises(Interrupted) as exc:
        step_loop(state, step, 10, stop=stop, save=lambda s: saved.append(s.step))
    assert saved == [4] and exc.value.step == 4 and exc.value.exit_code == 143 and str(exc.value) == "SIGTERM"
    assert not stop.deferring


def test_outside_the_loop_or_at_a_second_signal_the_run_stops_at_once():
    stop = StopSignal()
    with pytest.raises(Interrupted) as exc:
        stop._handle(signal.SIGINT, None)
    assert exc.value.exit_code == 130 and exc.value.step is None
    with stop.deferred():
        stop._handle(signal.SIGINT, None)
        assert stop.requested
        with pytest.raises(Interrupted):
            stop._handle(signal.SIGINT, None)


def test_handlers_are_installed_for_the_run_and_restored_after():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop._handle
        assert signal.getsignal(signal.SIGINT) == stop._handle
    assert signal.getsignal(signal.SIGTERM) == before
