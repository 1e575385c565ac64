"""A run folder belongs to one run (both commands): an existing run is never written over,
a live run keeps other processes out, a dead run's lock is taken over; resume is honest."""
import os
import signal
import time

import pytest
import torch

from nnqs.cli import main
from nnqs.common.checkpoint import load_checkpoint
from nnqs.common.errors import UserError
from nnqs.common.runfolder import LOCK_NAME, claim

VMC = ["vmc", "H2", "--d-model", "8", "--n-layers", "1", "--pretrain-steps", "0", "--final-samples", "1000",
       "--no-exact", "--threads", "1", "--checkpoint-every", "2"]
LM = ["lm", "train", "--eval-every", "4", "--checkpoint-every", "4", "--d-model", "8", "--n-layers", "1",
      "--batch-size", "8", "--train-size", "40", "--val-size", "8", "--no-progress", "--threads", "1"]


def one_line(capsys, code, argv) -> str:
    capsys.readouterr()
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def snapshot(out):
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.name != LOCK_NAME}


@pytest.mark.parametrize("command", [VMC, LM])
def test_an_existing_run_is_never_written_over(tmp_path, capsys, command):
    out = tmp_path / "run"
    assert main([*command, "--steps", "4", "--out", str(out)]) == 0
    before = snapshot(out)
    err = one_line(capsys, 2, [*command, "--steps", "6", "--out", str(out)])
    assert err == (f"nnqs: error: run folder {out} already holds a run (config.toml, checkpoint.pt, history.csv); "
                   "continue it with --resume, choose another --out, or replace it with --overwrite")
    assert snapshot(out) == before
    assert main([*command, "--steps", "6", "--out", str(out), "--overwrite"]) == 0
    assert load_checkpoint(out, command[0] if command[0] == "vmc" else "lm")["step"] == 6
    with pytest.raises(SystemExit):
        main([*command, "--steps", "6", "--out", str(out), "--overwrite", "--resume"])


def test_a_live_run_keeps_others_out_and_a_dead_ones_lock_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    claim(out, "new").release()
    pid = os.fork()
    if pid == 0:  # a process that holds the folder, then dies without a word
        claim(out, "new")
        time.sleep(60)
        os._exit(0)
    deadline = time.monotonic() + 10
    while not (out / LOCK_NAME).read_text().strip() == str(pid):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for command in (VMC, LM):
        err = one_line(capsys, 2, [*command, "--steps", "2", "--out", str(out)])
        assert err.startswith(f"nnqs: error: run folder {out} is in use by another running process (pid {pid})")
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert main([*VMC, "--steps", "2", "--out", str(out)]) == 0  # the kernel dropped the dead process's lock


def test_resume_refuses_what_cannot_change_and_leaves_the_run_alone(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*VMC, "--steps", "4", "--lr", "0.1", "--out", str(out)]) == 0
    before = snapshot(out)
    err = one_line(capsys, 2, [*VMC, "--lr", "0.05", "--d-model", "16", "--out", str(out), "--resume"])
    assert "--resume cannot change --d-model (run: 8, given: 16), --lr (run: 0.1, given: 0.05)" in err
    err = one_line(capsys, 2, [*VMC, "--steps", "3", "--out", str(out), "--resume"])
    assert err == (f"nnqs: error: --steps 3 is below the 4 steps the run in {out} has done; give --steps 4 or more")
    assert snapshot(out) == before


