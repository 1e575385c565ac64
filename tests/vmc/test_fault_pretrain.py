"""kill -9 inside the teacher fit, before any VMC checkpoint: --resume takes up the saved teacher and
the fit where it was, and the run's history and energy equal those of an uninterrupted run."""
import csv
import json
import os
import signal
import time
from pathlib import Path

from fault_support import exit_code, fork_cli
from nnqs.cli import main
from nnqs.common.checkpoint import load_checkpoint
from nnqs.vmc.pretrain_store import FILE, KIND

WALL = {"t_sample", "t_local", "t_grad"}
FIT_STEPS = 400


def argv(out: Path, *extra: str) -> list[str]:
    return ["vmc", "H2", "--basis", "6-31g", "--steps", "6", "--d-model", "16", "--n-layers", "1",
            "--pretrain-steps", str(FIT_STEPS), "--final-samples", "10000", "--no-exact", "--threads", "1",
            "--checkpoint-every", "1000", "--checkpoint-seconds", "0.000001", "--out", str(out), *extra]


def history(out: Path) -> list[dict]:
    with open(out / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k not in WALL} for row in csv.DictReader(fh)]


def fit_step(out: Path) -> int:
    try:
        return int(load_checkpoint(out / FILE, KIND).get("fit", {}).get("step", 0))
    except Exception:  # noqa: BLE001 - not written yet
        return 0


def test_kill_9_inside_the_fit_then_resume_equals_the_uninterrupted_run(tmp_path, capsys):
    reference = tmp_path / "reference"
    assert main(argv(reference)) == 0
    out = tmp_path / "killed"
    pid = fork_cli(argv(out))
    deadline = time.monotonic() + 120
    while fit_step(out) < FIT_STEPS // 4:
        assert os.waitpid(pid, os.WNOHANG)[0] == 0, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the fit made no progress"
        time.sleep(0.001)
    os.kill(pid, signal.SIGKILL)
    assert exit_code(pid) == -signal.SIGKILL
    stopped_at = fit_step(out)
    assert 0 < stopped_at < FIT_STEPS and not (out / "checkpoint.pt").exists()
    saved = load_checkpoint(out / FILE, KIND)
    assert saved["teacher"]["configs"].shape[0] > 1  # the teacher is kept too
    capsys.readouterr()
    assert main(argv(out, "--resume")) == 0
    assert history(out) == history(reference)
    mine, theirs = (json.loads((p / "result.json").read_text()) for p in (out, reference))
    assert mine["energy"] == theirs["energy"] and mine["e_teacher_sci"] == theirs["e_teacher_sci"]


def test_a_store_of_other_settings_is_not_taken_up(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, "--steps", "1")) == 0
    (out / "checkpoint.pt").unlink()  # as if killed before the first VMC checkpoint
    (out / "history.csv").unlink()
    config = (out / "config.toml").read_text().replace("pretrain_lr = 0.002", "pretrain_lr = 0.003")
    (out / "config.toml").write_text(config)
    capsys.readouterr()
    assert main(argv(out, "--steps", "1", "--resume")) == 0
    assert "other settings; the pretraining starts afresh" in capsys.readouterr().err
