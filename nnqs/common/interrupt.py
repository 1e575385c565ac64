"""SIGINT and SIGTERM during a run: finish the step, write a checkpoint, stop.

:class:`StopSignal` installs handlers for both signals. While the training loop runs
(inside :meth:`StopSignal.deferred`) a signal only sets a flag; the loop checks it at
each step boundary, writes a checkpoint and raises :class:`Interrupted`. Outside the
loop (references, pre-training, the final energy), or at a second signal, the handler
raises :class:`Interrupted` at once. The CLI turns it into one line and exit code
128 + signal number (130 for SIGINT, 143 for SIGTERM).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was stopped by ``signum``; ``step``: steps completed and checkpointed (None: unknown)."""

    def __init__(self, signum: int, step: int | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.step = signum, step

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignal:
    """The SIGINT/SIGTERM handlers of one run (``with StopSignal() as stop:``)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.deferring = False
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        """True once a signal arrived while the loop was running."""
        return self.signum is not None

    def _handle(self, signum: int, frame) -> None:
        if self.deferring and self.signum is None:
            self.signum = signum
            return
        raise Interrupted(signum)

    def __enter__(self) -> "StopSignal":
        if threading.current_thread() is threading.main_thread():  # handlers live in the main thread only
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    @contextmanager
    def deferred(self) -> Iterator["StopSignal"]:
        """Within this block a (first) signal waits for the next step boundary (blocks nest)."""
        previous, self.deferring = self.deferring, True
        try:
            yield self
        finally:
            self.deferring = previous
