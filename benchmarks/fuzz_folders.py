"""The ``folders`` family of :mod:`benchmarks.fuzz`: hostile places for ``--out`` (a file, /proc,
a read-only folder, odd names, symlinks), a folder whose lock another live process holds or a
dead one left, a finished run started again, ``--resume`` where there is nothing to resume.

As root, permission bits do not stop a write (``chmod 555`` is bypassed); a read-only tmpfs
mount does, where ``mount`` works.
"""
from __future__ import annotations

import fcntl
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

from benchmarks.fuzz_checks import LM_TINY, QUESTION, VMC_TINY, Templates, output_problem
from benchmarks.fuzz_run import Case

ODD_NAMES = ["with space", "new\nline", "\u00fcber \U0001f600", "\udcff\udcfe", "-dash", "x" * 300,
             "/".join(["d"] * 150), "~", "$HOME", "..", ".", "", "a/./b/../c", "run/", "run\\", "*", "?", ":", "\t",
             " run ", "\x1b[31mred", "a" * 255, "nul\u2400", "run.toml"]


def mount_tmpfs(path: Path, options: str) -> str | None:
    """Mount a tmpfs at ``path`` with ``options``; None, or why it failed."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True, timeout=30)


def _file(rng: random.Random, cwd: Path) -> tuple:
    (cwd / "f").write_text("a file\n")
    return "--out is a file", "f", [], None


def _under_file(rng: random.Random, cwd: Path) -> tuple:
    (cwd / "f").write_text("a file\n")
    return "--out under a file", "f/run", [], None


def _proc(rng: random.Random, cwd: Path) -> tuple:
    out = rng.choice(["/proc/nnqs-fuzz/run", "/proc/self/nnqs-fuzz", "/sys/nnqs-fuzz/run",
                                          "/proc/1/nnqs-fuzz"])
    return f"--out {out}", out, [], None


def _chmod(rng: random.Random, cwd: Path) -> tuple:
    (cwd / "ro").mkdir()
    os.chmod(cwd / "ro", 0o555)
    root = " (root: the bits are bypassed)" if os.geteuid() == 0 else ""
    return f"--out in a chmod 555 folder{root}", "ro/run", [], lambda: os.chmod(cwd / "ro", 0o755)


def _read_only_mount(rng: random.Random, cwd: Path) -> tuple:
    failed = mount_tmpfs(cwd / "mnt", "ro,size=64k")
    if failed:
        label, out, mode, undo = _chmod(rng, cwd)
        return f"{label} (read-only tmpfs unavailable: {failed[:60]})", out, mode, undo
    return "--out in a read-only tmpfs", "mnt/run", [], lambda: umount(cwd / "mnt")


def _odd(rng: random.Random, cwd: Path) -> tuple:
    name = rng.choice(ODD_NAMES)
    return f"--out {name[:40]!r}", name, [], None


def _live_lock(rng: random.Random, cwd: Path) -> tuple:
    (cwd / "run").mkdir()
    fd = os.open(cwd / "run" / ".nnqs.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return "run folder locked by a live process", "run", [], lambda: os.close(fd)


def _lock_file(rng: random.Random, cwd: Path) -> tuple:
    (cwd / "run").mkdir()
    draw = rng.choice(["dead pid", "garbage", "folder", "read-only"])
    lock = cwd / "run" / ".nnqs.lock"
    if draw == "folder":
        lock.mkdir()
    else:
        lock.write_bytes(b"\xff\x00garbage" if draw == "garbage" else f"{_dead_pid()}\n".encode())
        os.chmod(lock, 0o444 if draw == "read-only" else 0o644)
    return f"lock file: {draw}", "run", [], None


def _dead_pid() -> int:
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def _empty_resume(rng: random.Random, cwd: Path) -> tuple:
    draw = rng.choice(["empty folder", "missing folder", "junk only"])
    if draw != "missing folder":
        (cwd / "run").mkdir()
    if draw == "junk only":
        (cwd / "run" / "notes.txt").write_text("x")
        (cwd / "run" / "result.json").write_text("{}")
    return f"--resume on a {draw}", "run", ["--resume"], None


def _links(rng: random.Random, cwd: Path) -> tuple:
    draw = rng.choice(["to a folder", "dangling", "loop", "to a file"])
    target = {"to a folder": "real", "dangling": "nowhere", "loop": "run", "to a file": "f"}[draw]
    (cwd / "real").mkdir()
    (cwd / "f").write_text("x")
    os.symlink(target, cwd / "run")
    return f"--out a symlink {draw}", "run", [], None


PLACES = [(8, _file), (4, _under_file), (8, _proc), (5, _chmod), (6, _read_only_mount), (22, _odd), (8, _live_lock),
          (6, _lock_file), (8, _empty_resume), (6, _links)]
# A finished run (template) started again by a command, with these mode flags.
RUNS = [(3, "vmc", [], "vmc"), (2, "vmc", ["--overwrite"], "vmc"), (2, "vmc", ["--resume"], "vmc"),
        (2, "vmc", [], "lm"), (2, "vmc", ["--resume"], "lm"), (1, "vmc", ["--resume", "--steps", "2"], "vmc"),
        (1, "vmc", ["--resume", "--steps", "5"], "vmc"), (1, "vmc", ["--resume", "--d-model", "16"], "vmc"),
        (1, "vmc", ["--resume", "--max-batch", "1", "--threads", "2"], "vmc"),
        (1, "vmc", ["--resume", "--seed", "1"], "vmc"),
        (2, "lm train", [], "lm"), (2, "lm train", ["--resume"], "lm"), (2, "lm train", ["--overwrite"], "lm"),
        (2, "lm train", ["--resume"], "vmc"), (1, "lm train", ["--resume", "--steps", "3"], "lm"),
        (1, "lm train", ["--resume", "--steps", "9"], "lm"), (1, "lm train", ["--resume", "--lr", "0.1"], "lm"),
        (1, "lm train", ["--resume", "--arch", "encoder"], "lm")]


def _argv(rng: random.Random, out: str, mode: list[str], t: Templates, command: str) -> list[str]:
    """The tiny command ``command`` writing to ``out`` (``--out=X`` where X looks like an option)."""
    out_args = [f"--out={out}"] if out.startswith("-") else ["--out", out]
    if command == "vmc":
        return ["vmc", "H2", *VMC_TINY, "--steps", "3" if "--resume" in mode else "1", "--checkpoint-every", "1",
                *out_args, *mode]
    if command == "lm train":
        return ["lm", "train", *LM_TINY, "--steps", "6", "--train-size", "40", *out_args, *mode]
    file_args = [f"--out={out}"] if out.startswith("-") else ["--out", out if rng.random() < 0.5 else f"{out}/x.out"]
    if command == "lm data":
        return ["lm", "data", "--n", "5", *file_args]
    return ["lm", "show", "--ckpt", str(t.lm), QUESTION, *file_args]


def folders(rng: random.Random, n: int, work: Path, t: Templates) -> Iterator[Case]:
    """Hostile run folders for ``vmc``, ``lm train``, ``lm data`` and ``lm show``."""
    for i in range(n):
        cwd = work / f"folders-{i:04d}" / "w"  # '..' stays in the case's folder
        cwd.mkdir(parents=True)
        finished = rng.random() < 0.25
        if finished:  # real runs: a stub would skip the reconciliation of a resumed run
            _, command, mode, template = rng.choices(RUNS, [row[0] for row in RUNS])[0]
            shutil.copytree(getattr(t, template), cwd / "run")
            label, out, undo = f"a finished {template} run started {' '.join(mode) or 'again'}", "run", None
        else:
            place = rng.choices([p for _, p in PLACES], [w for w, _ in PLACES])[0]
            label, out, mode, undo = place(rng, cwd)
            runs_only = place in (_live_lock, _lock_file, _empty_resume)
            command = rng.choice(["vmc", "lm train"] if runs_only else ["vmc", "vmc", "lm train", "lm data", "lm show"])
        stub = command == "vmc" and not finished and rng.random() < 0.6
        argv = _argv(rng, out, mode, t, command)
        check = None if stub else (lambda stdout, cwd=cwd, argv=argv: output_problem(cwd, argv, stdout))
        yield Case("folders", f"{command}: {label}", argv, cwd, stub=stub, check=check, after=undo)
