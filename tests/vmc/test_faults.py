"""Fault injection on `nnqs vmc` (a tiny H2/6-31G run, one thread): kill -9 at random steps,
SIGINT and SIGTERM, a kill before the first checkpoint, two processes racing on one folder.

Every interrupted run, resumed with --resume, must give the history of the uninterrupted run
(all columns but the wall times) and the same final energy. Runs that are killed are real
processes: forked from the test process (no interpreter start-up) or, for the signal tests,
started as `python -m nnqs`.
"""
import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_support import exit_code, fork_cli, rows_in, signal_after_rows
from nnqs.cli import main
from nnqs.common.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
STEPS = 24
WALL = {"t_sample", "t_local", "t_grad"}


def argv(out: Path, *extra: str) -> list[str]:
    return ["vmc", "H2", "--basis", "6-31g", "--steps", str(STEPS), "--d-model", "16", "--n-layers", "1",
            "--pretrain-steps", "0", "--final-samples", "10000", "--no-exact", "--threads", "1",
            "--checkpoint-every", "5", "--out", str(out), *extra]


def history(out: Path) -> list[dict]:
    with open(out / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k not in WALL} for row in csv.DictReader(fh)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: its history and final energy."""
    out = tmp_path_factory.mktemp("reference") / "run"
    assert main(argv(out, "--json")) == 0
    return history(out), json.loads((out / "result.json").read_text())["energy"]


def resume_and_compare(out: Path, reference, capsys) -> str:
    """Resume the run in ``out``; assert it equals the reference; the notes it printed."""
    capsys.readouterr()
    assert main(argv(out, "--resume")) == 0
    err = capsys.readouterr().err
    rows, energy = reference
    assert history(out) == rows
    # to the last bits only where BLAS is: torch's float64 matmul on this CPU (AMD EPYC) rounds differently
    # for 4 of 7 pointer offsets of the same matrix, and a resumed process allocates differently
    assert json.loads((out / "result.json").read_text())["energy"] == pytest.approx(energy, rel=1e-13, abs=0)
    return err


def test_kill_9_at_random_steps_then_resume_equals_the_uninterrupted_run(tmp_path, reference, capsys):
    rng, trials, resumed_from = random.Random(20240611), 20, []
    for trial in range(trials):
        out = tmp_path / f"trial{trial}"
        code = signal_after_rows(fork_cli(argv(out)), out / "history.csv", rng.randint(1, STEPS - 1), signal.SIGKILL)
        assert code == -signal.SIGKILL
        ckpt = out / "checkpoint.pt"
        step = int(load_checkpoint(ckpt, "vmc")["step"]) if ckpt.is_file() else 0
        assert step <= rows_in(out / "history.csv") < step + 5 + 2  # at most the steps since the checkpoint are lost
        resume_and_compare(out, reference, capsys)
        resumed_from.append(step)
    assert len(resumed_from) == trials and len(set(resumed_from)) >= 3  # kills landed at different places


def test_kill_before_the_first_checkpoint_restarts_from_step_0(tmp_path, reference, capsys):
    out = tmp_path / "run"
    args = argv(out, "--checkpoint-every", "1000", "--checkpoint-seconds", "0")
    assert signal_after_rows(fork_cli(args), out / "history.csv", 3, signal.SIGKILL) == -signal.SIGKILL
    assert not (out / "checkpoint.pt").exists()
    err = resume_and_compare(out, reference, capsys)
    assert "no checkpoint yet" in err and "starting again from step 0" in err


def test_a_checkpoint_is_also_written_by_elapsed_time(tmp_path, reference, capsys):
    out = tmp_path / "run"
    args = argv(out, "--checkpoint-every", "1000", "--checkpoint-seconds", "0.000001")  # every step, by time
    assert signal_after_rows(fork_cli(args), out / "history.csv", 7, signal.SIGKILL) == -signal.SIGKILL
    assert int(load_checkpoint(out / "checkpoint.pt", "vmc")["step"]) >= 6
    resume_and_compare(out, reference, capsys)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_checkpoint_at_the_step_then_exit(tmp_path, reference, capsys, signum, code):
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nnqs", *argv(out, "--checkpoint-every", "1000")], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while rows_in(out / "history.csv") < 4:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "stuck"
        time.sleep(0.001)
    proc.send_signal(signum)
    err = proc.communicate(timeout=60)[1].strip().splitlines()
    assert proc.returncode == code
    step = int(load_checkpoint(out / "checkpoint.pt", "vmc")["step"])
    assert step == rows_in(out / "history.csv") and 4 <= step < STEPS  # the checkpoint is at the last step done
    name = signal.Signals(signum).name
    assert err[-1].startswith(f"nnqs: interrupted by {name} at step {step}; checkpoint saved in ")
    assert err[-1].endswith(f"--out {out} --checkpoint-every 1000 --resume")
    resume_and_compare(out, reference, capsys)


@pytest.mark.parametrize("delay", [0.15, 0.4, 0.9])
def test_sigint_while_the_modules_load_is_one_line(tmp_path, delay):
    """Ctrl-C in the first second (NumPy, torch and the subcommands still importing): one line, exit 130."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "nnqs", *argv(tmp_path / "run")], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert "Traceback" not in err, err
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1].startswith("nnqs: interrupted")


def test_two_processes_racing_on_one_folder(tmp_path, reference, capsys):
    out = tmp_path / "run"
    first = fork_cli(argv(out))
    deadline = time.monotonic() + 60
    while rows_in(out / "history.csv") < 2:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    capsys.readouterr()
    for extra in ((), ("--resume",), ("--overwrite",)):  # whatever the second one asks, it is kept out
        assert main(argv(out, *extra)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"run folder {out} is in use by another running process (pid {first})" in err[0]
    assert exit_code(first) == 0
    assert history(out) == reference[0]
    assert b"\0" not in (out / "history.csv").read_bytes()
    assert main(argv(out)) == 2  # finished: the folder still belongs to its run
    assert "already holds a run" in capsys.readouterr().err


def test_two_processes_started_together_one_runs_one_is_refused(tmp_path, reference):
    out = tmp_path / "run"
    pids = [fork_cli(argv(out)), fork_cli(argv(out))]
    codes = sorted(exit_code(pid) for pid in pids)
    assert codes == [0, 2]
    assert history(out) == reference[0]


def test_a_ctrl_c_while_loading_is_held_then_raised_once_loaded():
    """Held, a SIGINT cannot be raised (and swallowed) inside a library's import; release raises it."""
    from nnqs.cli import HeldInterrupt

    before = signal.getsignal(signal.SIGINT)
    held = HeldInterrupt()
    os.kill(os.getpid(), signal.SIGINT)  # nothing raised here
    time.sleep(0.05)
    assert held.came
    with pytest.raises(KeyboardInterrupt):
        held.release()
    assert signal.getsignal(signal.SIGINT) is before
    quiet = HeldInterrupt()
    quiet.release()  # none came: nothing raised, the handler back
    assert signal.getsignal(signal.SIGINT) is before
