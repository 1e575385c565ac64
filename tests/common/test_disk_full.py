"""A full disk (or quota) at any write of a run: one line naming the file, exit 1, the last
checkpoint intact and resumable. Simulated by an ``os.fsync`` that fails for one file."""
import errno
import json
import os
from pathlib import Path

import pytest

from nnqs.cli import main
from nnqs.common.checkpoint import load_checkpoint

VMC = ["vmc", "H2", "--steps", "8", "--d-model", "8", "--n-layers", "1", "--pretrain-steps", "0",
       "--final-samples", "1000", "--no-exact", "--threads", "1", "--checkpoint-every", "3", "--no-progress"]
LM = ["lm", "train", "--steps", "8", "--eval-every", "2", "--checkpoint-every", "3", "--d-model", "8", "--n-layers",
      "1", "--batch-size", "8", "--train-size", "40", "--val-size", "8", "--no-progress", "--threads", "1"]


def fail_writes(monkeypatch, name_starts: str, after: int, code: int = errno.ENOSPC) -> None:
    """Let ``after`` fsyncs of files whose name starts with ``name_starts`` pass, then fail them all."""
    real, seen = os.fsync, []

    def fsync(fd):
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        if name.startswith(name_starts):
            seen.append(name)
            if len(seen) > after:
                raise OSError(code, os.strerror(code))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("command, kind", [(VMC, "vmc"), (LM, "lm")])
@pytest.mark.parametrize("target, after, words", [
    ("history.csv", 3, "no space left on device while writing {out}/history.csv; "),
    (".checkpoint.pt.", 1, "no space left on device while writing {out}/checkpoint.pt; "),  # its temporary file
    (".config.toml.", 0, "no space left on device while writing {out}/config.toml; "),
])
def test_disk_full_is_one_line_exit_1_with_the_checkpoint_intact(tmp_path, capsys, monkeypatch, command, kind,
                                                                 target, after, words):
    out, full = tmp_path / "run", tmp_path / "full"
    assert main([*command, "--out", str(full), "--json"]) == 0
    capsys.readouterr()
    with monkeypatch.context() as patch:
        fail_writes(patch, target, after)
        assert main([*command, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"nnqs: error: {words.format(out=out)}free some space and continue with --resume "
                   "(files written before, checkpoint included, are intact)"]
    assert not list(out.glob(".*.tmp"))  # no temporary file left behind
    if (out / "checkpoint.pt").exists():
        step = load_checkpoint(out, kind)["step"]
        assert step in (3, 6) and step < 8  # a checkpoint written before the failure
    resumed = ["--resume"] if (out / "config.toml").exists() else []
    assert main([*command, "--out", str(out), *resumed]) == 0
    assert (out / "history.csv").read_text().count("\n") == (full / "history.csv").read_text().count("\n")
    assert json.loads((out / "result.json").read_text())["steps"] == 8


def test_quota_exceeded_says_so(tmp_path, capsys, monkeypatch):
    fail_writes(monkeypatch, "history.csv", 2, errno.EDQUOT)
    assert main([*VMC, "--out", str(tmp_path / "run")]) == 1
    assert "disk quota exceeded while writing" in capsys.readouterr().err


def test_lm_data_into_a_folder_names_the_option_not_a_temporary_file(tmp_path, capsys):
    assert main(["lm", "data", "--n", "5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"nnqs: error: --out {tmp_path} is a folder; give a file name (e.g. {tmp_path}/data.json)"
