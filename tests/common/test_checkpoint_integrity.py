"""Checkpoints refuse tampered, truncated, foreign and other-system files with one clear line."""
import pickle

import pytest
import torch

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.cli import main
from nnqs.common.errors import UserError

TINY = ["--d-model", "8", "--n-layers", "1", "--final-samples", "1000", "--no-exact", "--threads", "1"]


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "checkpoint.pt"
    save_checkpoint(path, "vmc", {"step": 3, "w": torch.arange(6.0), "config": {"lr": 0.1}})
    return path


def refused(path, kind="vmc") -> str:
    with pytest.raises(UserError) as exc:
        load_checkpoint(path, kind)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_every_flipped_byte_is_refused(sealed, tmp_path):
    raw = sealed.read_bytes()
    assert load_checkpoint(sealed, "vmc")["step"] == 3
    bad = tmp_path / "bad.pt"
    for i in range(len(raw)):
        bad.write_bytes(raw[:i] + bytes([raw[i] ^ 0x01]) + raw[i + 1:])
        refused(bad)


def test_truncated_extended_and_foreign_files_are_refused(sealed, tmp_path):
    raw = sealed.read_bytes()
    bad = tmp_path / "bad.pt"
    for n in sorted({0, 1, 10, len(raw) // 3, len(raw) // 2, len(raw) - 79, len(raw) - 78, len(raw) - 1}):
        bad.write_bytes(raw[:n])
        assert "corrupt" in refused(bad)
    bad.write_bytes(raw + b"\n")
    assert "corrupt" in refused(bad)
    torch.save({"format": "nnqs", "version": 1, "kind": "vmc", "step": 1}, bad)  # unsealed
    assert "not an nnqs checkpoint" in refused(bad)
    bad.write_bytes(pickle.dumps({"step": 1}))
    refused(bad)
    bad.write_text("hello")
    refused(bad)
    assert "expected 'lm'" in refused(sealed, "lm")
    assert "no checkpoint" in refused(tmp_path / "missing.pt")


def one_line_exit_2(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nnqs: error:"), err
    return err[0]


@pytest.fixture(scope="module")
def h2_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h2") / "run"
    assert main(["vmc", "H2", "--steps", "2", *TINY, "--out", str(out)]) == 0
    return out


def test_resume_refuses_another_molecule_or_model_shape(h2_run, capsys):
    capsys.readouterr()
    err = one_line_exit_2(["vmc", "LiH", "--steps", "3", *TINY, "--out", str(h2_run), "--resume"], capsys)
    assert "another system" in err
    err = one_line_exit_2(["vmc", "--geometry", "H 0 0 0; H 0 0 0.9", "--steps", "3", *TINY,
                           "--out", str(h2_run), "--resume"], capsys)
    assert "another system" in err
    wider = [a if a != "8" else "16" for a in TINY]
    err = one_line_exit_2(["vmc", "H2", "--steps", "3", *wider, "--out", str(h2_run), "--resume"], capsys)
    assert "--resume cannot change --d-model (run: 8, given: 16)" in err
    err = one_line_exit_2(["lm", "eval", "--ckpt", str(h2_run), "--data", str(h2_run / "config.toml")], capsys)
    assert "'vmc' checkpoint, expected 'lm'" in err


def test_resume_refuses_a_tampered_checkpoint(h2_run, tmp_path, capsys):
    out = tmp_path / "copy"
    out.mkdir()
    raw = bytearray((h2_run / "checkpoint.pt").read_bytes())
    raw[len(raw) // 2] ^= 0x40
    (out / "checkpoint.pt").write_bytes(bytes(raw))
    capsys.readouterr()
    err = one_line_exit_2(["vmc", "H2", "--steps", "3", *TINY, "--out", str(out), "--resume"], capsys)
    assert "corrupt or was modified" in err


def test_an_fcidump_run_resumes_from_its_file_under_another_path_but_not_from_other_integrals(tmp_path, capsys):
    """A run moved between machines finds its FCIDUMP elsewhere: the integrals, not the path, name the system."""
    import dataclasses
    import shutil

    from hamiltonians import build_hamiltonian, get_spec, write_fcidump

    first, moved, other = tmp_path / "a" / "h2.fcidump", tmp_path / "b" / "h2.fcidump", tmp_path / "h2_far.fcidump"
    first.parent.mkdir()
    moved.parent.mkdir()
    write_fcidump(first, build_hamiltonian(get_spec("H2")))
    shutil.copy(first, moved)
    write_fcidump(other, build_hamiltonian(dataclasses.replace(get_spec("H2"), atom="H 0 0 0; H 0 0 0.9")))
    out = tmp_path / "run"
    assert main(["vmc", "--fcidump", str(first), "--steps", "2", *TINY, "--out", str(out)]) == 0
    assert main(["vmc", "--fcidump", str(moved), "--steps", "3", *TINY, "--out", str(out), "--resume"]) == 0
    assert "resuming the run" in capsys.readouterr().err
    err = one_line_exit_2(["vmc", "--fcidump", str(other), "--steps", "4", *TINY, "--out", str(out), "--resume"], capsys)
    assert "another system" in err