def test_resume_applies_and_records_what_may_change(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*VMC, "--steps", "4", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main([*VMC, "--steps", "7", "--checkpoint-every", "3", "--out", str(out), "--resume", "--json"]) == 0
    err = capsys.readouterr().err
    assert f"resuming the run in {out} at step 4 of 7 (changed: checkpoint_every 2 -> 3, steps 4 -> 7)" in err
    config = (out / "config.toml").read_text()
    assert "steps = 7\n" in config and "checkpoint_every = 3\n" in config
    assert [line.split(",")[0] for line in (out / "history.csv").read_text().splitlines()[1:]] == list(map(str, range(7)))
    assert main([*VMC, "--out", str(out), "--resume"]) == 0  # without --steps: the run's own 7 steps
    assert load_checkpoint(out, "vmc")["step"] == 7 and "steps = 7\n" in (out / "config.toml").read_text()


def test_resume_of_an_empty_folder_and_claims_of_odd_paths(tmp_path, capsys):
    err = one_line(capsys, 2, [*LM, "--out", str(tmp_path / "none"), "--resume"])
    assert "no run to resume in" in err and "(no checkpoint.pt, no config.toml)" in err
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is not writable"):
        claim(tmp_path / "file" / "run", "new")
    with pytest.raises(UserError, match="is not writable"):
        claim(str(tmp_path / "a\0b"), "new")


class Crash(Exception):
    pass


def test_resume_without_steps_finishes_the_runs_own_steps(tmp_path, capsys, monkeypatch):
    import nnqs.vmc.vmc_loop

    out, real = tmp_path / "run", nnqs.vmc.vmc_loop.vmc_step

    def crash_at_step_3(wf, ham, opt, sched, cfg, step, *args):
        if step == 3:
            raise Crash
        return real(wf, ham, opt, sched, cfg, step, *args)

    monkeypatch.setattr(nnqs.vmc.vmc_loop, "vmc_step", crash_at_step_3)
    with pytest.raises(Crash):
        main([*VMC, "--steps", "6", "--out", str(out)])
    monkeypatch.setattr(nnqs.vmc.vmc_loop, "vmc_step", real)
    assert load_checkpoint(out, "vmc")["step"] == 2
    assert main([*VMC, "--out", str(out), "--resume"]) == 0
    assert load_checkpoint(out, "vmc")["step"] == 6 and "steps = 6\n" in (out / "config.toml").read_text()
    assert len((out / "history.csv").read_text().splitlines()) == 1 + 6


def test_an_older_layout_checkpoint_loads_for_a_warm_start_but_is_not_resumed(tmp_path, capsys, monkeypatch):
    import nnqs.common.checkpoint as checkpoint
    from nnqs.common.checkpoint import save_checkpoint
    from nnqs.vmc.run import load_model_state

    out = tmp_path / "run"
    assert main([*VMC, "--steps", "2", "--out", str(out)]) == 0
    new = load_checkpoint(out, "vmc")
    old = {"step": 2, "n_samples": 10, "model": new["model"], "hparams": new["model_config"],
           "optimizer": new["optimizer"], "scheduler": new["scheduler"], "generator": new["rng"]["generator"],
           "torch_rng": new["rng"]["torch"], "config": new["config"], "system": new["system"]}  # version 1 keys
    with monkeypatch.context() as patch:
        patch.setattr(checkpoint, "VERSION", 1)
        save_checkpoint(out / "checkpoint.pt", "vmc", old)
    weights = load_model_state(out)
    assert all(torch.equal(weights[k], new["model"][k]) for k in weights)
    err = one_line(capsys, 2, [*VMC, "--steps", "4", "--out", str(out), "--resume"])
    assert err == (f"nnqs: error: checkpoint {out}/checkpoint.pt comes from an older layout (format version 1) and "
                   "cannot be resumed; its model still loads for evaluation or a warm start; start a new run in "
                   "another --out")


def test_both_commands_take_the_same_run_options():
    from nnqs.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    lm = next(a for a in sub["lm"]._actions if a.dest == "lm_command").choices["train"]
    shared = {"--out", "--config", "--resume", "--overwrite", "--json", "--no-progress", "--steps", "--seed", "--lr",
              "--d-model", "--n-layers", "--n-heads", "--device", "--threads", "--checkpoint-every",
              "--checkpoint-seconds"}
    for parser in (sub["vmc"], lm):
        options = {s for a in parser._actions for s in a.option_strings}
        assert shared <= options, shared - options


def test_resuming_a_run_of_the_other_kind_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*VMC, "--steps", "2", "--out", str(out)]) == 0
    err = one_line(capsys, 2, [*LM, "--out", str(out), "--resume"])
    assert err.startswith(f"nnqs: error: the run in {out} is not of kind 'lm'")


def test_the_lock_file_names_only_the_process_that_holds_the_run(tmp_path):
    import os

    from nnqs.common.errors import UserError
    from nnqs.common.runfolder import LOCK_NAME, claim

    lock = tmp_path / LOCK_NAME
    folder = claim(tmp_path, "new")
    assert lock.read_text() == f"{os.getpid()}\n"
    (tmp_path / "config.toml").write_text("steps = 1\n")  # the run's first file
    folder.release()
    assert lock.read_text() == ""  # released: it names nobody
    lock.write_text("12345\n")  # as a run killed by -9 would leave it
    with pytest.raises(UserError, match="already holds a run"):
        claim(tmp_path, "new")  # refused on a finished folder: the file is left as it was
    assert lock.read_text() == "12345\n"
    with pytest.raises(UserError, match="no run to resume"):
        claim(tmp_path / "empty", "resume")
    assert (tmp_path / "empty" / LOCK_NAME).read_text() == ""
