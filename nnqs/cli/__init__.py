"""The `nnqs` command: a thin dispatcher over subcommand modules.

Each subcommand module exposes ``register(subparsers)``, which adds its parser
and sets ``func`` (a callable taking the parsed namespace and returning an exit
code). Errors a user can cause (:class:`hamiltonians.errors.InputError`, and an
``OSError`` on a path the user named) become one line on stderr and exit code 2,
never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys

from hamiltonians.errors import InputError, OutOfMemory, is_memory_failure
from nnqs.common.allocator import reuse_freed_memory

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
    reuse_freed_memory()  # about 2x faster VMC steps on glibc (see nnqs.common.allocator)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except InputError as exc:
        sys.stderr.write(f"nnqs: error: {one_line(exc)}\n")
        return 2
    except OSError as exc:  # a path given by the user that cannot be read or written
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


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: Python's MemoryError (also wrapped, as PySCF's ThreadRuntimeError does),
    torch's CPU allocator or a CUDA out-of-memory."""
    text = str(exc)
    return is_memory_failure(exc) or "can't allocate memory" in text or "out of memory" in text.lower()


def out_of_memory_message(exc: BaseException) -> str:
    """One line: how much was asked for (when torch says) and which knobs lower it."""
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
