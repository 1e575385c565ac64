"""Errors the CLI turns into one line on stderr.

* :class:`UserError` (an :class:`~hamiltonians.errors.InputError`): bad input -- an option,
  config file, checkpoint or LM input -- exit 2.
* :class:`EnvironmentFailure`: the machine failed the run (disk full, quota) -- exit 1.
  Whatever was written before (checkpoints included) is intact.
"""
from __future__ import annotations

import errno

from hamiltonians.errors import InputError

DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class UserError(InputError):
    """A bad run option, config file, checkpoint or LM input, explained in one line."""


class EnvironmentFailure(Exception):
    """The environment failed the run (not the user's input): one line, exit 1."""


def disk_full(exc: BaseException) -> bool:
    """True for an ``OSError`` that means no space or quota left (ENOSPC, EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full_error(path: object, exc: OSError) -> EnvironmentFailure:
    """The one-line failure for a write to ``path`` that found the disk (or quota) full."""
    what = "no space left on device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
    return EnvironmentFailure(f"{what} while writing {path}; free some space and continue with --resume "
                              "(files written before, checkpoint included, are intact)")


__all__ = ["EnvironmentFailure", "InputError", "UserError", "disk_full", "disk_full_error"]
