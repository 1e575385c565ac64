"""Shared by the fault-injection tests: run the CLI in a forked process and signal it mid-run."""
import os
import time
from pathlib import Path

from nnqs.cli import main


def rows_in(path: Path) -> int:
    """Rows of a CSV file after its header (0 if it does not exist yet)."""
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def fork_cli(args: list[str]) -> int:
    """Run ``nnqs args`` in a forked child process (a real process, no interpreter start-up;
    output discarded); return its pid."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 99
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = main(args)
        finally:
            os._exit(code)
    return pid


def exit_code(pid: int) -> int:
    """Wait for ``pid``; its exit code (minus the signal number if a signal ended it)."""
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def signal_after_rows(pid: int, hist: Path, rows: int, signum: int, timeout: float = 60.0) -> int:
    """Send ``signum`` to ``pid`` once ``hist`` has at least ``rows`` rows; its exit code."""
    deadline = time.monotonic() + timeout
    while rows_in(hist) < rows:
        done, status = os.waitpid(pid, os.WNOHANG)
        assert done == 0, f"the run ended (status {status}) before it could be signalled"
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.001)
    os.kill(pid, signum)
    return exit_code(pid)
