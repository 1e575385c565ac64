"""Errors a user can cause; the CLI turns them into one line on stderr and exit 2."""
from hamiltonians.errors import InputError


class UserError(InputError):
    """A bad run option, config file, checkpoint or LM input, explained in one line."""


__all__ = ["InputError", "UserError"]
