"""Shared by the fuzz tests: run ``nnqs.cli.main`` and check its contract for bad input.

The contract: a command either succeeds (0) or exits 2 with exactly one line on
stderr, ``nnqs...: error: ...``; any other exception is a bug. Expensive work
behind a successful parse is replaced by :class:`Reached` in the tests that
fuzz the parsers, and counts as success.
"""
import io
from contextlib import redirect_stderr, redirect_stdout

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from nnqs.cli import main

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# printable-or-not text without lone surrogates (a real command line cannot carry those)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)


class Reached(Exception):
    """Raised by a stub standing in for the expensive work after the parsers accepted the input."""


def stub(*args, **kwargs):
    raise Reached


def run_cli(argv: list[str]) -> tuple[int, list[str]]:
    """(exit code, stderr lines) of ``nnqs argv``; asserts the one-line-error contract."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except Reached:
            code = 0
    lines = err.getvalue().strip().splitlines()
    assert code in (0, 2), (argv, code, lines)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("nnqs") and ": error: " in lines[0], (argv, lines)
    return code, lines
