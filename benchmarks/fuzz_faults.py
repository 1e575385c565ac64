"""The fault families of :mod:`benchmarks.fuzz`: a run killed by a signal, and a run on a full disk.

``signals``: a real ``python -m nnqs`` process (vmc or lm train, small) gets SIGINT, SIGTERM,
SIGINT twice or SIGKILL at a random moment (start-up, teacher, loop, final energy, files);
then the run is continued -- by the command its last stderr line offers, else with
``--resume`` where the folder holds a run, else from scratch -- and must finish with every
step in history.csv exactly once: ``work kept``; otherwise ``work lost``. A traceback
(also one from a signal while the modules still load), or no exit within a minute of the
signal, is a ``bug``.

``disk full``: the run folder lies on a tmpfs of a few pages (``mount -t tmpfs -o size=...``),
or of a few inodes (``nr_inodes=...``), so the disk fills at a different write for each size.
A run that fits must be sound (``ran``); one that does not must say so in one line and exit 1,
leave no temporary file and a loadable checkpoint if it wrote one, and finish with ``--resume``
once the tmpfs has grown (``refused``); anything else is a ``bug``. The family is skipped, with
the reason, where ``mount`` fails (not root).
"""
from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from benchmarks.fuzz_checks import LM_TINY, VMC_TINY, Templates, lm_problem, vmc_problem
from benchmarks.fuzz_folders import mount_tmpfs, umount
from benchmarks.fuzz_run import Case, Verdict, classify, error_lines, run_forked

SIGNAL_RUNS = {
    "vmc": ["vmc", "H2", *VMC_TINY, "--pretrain-steps", "30", "--steps", "40", "--checkpoint-every", "4",
            "--out", "run"],
    "lm": ["lm", "train", *LM_TINY, "--steps", "600", "--eval-every", "20", "--checkpoint-every", "60",
           "--train-size", "200", "--out", "run"],
}
DISK_RUNS = {
    "vmc": ["vmc", "H2", *VMC_TINY, "--steps", "8", "--checkpoint-every", "3", "--out", "mnt/run"],
    "lm": ["lm", "train", *LM_TINY, "--steps", "9", "--train-size", "40", "--out", "mnt/run"],
}
SIGNALS = [("SIGINT", 35), ("SIGTERM", 30), ("SIGKILL", 25), ("SIGINT twice", 10)]
TRACEBACK = "Traceback (most recent call last)"


def _problem(kind: str, folder: Path) -> str | None:
    return (vmc_problem if kind == "vmc" else lm_problem)(folder)


