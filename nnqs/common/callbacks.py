"""Callbacks of the VMC loop: progress line, history CSV, checkpoints.

Each is a callable ``cb(result: StepResult, state: RunState)`` run after every step;
the loop itself stays short and knows nothing of files or terminals.
"""
from __future__ import annotations

import csv
import sys
import time
from pathlib import Path
from typing import TextIO

HISTORY_FIELDS = (
    "step", "energy", "error_mha", "stderr", "variance", "n_samples", "n_unique",
    "n_unique_connected", "lr", "grad_norm", "t_sample", "t_local", "t_grad",
)


def history_row(result, e_exact: float | None) -> dict:
    """One history.csv row of a :class:`~nnqs.vmc.step.StepResult`."""
    error = None if e_exact is None else 1000.0 * (result.energy - e_exact)
    row = {k: getattr(result, k) for k in HISTORY_FIELDS if k != "error_mha"}
    row["error_mha"] = error
    return row


class HistoryCSV:
    """Appends one row per step to ``path`` and flushes it at once (a crash loses nothing logged)."""

    def __init__(self, path: str | Path, e_exact: float | None, append: bool = False,
                 keep_below: int | None = None) -> None:
        self.path = Path(path)
        self.e_exact = e_exact
        new = not (append and self.path.exists())
        if not new and keep_below is not None:
            truncate_history(self.path, keep_below)
        self.fh = open(self.path, "w" if new else "a", newline="")
        self.writer = csv.DictWriter(self.fh, fieldnames=HISTORY_FIELDS)
        if new:
            self.writer.writeheader()
            self.fh.flush()

    def __call__(self, result, state) -> None:
        row = history_row(result, self.e_exact)
        self.writer.writerow({k: ("" if v is None else f"{v:.12g}" if isinstance(v, float) else v) for k, v in row.items()})
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def truncate_history(path: str | Path, keep_below: int) -> None:
    """Rewrite ``path`` (atomically) keeping the header and the complete rows with step < ``keep_below``.

    After a crash the log can run ahead of the last checkpoint (and end in a torn
    line); a resumed run starts at the checkpoint's step, so those rows go.
    """
    from nnqs.common.checkpoint import atomic_write_text

    with open(path, newline="") as fh:
        lines = fh.readlines()
    kept = lines[:1]
    for line in lines[1:]:
        if not line.endswith("\n"):
            break  # torn last line
        fields = next(csv.reader([line]), [])
        if len(fields) == len(HISTORY_FIELDS) and fields[0].isdigit() and int(fields[0]) < keep_below:
            kept.append(line)
    if kept != lines:
        atomic_write_text(path, "".join(kept))


class Progress:
    """A one-line progress bar on a terminal; a line every ``every`` steps otherwise."""

    def __init__(self, total: int, e_exact: float | None, stream: TextIO | None = None, every: int = 0) -> None:
        stream = sys.stderr if stream is None else stream  # looked up now, not at import
        self.total, self.e_exact, self.stream = total, e_exact, stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.every = every or max(1, total // 20)
        self.start = time.perf_counter()

    def __call__(self, result, state) -> None:
        step = result.step + 1
        last = step == self.total
        if not (self.tty or last or step % self.every == 0 or step == 1):
            return
        done = int(24 * step / self.total)
        bar = "#" * done + "." * (24 - done)
        err = "" if self.e_exact is None else f" err {1000 * (result.energy - self.e_exact):+9.3f} mHa"
        line = (
            f"[{bar}] {step:>5}/{self.total} E {result.energy:.6f}{err} var {result.variance:.2e}"
            f" uniq {result.n_unique:>6} {result.t_step:.2f}s/step"
        )
        end = "\r" if self.tty and not last else "\n"
        self.stream.write(line + end)
        self.stream.flush()
