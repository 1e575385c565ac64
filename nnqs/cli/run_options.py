"""What `nnqs vmc` and `nnqs lm train` share: the run-folder options and the signal handling."""
from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from nnqs.common.interrupt import Interrupted, StopSignal
from nnqs.common.runfolder import Mode


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """``--resume`` | ``--overwrite``, ``--json`` and ``--no-progress`` (``--out`` is the command's own)."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="continue the run in --out (its config.toml holds its settings; --steps extends it)")
    mode.add_argument("--overwrite", action="store_true", help="replace the run in --out (its files are deleted)")
    p.add_argument("--json", action="store_true", help="print the result object as the last stdout line")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")


def run_mode(args: argparse.Namespace) -> Mode:
    """How the run folder is claimed (:func:`nnqs.common.runfolder.claim`)."""
    return "resume" if args.resume else "overwrite" if args.overwrite else "new"


@contextmanager
def signals_for(out: str | Path) -> Iterator[StopSignal]:
    """SIGINT/SIGTERM handlers for a run in ``out``; an interruption carries ``out`` for its message."""
    with StopSignal() as stop:
        try:
            yield stop
        except Interrupted as exc:
            exc.folder = out
            raise
