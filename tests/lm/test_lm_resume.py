"""`nnqs lm train --resume`: a crashed or killed run continues exactly (saved generator state and
batch position, no replay), history without duplicates; settings that cannot change are refused."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import nnqs.lm.train
from nnqs.common.checkpoint import load_checkpoint
from nnqs.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--steps", "30", "--eval-every", "10", "--checkpoint-every", "10", "--d-model", "16", "--n-layers", "1", "--batch-size", "32",
        "--train-size", "200", "--val-size", "50", "--no-progress", "--threads", "1"]


def history(out: Path) -> list[dict]:
    with open(out / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in csv.DictReader(fh)]


def final_model(out: Path) -> dict:
    return load_checkpoint(out / "checkpoint.pt", "lm")["model"]


class Crash(Exception):
    pass


def test_crash_after_a_checkpoint_then_resume_equals_the_uninterrupted_run(tmp_path, monkeypatch):
    full, crashed = tmp_path / "full", tmp_path / "crashed"
    assert main(["lm", "train", *TINY, "--out", str(full)]) == 0
    real_step = nnqs.lm.train.lm_step

    def crashing_step(run):
        if run.step == 15:
            raise Crash  # dies between checkpoints (the last one is at step 10)
        return real_step(run)

    monkeypatch.setattr(nnqs.lm.train, "lm_step", crashing_step)
    with pytest.raises(Crash):
        main(["lm", "train", *TINY, "--out", str(crashed)])
    monkeypatch.setattr(nnqs.lm.train, "lm_step", real_step)
    assert load_checkpoint(crashed / "checkpoint.pt", "lm")["step"] == 10
    assert [int(r["step"]) for r in history(crashed)] == [10]
    assert main(["lm", "train", *TINY, "--out", str(crashed), "--resume"]) == 0
    assert history(crashed) == history(full)
    a, b = final_model(full), final_model(crashed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_refuses_other_settings_or_a_missing_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["lm", "train", *TINY, "--steps", "10", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["lm", "train", *TINY, "--seed", "3", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed (run: 0, given: 3)" in err[0]
    assert main(["lm", "train", *TINY, "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_sigkill_then_resume_reproduces_the_uninterrupted_history(tmp_path):
    args = ["--steps", "60", "--eval-every", "10", "--checkpoint-every", "10", "--d-model", "32", "--n-layers", "1", "--batch-size", "128",
            "--train-size", "400", "--val-size", "50", "--no-progress", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}

    def cmd(out, *extra):
        return [sys.executable, "-m", "nnqs", "lm", "train", *args, "--out", str(out), *extra]

    full, crashed = tmp_path / "full", tmp_path / "crashed"
    proc = subprocess.Popen(cmd(crashed), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while not ((crashed / "history.csv").exists() and len(history(crashed)) >= 2):
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert int(load_checkpoint(crashed / "checkpoint.pt", "lm")["step"]) in (10, 20)
    for out, extra in ((crashed, ["--resume"]), (full, [])):
        done = subprocess.run(cmd(out, *extra), env=env, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert [int(r["step"]) for r in history(crashed)] == list(range(10, 70, 10))
    assert history(crashed) == history(full)
