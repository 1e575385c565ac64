"""`nnqs lm train --resume`: a crashed or killed run continues exactly (saved generator state and
batch position, no replay), history without duplicates; settings that cannot change are refused."""
import csv
import signal
from pathlib import Path

import pytest
import torch

import nnqs.lm.train
from nnqs.common.checkpoint import load_checkpoint
from nnqs.cli import main

TINY = ["--steps", "30", "--eval-every", "10", "--checkpoint-every", "10", "--d-model", "16", "--n-layers", "1", "--batch-size", "32",
        "--train-size", "200", "--val-size", "50", "--no-progress", "--threads", "1"]


def history(out: Path) -> list[dict]:
    with open(out / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in csv.DictReader(fh)]


def final_model(out: Path) -> dict:
    return load_checkpoint(out / "checkpoint.pt", "lm")["model"]


class Crash(Exception):
    pass



def assert_same_run(resumed, full) -> None:
    """The resumed run's history and final weights equal the uninterrupted run's."""
    assert history(resumed) == history(full)
    a, b = final_model(full), final_model(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)

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
    assert_same_run(crashed, full)


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
    from fault_support import fork_cli, signal_after_rows

    full, crashed = tmp_path / "full", tmp_path / "crashed"
    assert main(["lm", "train", *TINY, "--out", str(full)]) == 0
    pid = fork_cli(["lm", "train", *TINY, "--out", str(crashed)])
    assert signal_after_rows(pid, crashed / "history.csv", 1, signal.SIGKILL) == -signal.SIGKILL
    ckpt = crashed / "checkpoint.pt"  # killed after the row of step 10, maybe before its checkpoint
    assert (int(load_checkpoint(ckpt, "lm")["step"]) if ckpt.exists() else 0) in (0, 10, 20)
    assert main(["lm", "train", *TINY, "--out", str(crashed), "--resume"]) == 0
    assert [int(r["step"]) for r in history(crashed)] == [10, 20, 30]
    assert history(crashed) == history(full)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_checkpoints_at_the_step_and_resume_equals_the_uninterrupted_run(tmp_path, signum, code):
    from fault_support import fork_cli, signal_after_rows

    args = [*TINY, "--eval-every", "1", "--checkpoint-every", "1000"]  # a history row per step; no checkpoint by count
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    assert main(["lm", "train", *args, "--out", str(full)]) == 0
    assert signal_after_rows(fork_cli(["lm", "train", *args, "--out", str(stopped)]), stopped / "history.csv", 5,
                             signum) == code
    step = int(load_checkpoint(stopped / "checkpoint.pt", "lm")["step"])
    assert 5 <= step < 30 and [int(r["step"]) for r in history(stopped)] == list(range(1, step + 1))
    assert main(["lm", "train", *args, "--out", str(stopped), "--resume"]) == 0
    assert_same_run(stopped, full)


@pytest.mark.parametrize("at_step", [7, 29])
def test_a_signal_between_validations_waits_for_a_checkpoint(tmp_path, monkeypatch, at_step):
    """With a validation every step the loop runs in one-step segments; a signal that lands
    between two of them (here: while the stop rule is checked) is deferred like one inside a
    step: checkpoint at that step, exit 130, and the resumed run equals the uninterrupted one.
    (It used to raise at once, before any checkpoint: the run's steps were lost.)"""
    import os

    args = [*TINY, "--eval-every", "1", "--checkpoint-every", "1000"]
    full, stopped = tmp_path / "full", tmp_path / "stopped"
    assert main(["lm", "train", *args, "--out", str(full)]) == 0
    real = nnqs.lm.train.TrainRun.reached_target

    def signal_in_the_gap(run):
        if run.step == at_step:
            os.kill(os.getpid(), signal.SIGINT)
        return real(run)

    monkeypatch.setattr(nnqs.lm.train.TrainRun, "reached_target", signal_in_the_gap)
    assert main(["lm", "train", *args, "--out", str(stopped)]) == 130
    monkeypatch.setattr(nnqs.lm.train.TrainRun, "reached_target", real)
    assert int(load_checkpoint(stopped / "checkpoint.pt", "lm")["step"]) == at_step
    assert main(["lm", "train", *args, "--out", str(stopped), "--resume"]) == 0
    assert_same_run(stopped, full)


def test_resume_is_honest_about_what_changes(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["lm", "train", *TINY, "--steps", "10", "--out", str(out)]) == 0
    config = (out / "config.toml").read_text()
    capsys.readouterr()
    assert main(["lm", "train", *TINY, "--lr", "0.01", "--out", str(out), "--resume"]) == 2
    assert "--resume cannot change --lr (run: 0.003, given: 0.01)" in capsys.readouterr().err
    assert main(["lm", "train", *TINY, "--steps", "5", "--out", str(out), "--resume"]) == 2
    assert "--steps 5 is below the 10 steps the run" in capsys.readouterr().err
    assert (out / "config.toml").read_text() == config  # refused: nothing recorded
    assert main(["lm", "train", *TINY, "--steps", "20", "--checkpoint-seconds", "5", "--out", str(out),
                 "--resume"]) == 0
    assert "(changed: checkpoint_seconds 60.0 -> 5.0, steps 10 -> 20)" in capsys.readouterr().err
    config = (out / "config.toml").read_text()
    assert "steps = 20\n" in config and "checkpoint_seconds = 5.0\n" in config
    assert [int(r["step"]) for r in history(out)] == [10, 20]
    assert main(["lm", "train", "--out", str(out), "--resume", "--no-progress"]) == 0  # the run's own settings
    assert load_checkpoint(out, "lm")["step"] == 20


def test_a_run_moved_from_a_gpu_resumes_on_the_cpu_as_if_unmoved(tmp_path, capsys):
    """``device`` may change on --resume (a run started on a GPU machine, continued on a CPU one;
    here a CPU checkpoint relabelled 'cuda'): the batches and masks come from a CPU generator on
    every device, so the moved run's history and weights equal the uninterrupted run's."""
    from nnqs.common.checkpoint import save_checkpoint

    full, moved = tmp_path / "full", tmp_path / "moved"
    assert main(["lm", "train", *TINY, "--out", str(full)]) == 0
    assert main(["lm", "train", *TINY, "--steps", "10", "--out", str(moved)]) == 0
    data = load_checkpoint(moved / "checkpoint.pt", "lm")
    data["config"]["device"] = "cuda"
    save_checkpoint(moved / "checkpoint.pt", "lm", data)
    config = moved / "config.toml"
    config.write_text(config.read_text().replace('device = "cpu"', 'device = "cuda"'))
    capsys.readouterr()
    assert main(["lm", "train", *TINY, "--device", "cpu", "--out", str(moved), "--resume"]) == 0
    assert "device cuda -> cpu" in capsys.readouterr().err
    assert 'device = "cpu"' in config.read_text()
    assert_same_run(moved, full)

