"""The `nnqs` command: a thin dispatcher over subcommand modules.

Each subcommand module exposes ``register(subparsers)``, which adds its parser
and sets ``func`` (a callable taking the parsed namespace and returning an exit
code). Errors a user can cause (:class:`hamiltonians.errors.InputError`, and an
``OSError`` on a path the user named) become one line on stderr and exit code 2,
never a traceback; failures of the machine (disk full, out of memory) one line and
exit code 1; SIGINT / SIGTERM during a run one line saying how to resume, and exit
code 130 / 143 (:mod:`nnqs.common.interrupt`).
"""
from __future__ import annotations

import argparse
import importlib
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nnqs import INTERRUPTED_LOADING

if TYPE_CHECKING:
    from nnqs.common.interrupt import Interrupted

SUBCOMMAND_MODULES = ("nnqs.cli.exact", "nnqs.cli.vmc", "nnqs.cli.lm")


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as a single line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse API
        sys.stderr.write(f"{self.prog}: error: {one_line(message)}\n")
        raise SystemExit(2)


def one_line(message: object) -> str:
    """``message`` on one line: line breaks and other control characters shown escaped."""
    text = str(message).strip()
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="nnqs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``nnqs`` command; the exit code. A Ctrl-C while the program is still loading (NumPy, torch,
    the subcommands: about 2 s) is one line and exit 130, as it is during a run. While the modules load
    it is held (:class:`HeldInterrupt`) and acted on once they are loaded: raised inside a library's
    import it could be swallowed there (seen: the run then went on to its end, exit 0)."""
    held = HeldInterrupt()
    try:
        return _dispatch(argv, held)
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED_LOADING + "\n")
        return 130
    finally:
        held.release(raise_held=False)  # a usage error or --help ended it before the release in _dispatch


class HeldInterrupt:
    """While alive, SIGINT is recorded instead of raised (main thread only); :meth:`release` puts the
    previous handler back and raises KeyboardInterrupt if one came."""

    def __init__(self) -> None:
        import signal
        import threading

        self.came, self.holding, self.previous = False, False, None
        if threading.current_thread() is threading.main_thread():
            self.previous, self.holding = signal.signal(signal.SIGINT, self._record), True

    def _record(self, signum: int, frame) -> None:
        self.came = True

    def release(self, raise_held: bool = True) -> None:
        import signal

        if self.holding:
            signal.signal(signal.SIGINT, signal.default_int_handler if self.previous is None else self.previous)
            self.holding = False
            if self.came and raise_held:
                raise KeyboardInterrupt


def _dispatch(argv: list[str] | None, held: HeldInterrupt) -> int:
    from hamiltonians.errors import InputError
    from nnqs.common.allocator import reuse_freed_memory
    from nnqs.common.errors import EnvironmentFailure, disk_full, disk_full_error
    from nnqs.common.interrupt import Interrupted

    reuse_freed_memory()  # about 2x faster VMC steps on glibc (see nnqs.common.allocator)
    # a path given as bytes that are not UTF-8 prints back as given, in any locale (not a UnicodeEncodeError)
    getattr(sys.stdout, "reconfigure", lambda **_: None)(errors="surrogateescape")
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    # the libraries the subcommands import on their first call, loaded while a Ctrl-C is still held: raised inside
    # one of their imports it left NumPy half-loaded and the process ended by the signal or with exit 0
    for name in ("scipy.linalg", "scipy.sparse", "scipy.special"):
        importlib.import_module(name)

    held.release()  # the modules are loaded: a Ctrl-C that came meanwhile is raised now
    try:
        code = args.func(args)
    except InputError as exc:
        sys.stderr.write(f"nnqs: error: {one_line(exc)}\n")
        return 2
    except EnvironmentFailure as exc:
        sys.stderr.write(f"nnqs: error: {one_line(exc)}\n")
        return 1
    except Interrupted as exc:
        sys.stderr.write(f"nnqs: {one_line(interrupted_message(exc, argv))}\n")
        return exc.exit_code
    except OSError as exc:  # a path given by the user that cannot be read or written
        if disk_full(exc):
            sys.stderr.write(f"nnqs: error: {one_line(disk_full_error(exc.filename or 'a file', exc))}\n")
            return 1
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"nnqs: error: {one_line(where + (exc.strerror or exc.__class__.__name__))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("nnqs: interrupted\n")
        return 130
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        sys.stderr.write(f"nnqs: error: {out_of_memory_message(exc)}\n")
        return 1
    return int(code or 0)


def interrupted_message(exc: Interrupted, argv: list[str]) -> str:
    """What was saved and the command that continues the run (``exc.folder``: the run folder, if any)."""
    folder = getattr(exc, "folder", None)
    what = f"interrupted by {exc}"
    if folder is None:
        return what
    plain = [a for a in argv if a not in ("--resume", "--overwrite")]
    again = shlex.join(["nnqs", *plain, "--resume"])
    ckpt = Path(folder) / "checkpoint.pt"
    if exc.step is not None:
        return f"{what} at step {exc.step}; checkpoint saved in {ckpt}; continue with: {again}"
    if ckpt.is_file():
        return f"{what}; the last checkpoint is in {ckpt}; continue with: {again}"
    if (Path(folder) / "config.toml").is_file():
        return f"{what} before the first checkpoint; start again from step 0 with: {again}"
    return f"{what} before the run started; nothing was saved; run again with: {shlex.join(['nnqs', *argv])}"


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: Python's MemoryError, torch's CPU allocator, a CUDA out-of-memory, NumPy's
    "Unable to allocate", or any of these wrapped by another layer (PySCF's ThreadRuntimeError)."""
    from hamiltonians.errors import is_memory_failure

    if is_memory_failure(exc):
        return True
    seen: BaseException | None = exc
    for _ in range(8):  # the exception and its causes
        if seen is None:
            return False
        text = str(seen).lower()
        if isinstance(seen, MemoryError) or any(
                words in text for words in ("can't allocate memory", "out of memory", "unable to allocate")):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def out_of_memory_message(exc: BaseException) -> str:
    """One line: how much was asked for (when torch says) and which knobs lower it."""
    from hamiltonians.errors import OutOfMemory

    if isinstance(exc, OutOfMemory):  # raised by hamiltonians, already one line with its way out
        return one_line(exc)
    found = re.search(r"allocate (\d+) bytes", str(exc)) or re.search(r"allocate ([\d.]+ [KMGT]iB)", str(exc))
    asked = ""
    if found:
        amount = found.group(1)
        asked = f" (tried to allocate {int(amount) / 2**30:,.1f} GiB)" if amount.isdigit() else f" (tried to allocate {amount})"
    return (f"out of memory{asked}: use a smaller model (--d-model, --n-layers) or smaller batches "
            "(vmc: --max-batch, --unique-max, --samples); checkpoints already written are intact")


if __name__ == "__main__":
    sys.exit(main())
