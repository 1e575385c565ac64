"""Fuzzing TOML run configs and CLI options of `nnqs vmc`, `nnqs exact` and `nnqs lm train/data`:
every case reaches the run with a valid config, or exits 2 with one line."""
import dataclasses
import math
import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import nnqs.cli.exact
import nnqs.lm.run
import nnqs.vmc.run
from fuzz_support import FUZZ, TEXT, Reached, run_cli
from nnqs.lm.train import TrainConfig
from nnqs.vmc.config import VMCConfig

SCALAR = st.one_of(
    st.integers(-3, 3), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.sampled_from(["cpu", "cuda", "cuda:x", "meta", "sr", "adamw", "exact", "float32", "decoder", "seq2seq", ""]),
    TEXT,
)
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=3))


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in v) + '"'


def toml_text(keys):
    return st.dictionaries(st.sampled_from([*keys, "junk", "Steps"]), VALUE, max_size=5).map(
        lambda d: "".join(f"{k} = {toml_value(v)}\n" for k, v in d.items()))


VMC_KEYS = [f.name for f in dataclasses.fields(VMCConfig)]
LM_KEYS = [f.name for f in dataclasses.fields(TrainConfig)]


@pytest.fixture
def stubs(monkeypatch):
    """Stand-ins for the runs: they check the config they are handed, then stop."""
    def run_molecule(spec, cfg, out, **kwargs):
        assert isinstance(cfg, VMCConfig)
        torch.device(cfg.device)
        assert cfg.d_model % cfg.n_heads == 0 and cfg.checkpoint_every >= 1 and 0 <= cfg.threads <= 1024
        assert out.path.is_dir() and not out.run_files()  # claimed, and nothing of a run there yet
        assert all(math.isfinite(getattr(cfg, k)) for k in ("lr", "sr_shift", "grad_clip"))
        assert cfg.lr_final is None or math.isfinite(cfg.lr_final)
        raise Reached

    def train_in_folder(cfg, folder, **kwargs):
        assert isinstance(cfg, TrainConfig) and 0 <= cfg.threads <= 1024 and cfg.checkpoint_every >= 1
        assert folder.path.is_dir() and not folder.run_files()  # claimed, and nothing of a run there yet
        raise Reached

    monkeypatch.setattr(nnqs.vmc.run, "run_molecule", run_molecule)
    monkeypatch.setattr(nnqs.lm.run, "train_in_folder", train_in_folder)
    monkeypatch.setattr(nnqs.cli.exact, "exact_references", lambda *a, **k: (_ for _ in ()).throw(Reached()))
    with tempfile.TemporaryDirectory() as tmp:
        old = os.getcwd()
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(old)


@FUZZ
@given(text=st.one_of(toml_text(VMC_KEYS), TEXT))
@example(text="a = " + "[" * 2000 + "]" * 2000 + "\n")
@example(text="threads = 1000000\n")
@example(text='device = "cuda:x"\n')
def test_vmc_toml_configs(stubs, text):
    path = stubs / "c.toml"
    path.write_text(text, encoding="utf-8")
    run_cli(["vmc", "H2", "--config", str(path), "--out", "run"])


@FUZZ
@given(text=st.one_of(toml_text(LM_KEYS), TEXT))
def test_lm_toml_configs(stubs, text):
    path = stubs / "c.toml"
    path.write_text(text, encoding="utf-8")
    run_cli(["lm", "train", "--config", str(path), "--out", "run", "--no-progress"])


def flags(names):
    token = st.one_of(st.sampled_from(names), st.integers(-2, 5).map(str), TEXT,
                      st.sampled_from(["nan", "inf", "1e9", "0", "-1", "1.5", "99999999999999999999", "H2", "--"]))
    return st.lists(token, max_size=8)


VMC_FLAGS = ["--" + k.replace("_", "-") for k in VMC_KEYS] + [
    "--geometry", "--xyz", "--fcidump", "--basis", "--charge", "--spin", "--active", "--config", "--out",
    "--resume", "--overwrite", "--no-exact", "--json", "H2", "LiH"]
LM_FLAGS = ["--arch", "--steps", "--seed", "--val-size", "--batch-size", "--lr", "--warmup-steps", "--weight-decay",
            "--d-model", "--n-layers", "--n-heads", "--d-ff", "--dropout", "--eval-every", "--device", "--data",
            "--train-size", "--config", "--out", "--threads", "--resume", "--overwrite", "--json", "--no-progress",
            "--checkpoint-every", "--checkpoint-seconds"]


@FUZZ
@given(argv=flags(VMC_FLAGS))
def test_vmc_options(stubs, argv):
    run_cli(["vmc", *argv])


@FUZZ
@given(argv=flags(VMC_FLAGS[-15:]))
def test_exact_options(stubs, argv):
    run_cli(["exact", *argv])


@FUZZ
@given(argv=flags(LM_FLAGS))
def test_lm_train_options(stubs, argv):
    run_cli(["lm", "train", *argv])


@FUZZ
@given(argv=flags(["--n", "--seed", "--out", "--exclude", "d.json", "/proc/x.json", "."]))
@example(argv=["--n", "3", "--out", "/proc/nope/x.json"])
@example(argv=["--n", "3", "--out", ".", "--seed", "99999999999999999999"])
def test_lm_data_options(stubs, argv):
    run_cli(["lm", "data", *argv])


@FUZZ
@given(argv=flags(["lm", "vmc", "exact", "molecules", "eval", "generate", "train", "data", "--json", "--ckpt"]))
def test_top_level_commands(stubs, argv):
    run_cli(argv)
