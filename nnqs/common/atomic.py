"""Atomic file writes: a crash at any moment leaves the old file or the new one, never a torn one.

The bytes go to a temporary file in the same folder, which is flushed, fsynced and renamed
over the target (then the folder is fsynced). Errors name the target, never the temporary
file: a full disk is an :class:`~nnqs.common.errors.EnvironmentFailure` (exit 1), a target
that is a folder or cannot be written is a :class:`~nnqs.common.errors.UserError` (exit 2).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

from nnqs.common.errors import UserError, disk_full, disk_full_error


def atomic_write_bytes(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(fileobj)`` on a temporary file next to ``path``, then rename it over ``path``."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file name")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_folder(path.parent)
    except OSError as exc:
        if disk_full(exc):
            raise disk_full_error(path, exc) from None
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def _fsync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
