"""Running one fuzz case and naming its outcome (used by :mod:`benchmarks.fuzz`).

A case runs ``nnqs.cli.main(argv)`` in a forked child (the imports are already done, so a
case costs what the command does, not an interpreter start), with a wall-clock limit and
an address-space limit, its stdout and stderr in files. With ``stub`` the expensive work
after the parsers (the VMC run, the LM training, the exact references) is replaced by a
stand-in that checks the config it is handed and stops: reaching it counts as exit 0.

The child's stdout is UTF-8 with ``errors="strict"`` and its stderr ``backslashreplace``, as
Python sets them in an ``en_US.UTF-8`` locale (in ``C.UTF-8`` stdout is ``surrogateescape``).

Outcomes: ``ran`` (exit 0 and sound output), ``refused`` (exit 1 or 2, one line
``nnqs...: error: <what>`` on stderr besides the run's ``nnqs: note:`` and ``nnqs: warning:``
lines, no traceback) and ``bug`` (anything else: a traceback, several lines of error, a
crash, a hang past the limit, exit 0 with unsound output).
"""
from __future__ import annotations

import io
import math
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

OUTCOMES = ("ran", "refused", "work kept", "work lost", "bug")
MEMORY_LIMIT = 6 * 2**30  # address space of a case beyond what the parent holds
ERROR_LINE = re.compile(r"^nnqs(?: [\w-]+)*: error: (?P<what>.{8,})$")
Check = Callable[[str], "str | None"]  # stdout of a run that exited 0 -> what is unsound, or None


@dataclass
class Case:
    """One hostile input: ``argv`` for ``nnqs``, run in ``cwd``; ``check`` judges a run that exited 0;
    ``after`` undoes the set-up (a lock held, a mount) once the case ran."""

    family: str
    label: str
    argv: list[str]
    cwd: Path
    stub: bool = False
    check: Check | None = None
    timeout: float = 60.0
    after: Callable[[], None] | None = None
    env: dict[str, str] | None = None  # environment variables set in the child
    runner: Callable[["Case"], "Verdict"] | None = None  # a case of several steps runs itself


@dataclass
class Result:
    """What the child did: exit code (None when killed at the time limit), output, seconds."""

    rc: int | None
    stdout: str
    stderr: str
    seconds: float


@dataclass
class Verdict:
    outcome: str
    why: str = ""
    rc: int | None = None
    line: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


class Reached(Exception):
    """Raised by a stub in place of the expensive work: the input was accepted."""


def _stub_vmc(spec, cfg, out, **kwargs):
    import torch

    torch.device(cfg.device)
    assert cfg.d_model % cfg.n_heads == 0 and cfg.checkpoint_every >= 1 and 0 <= cfg.threads <= 1024, cfg
    assert out.path.is_dir(), out.path
    assert all(math.isfinite(getattr(cfg, k)) for k in ("lr", "sr_shift", "grad_clip", "pretrain_lr")), cfg
    raise Reached


def _stub_lm(cfg, folder, **kwargs):
    assert 0 <= cfg.threads <= 1024 and cfg.checkpoint_every >= 1 and cfg.d_model % cfg.n_heads == 0, cfg
    assert math.isfinite(cfg.lr) and math.isfinite(cfg.dropout) and folder.path.is_dir(), cfg
    raise Reached


def _stub_exact(spec, **kwargs):
    raise Reached


def install_stubs() -> None:
    """Replace the expensive work of ``vmc``, ``lm train`` and ``exact`` (in the child only)."""
    import nnqs.cli.exact
    import nnqs.lm.run
    import nnqs.vmc.run

    nnqs.vmc.run.run_molecule = _stub_vmc
    nnqs.lm.run.train_in_folder = _stub_lm
    nnqs.cli.exact.exact_references = _stub_exact


