"""A run folder belongs to one run.

* A folder that holds a run (``config.toml``, ``checkpoint.pt`` or ``history.csv``) is
  never written over: a new run there is refused in one line that offers ``--resume``,
  another ``--out``, or ``--overwrite`` (which removes the old run's files first).
* While a run is live its process holds an advisory lock (``fcntl.flock`` on
  ``.nnqs.lock`` in the folder): a second process on the same folder is refused in one
  line. The kernel drops the lock when the process ends, however it ends (kill -9
  included), so a lock left by a dead process is taken over without a word.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Literal

from nnqs.common.errors import UserError, disk_full, disk_full_error

Mode = Literal["new", "resume", "overwrite"]
RUN_FILES = ("config.toml", "checkpoint.pt", "history.csv")  # any of them makes a folder a run's
OUTPUT_FILES = (*RUN_FILES, "result.json", "events.log", "energy.png", "curve.png", "train.json", "rdm1.npy",
                "rdm1_sampled.npy", "rdm1_stderr.npy", "hamiltonian.npz",
                "natural_occupations.png", "pretrain.pt", "molecule.json")
LOCK_NAME = ".nnqs.lock"


class RunFolder:
    """The claimed folder of one run (use :func:`claim`); ``release()`` (or ``with``) gives it up."""

    def __init__(self, path: Path, lock_fd: int | None) -> None:
        self.path, self._lock_fd = path, lock_fd

    @property
    def config(self) -> Path:
        return self.path / "config.toml"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint.pt"

    @property
    def history(self) -> Path:
        return self.path / "history.csv"

    def run_files(self) -> list[str]:
        """The names of :data:`RUN_FILES` present in the folder."""
        return [name for name in RUN_FILES if (self.path / name).exists()]

    def release(self) -> None:
        """Give up the lock (the lock file stays; it holds nothing of the run)."""
        if self._lock_fd is not None:
            try:
                os.ftruncate(self._lock_fd, 0)  # a released lock names no process
            except OSError:
                pass
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _open_folder(path: Path) -> int:
    """Create ``path`` and open its lock file; a folder that cannot be written is a UserError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        return os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        if disk_full(exc):
            raise disk_full_error(path / LOCK_NAME, exc) from None
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UserError(f"output folder {path} is not writable ({reason})") from None


def _lock(path: Path, fd: int) -> None:
    """Take the folder's lock without waiting, or refuse: another live process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise UserError(f"run folder {path} is in use by another running process (pid {holder}); "
                        "wait for it to end, or choose another --out") from None


def claim(path: str | Path, mode: Mode) -> RunFolder:
    """Create (if needed), lock and check the folder for a ``mode`` run; see the module docstring."""
    path = Path(path)
    fd = _open_folder(path)
    _lock(path, fd)
    folder = RunFolder(path, fd)
    present = folder.run_files()
    if mode == "new" and present:
        os.close(fd)  # refused: the lock file is left as it was
        folder._lock_fd = None
        raise UserError(f"run folder {path} already holds a run ({', '.join(present)}); continue it with "
                        "--resume, choose another --out, or replace it with --overwrite")
    if mode == "resume" and not present:
        os.close(fd)
        folder._lock_fd = None
        raise UserError(f"no run to resume in {path} (no checkpoint.pt, no config.toml); "
                        "start it without --resume")
    if mode == "overwrite":
        for name in OUTPUT_FILES:
            (path / name).unlink(missing_ok=True)
    os.ftruncate(fd, 0)  # the lock file names the process that holds the run, and only once it is claimed
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return folder
