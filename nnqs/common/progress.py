"""The progress line of both modes, drawn by ``tqdm``.

On a terminal: one live bar, ``42%|####  | 84/200 [00:05<00:07, 16.1step/s, <postfix>]``.
On a pipe or a log file: the same text as one line every ``every`` steps (default: 20 lines
per run), at the first and at the last step. The postfix is the mode's own measure
(VMC: energy and error; LM: loss and the last validation).
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm


class Progress:
    """Progress of steps ``initial + 1 .. total`` on ``stream`` (stderr by default)."""

    def __init__(self, total: int, initial: int = 0, stream: TextIO | None = None, every: int = 0) -> None:
        self.stream = sys.stderr if stream is None else stream  # looked up now, not at import
        self.total, self.initial = total, initial
        self.every = every or max(1, total // 20)
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.perf_counter()
        self.bar = None
        if self.tty:
            self.bar = tqdm(total=total, initial=initial, file=self.stream, unit="step", dynamic_ncols=True)

    def update(self, step: int, postfix: str, total: int | None = None) -> None:
        """Show that ``step`` steps of ``total`` are done, with ``postfix`` after the bar; ``total``:
        the run's last step where it moved (an LM run's tail)."""
        if total is not None and total != self.total:
            self.total = total
            if self.bar is not None:
                self.bar.total = total
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(step - self.bar.n)
            if step >= self.total:
                self.close()
            return
        if not (step >= self.total or step % self.every == 0 or step == self.initial + 1):
            return
        elapsed = time.perf_counter() - self.start
        rate = (step - self.initial) / elapsed if elapsed > 0 else None
        line = tqdm.format_meter(step, self.total, elapsed, unit="step", postfix=postfix, rate=rate,
                                 initial=self.initial, ascii=True)
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the live bar (a no-op on a pipe)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