def preload() -> None:
    """Import what the commands import, once, so that every forked case starts warm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import pyscf.cc  # noqa: F401
    import pyscf.fci  # noqa: F401
    import torch

    import nnqs.cli  # noqa: F401
    import nnqs.lm.checkpoint  # noqa: F401
    import nnqs.lm.run  # noqa: F401
    import nnqs.vmc.run  # noqa: F401

    torch.set_num_threads(1)


def _child(argv: list[str], stub: bool, cwd: Path, env: dict | None, out_fd: int, err_fd: int) -> None:
    """The forked child: run the command, never return."""
    code = 70
    try:
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.update(env or {})
        used = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (used + MEMORY_LIMIT, used + MEMORY_LIMIT))
        if stub:
            install_stubs()
        from nnqs.cli import main

        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except Reached:
            code = 0
    except BaseException:  # what the Python interpreter would print: a traceback, exit 1
        code = 1
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(int(code) & 0xFF)


def _tail(fh, limit: int = 1 << 22) -> str:
    fh.seek(0, os.SEEK_END)
    fh.seek(max(0, fh.tell() - limit))
    return fh.read().decode("utf-8", "backslashreplace")


def run_forked(argv: list[str], cwd: Path, *, stub: bool = False, timeout: float = 60.0,
               env: dict[str, str] | None = None) -> Result:
    """``nnqs argv`` in a forked child (in ``cwd``, with ``env`` added) within ``timeout`` seconds
    (then SIGKILL: rc None)."""
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(argv, stub, cwd, env, out.fileno(), err.fileno())
        rc = wait_for(pid, start + timeout)
        return Result(rc, _tail(out), _tail(err), time.monotonic() - start)


def wait_for(pid: int, deadline: float) -> int | None:
    """Exit code of child ``pid`` (negative: the signal that ended it), or None: killed at ``deadline``."""
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(0.02, delay * 2)


def error_lines(stderr: str) -> list[str]:
    """The stderr lines that are not a run's notes, warnings (a rolled-back step) or progress (tqdm
    redraws its line with carriage returns)."""
    lines = []
    for raw in stderr.splitlines():
        line = raw.strip()
        if line and not line.startswith(("nnqs: note:", "nnqs: warning:")) and "\r" not in raw:
            lines.append(line)
    return lines


def classify(result: Result, check: Check | None = None, codes: tuple[int, ...] = (1, 2)) -> Verdict:
    """The outcome of ``result`` by the rules of the module docstring."""
    lines = error_lines(result.stderr)
    last = lines[-1] if lines else ""
    verdict = Verdict("bug", rc=result.rc, line=last[:300], seconds=round(result.seconds, 3))
    if result.rc is None:
        verdict.why = f"no answer within {result.seconds:.0f} s"
    elif result.rc < 0:
        verdict.why = f"killed by {signal.Signals(-result.rc).name}"
    elif "Traceback (most recent call last)" in result.stderr:
        found = [ln for ln in result.stderr.splitlines() if ln and not ln.startswith(" ")]
        verdict.why, verdict.line = "traceback", (found[-1] if found else last)[:300]
    elif result.rc == 0:
        problem = check(result.stdout) if check else None
        verdict.outcome, verdict.why = ("bug", f"exit 0 but {problem}") if problem else ("ran", "")
    elif result.rc not in codes:
        verdict.why = f"exit code {result.rc}"
    elif len(lines) != 1 or not ERROR_LINE.match(last):
        verdict.why = f"{len(lines)} lines on stderr" if len(lines) != 1 else "not an 'nnqs: error: ...' line"
    else:
        verdict.outcome = "refused"
    return verdict


def run_case(case: Case) -> Verdict:
    """Run ``case`` (forked, or by its own ``runner``) and classify it."""
    try:
        if case.runner is not None:
            return case.runner(case)
        result = run_forked(case.argv, case.cwd, stub=case.stub, timeout=case.timeout, env=case.env)
    finally:
        if case.after is not None:
            case.after()
    try:
        return classify(result, case.check)
    except Exception as exc:  # a check that itself failed on garbage output
        return Verdict("bug", f"exit 0 but its output breaks the check ({type(exc).__name__}: {exc})"[:300],
                       result.rc, "", round(result.seconds, 3))
