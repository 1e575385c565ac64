"""The exception types for problems a user can cause, and for memory that runs out.

:class:`InputError`: a bad molecule, file or option; the CLI prints its message as
one line on stderr and exits with 2. :class:`OutOfMemory`: memory ran out in a
named step (PySCF's threads included); the CLI prints its one line and exits 1.
Internal invariants are asserts, never InputError.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class InputError(ValueError):
    """A problem with what the user asked for, explained in one line."""


class OutOfMemory(MemoryError):
    """Memory ran out in a named step; the message is one line that says what to change."""


def is_memory_failure(exc: BaseException | None) -> bool:
    """A MemoryError, or an error raised while handling one or quoting one, as PySCF's
    ``lib.ThreadRuntimeError`` does for a MemoryError in a worker thread."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        if isinstance(exc, MemoryError) or "MemoryError" in text or "Unable to allocate" in text:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def memory_guard(step: str, way_out: str) -> Iterator[None]:
    """Turn running out of memory inside the block into one OutOfMemory line naming ``step``."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        if isinstance(exc, OutOfMemory) or not is_memory_failure(exc):
            raise
        raise OutOfMemory(f"out of memory in {step}; {way_out}") from None
