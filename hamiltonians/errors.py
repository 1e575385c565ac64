"""The one exception type for problems a user can cause (bad molecule, file, option).

The CLI catches it, prints its message as one line on stderr and exits with 2.
Internal invariants are asserts, never InputError.
"""


class InputError(ValueError):
    """A problem with what the user asked for, explained in one line."""