def _signalled(argv: list[str], cwd: Path, what: str | None, delay: float) -> tuple[int | None, str, float]:
    """(exit code, stderr, seconds) of ``python -m nnqs argv`` sent ``what`` after ``delay`` seconds."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.monotonic()
    with open(cwd / "stderr.txt", "w+b") as err:
        proc = subprocess.Popen([sys.executable, "-m", "nnqs", *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=err,
                                env=env)
        try:
            while what and proc.poll() is None and time.monotonic() - start < delay:
                time.sleep(0.005)
            if what and proc.poll() is None:
                sig = signal.SIGKILL if what == "SIGKILL" else signal.SIGTERM if what == "SIGTERM" else signal.SIGINT
                proc.send_signal(sig)
                if what == "SIGINT twice":
                    time.sleep(0.1)
                    proc.poll() is None and proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=60 if what else 300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        err.seek(0)
        return rc, err.read().decode("utf-8", "backslashreplace"), time.monotonic() - start


def _continuation(argv: list[str], stderr: str, folder: Path) -> list[str]:
    """What a user runs next: the command the message offers, else --resume where a run is, else the same."""
    lines = error_lines(stderr)
    offered = re.search(r"(?:continue|run again|start again from step 0) with: (nnqs .*)$", lines[-1] if lines else "")
    if offered:
        return shlex.split(offered.group(1))[1:]
    if any((folder / name).exists() for name in ("config.toml", "checkpoint.pt", "history.csv")):
        return [*argv, "--resume"]
    return argv


def _signal_case(case: Case, kind: str, what: str | None, delay: float) -> Verdict:
    argv = SIGNAL_RUNS[kind]
    rc, stderr, seconds = _signalled(argv, case.cwd, what, delay)
    extra = {"first_rc": rc, "first_line": (error_lines(stderr) or [""])[-1][:300], "first_seconds": round(seconds, 2)}
    if rc is None:
        return Verdict("bug", f"no exit within 60 s of {what}", None, extra["first_line"], round(seconds, 2), extra)
    if TRACEBACK in stderr:
        line = [ln for ln in stderr.splitlines() if ln and not ln.startswith(" ")][-1]
        return Verdict("bug", f"traceback after {what}", rc, line[:300], round(seconds, 2), extra)
    again = _continuation(argv, stderr, case.cwd / "run") if rc != 0 else None
    extra["continued_with"] = again
    if again is not None:
        result = run_forked(again, case.cwd, timeout=180)
        verdict = classify(result)
        if verdict.outcome == "bug" or result.rc != 0:
            outcome = "bug" if verdict.outcome == "bug" else "work lost"
            return Verdict(outcome, f"the continued run: {verdict.why or verdict.line}", result.rc, verdict.line,
                           round(seconds + result.seconds, 2), extra)
        seconds += result.seconds
    problem = _problem(kind, case.cwd / "run")
    outcome = "work lost" if problem else "work kept"
    return Verdict(outcome, problem or "", rc, extra["first_line"], round(seconds, 2), extra)


def signals(rng: random.Random, n: int, work: Path, t: Templates) -> Iterator[Case]:
    """Real processes signalled at random moments, then continued; the first of each kind is not signalled
    and times the run (a signal lands anywhere in 0.2 s .. 1.05 x that)."""
    full: dict[str, float] = {}
    for i in range(n):
        cwd = work / f"signals-{i:04d}"
        cwd.mkdir(parents=True)
        kind = rng.choices(["vmc", "lm"], [60, 40])[0]
        what = rng.choices([s for s, _ in SIGNALS], [w for _, w in SIGNALS])[0] if kind in full else None
        delay = rng.uniform(0.2, 1.05 * full[kind]) if kind in full else 0.0

        def run(case: Case, kind=kind, what=what, delay=delay) -> Verdict:
            verdict = _signal_case(case, kind, what, delay)
            if what is None:
                full[kind] = verdict.extra["first_seconds"]
            return verdict

        label = f"{kind}: {what} at {delay:.2f} s" if what else f"{kind}: no signal (times the run)"
        yield Case("signals", label, ["python", "-m", "nnqs", *SIGNAL_RUNS[kind]], cwd, runner=run)


def _disk_case(case: Case, kind: str, mount: Path) -> Verdict:
    argv, folder = DISK_RUNS[kind], case.cwd / "mnt" / "run"
    result = run_forked(argv, case.cwd, timeout=120)
    if result.rc == 0:
        problem = _problem(kind, folder)
        return Verdict("bug" if problem else "ran", problem or "", 0, "", round(result.seconds, 2))
    verdict = classify(result, codes=(1,))
    if verdict.outcome != "refused":
        return verdict
    if "no space left on device" not in verdict.line:
        verdict.outcome, verdict.why = "bug", "a full disk reported as something else"
        return verdict
    left = sorted(p.name for p in folder.glob(".*.tmp")) if folder.is_dir() else []
    if left:
        verdict.outcome, verdict.why = "bug", f"temporary files left: {left}"
        return verdict
    if (folder / "checkpoint.pt").exists():
        from nnqs.common.checkpoint import load_checkpoint

        try:
            verdict.extra["checkpoint_step"] = load_checkpoint(folder, "vmc" if kind == "vmc" else "lm")["step"]
        except Exception as exc:  # noqa: BLE001 - any failure to load is the lost checkpoint
            verdict.outcome, verdict.why = "bug", f"checkpoint lost: {str(exc)[:200]}"
            return verdict
    grown = subprocess.run(["mount", "-o", "remount,size=64m,nr_inodes=100000", str(mount)], capture_output=True,
                           timeout=30)
    if grown.returncode != 0:
        verdict.why = "the tmpfs could not be grown: not continued"
        return verdict
    again = [*argv, "--resume"] if (folder / "config.toml").exists() else argv
    result = run_forked(again, case.cwd, timeout=120)
    problem = f"the continued run exited {result.rc}: {(error_lines(result.stderr) or [''])[-1][:200]}" \
        if result.rc != 0 else _problem(kind, folder)
    if problem:
        verdict.outcome, verdict.why = "bug", f"after space was freed: {problem}"
    return verdict


def disk_full(rng: random.Random, n: int, work: Path, t: Templates) -> Iterator[Case]:
    """Runs on a tmpfs of random size (a few pages up to a little more than the run's files) or inode count."""
    probe = work / "disk-probe"
    failed = mount_tmpfs(probe, "size=16k")
    if failed:
        raise FamilySkipped(f"mount -t tmpfs failed: {failed}")
    umount(probe)
    pages = {kind: 2 + sum(-(-p.stat().st_size // 4096) for p in getattr(t, kind).iterdir() if p.is_file())
             for kind in ("vmc", "lm")}
    for i in range(n):
        cwd = work / f"disk-{i:04d}"
        cwd.mkdir(parents=True)
        kind = rng.choice(["vmc", "lm"])
        if rng.random() < 0.6:  # full at a write of the run's largest files (an atomic write holds old and new)
            kib = 4 * rng.randint(1, int(1.6 * pages[kind]) + 4)
            options, label = f"size={kib}k", f"{kib} KiB"
        else:  # out of inodes: full at the creation of the n-th file, whatever its size
            inodes = rng.randint(2, 24)
            options, label = f"size=64m,nr_inodes={inodes}", f"{inodes} inodes"

        def run(case: Case, kind=kind, options=options) -> Verdict:
            failed = mount_tmpfs(case.cwd / "mnt", options)
            if failed:
                return Verdict("bug", f"mount failed mid-round: {failed}")
            try:
                return _disk_case(case, kind, case.cwd / "mnt")
            finally:
                umount(case.cwd / "mnt")

        yield Case("disk full", f"{kind} on a tmpfs of {label}", DISK_RUNS[kind], cwd, runner=run)


class FamilySkipped(Exception):
    """A family that cannot run on this machine; its message says why."""
