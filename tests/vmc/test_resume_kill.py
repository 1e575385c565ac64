"""Crash safety of `nnqs vmc`: a run killed with SIGKILL mid-way and resumed with --resume
reproduces the uninterrupted run's history exactly (same seed, one thread)."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from nnqs.common.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
TIMING = {"t_sample", "t_local", "t_grad"}
STEPS = 40


def vmc_command(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nnqs", "vmc", "H2", "--basis", "6-31g", "--steps", str(STEPS), "--checkpoint-every", "5",
            "--threads", "1", "--d-model", "16", "--n-layers", "1", "--final-samples", "10000",
            "--no-exact", "--out", str(out), *extra]


def env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def history(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(fh)]


def n_rows(path: Path) -> int:
    try:
        return max(0, len(path.read_bytes().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def kill_after_rows(cmd: list[str], hist: Path, rows: int, timeout: float = 120.0) -> int:
    """Start ``cmd``, SIGKILL it once ``hist`` has more than ``rows`` rows; return the rows then."""
    proc = subprocess.Popen(cmd, env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    try:
        while n_rows(hist) <= rows:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return n_rows(hist)


def test_sigkill_then_resume_reproduces_the_uninterrupted_history(tmp_path):
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    reference = subprocess.Popen(vmc_command(full), env=env(), cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    logged = kill_after_rows(vmc_command(crashed), crashed / "history.csv", 12)
    assert 12 < logged < STEPS
    ckpt_step = int(load_checkpoint(crashed / "checkpoint.pt", "vmc")["step"])
    assert ckpt_step % 5 == 0 and 10 <= ckpt_step <= logged  # at most the steps since the checkpoint are lost
    resumed = subprocess.run(vmc_command(crashed, "--resume"), env=env(), cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    _, err = reference.communicate(timeout=240)
    assert reference.returncode == 0, err
    expected, got = history(full / "history.csv"), history(crashed / "history.csv")
    assert [int(r["step"]) for r in got] == list(range(STEPS))
    assert got == expected
