"""Config building (defaults < TOML < flags, strict keys and types) and safe checkpoints."""
from dataclasses import dataclass
from typing import Literal

import pytest
import torch

from nnqs.common.checkpoint import load_checkpoint, save_checkpoint
from nnqs.common.config import build_config, config_to_toml, read_toml
from nnqs.common.errors import UserError


@dataclass(frozen=True)
class Demo:
    steps: int = 10
    lr: float = 1e-3
    arch: Literal["a", "b"] = "a"
    name: str | None = None


def test_precedence_and_round_trip(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("steps = 20\nlr = 1\n")
    cfg = build_config(Demo, f, {"steps": 30, "arch": None})
    assert cfg == Demo(steps=30, lr=1.0, arch="a")
    g = tmp_path / "d.toml"
    g.write_text(config_to_toml(cfg))
    assert build_config(Demo, g) == cfg


@pytest.mark.parametrize(
    "text, words",
    [("stepz = 3\n", "unknown config key"), ('steps = "x"\n', "must be int"), ("steps = true\n", "must be int"),
     ('arch = "c"\n', "must be one of"), ("steps = \n", "not valid TOML"), ("[t]\nx=1\n", "tables")],
)
def test_bad_config_is_one_clear_error(tmp_path, text, words):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(UserError, match=words):
        build_config(Demo, f)


def test_missing_config_file(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        read_toml(tmp_path / "nope.toml")


def test_checkpoint_round_trip_and_refusals(tmp_path):
    p = tmp_path / "ck.pt"
    save_checkpoint(p, "vmc", {"step": 3, "w": torch.arange(4.0), "cfg": {"a": 1}})
    data = load_checkpoint(p, "vmc")
    assert data["step"] == 3 and torch.equal(data["w"], torch.arange(4.0))
    with pytest.raises(UserError, match="expected 'lm'"):
        load_checkpoint(p, "lm")
    raw = p.read_bytes()
    (tmp_path / "trunc.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(UserError, match="corrupt"):
        load_checkpoint(tmp_path / "trunc.pt", "vmc")
    torch.save({"format": "other"}, tmp_path / "foreign.pt")
    with pytest.raises(UserError, match="not an nnqs checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt", "vmc")
    assert not list(tmp_path.glob(".*.tmp"))


def test_threads_limit_the_blas_and_openmp_beside_torch(monkeypatch):
    # --threads 1 once limited torch alone: SciPy's OpenBLAS (the SR step's ssyrk) still ran on every core.
    import importlib
    import os

    from threadpoolctl import threadpool_info, threadpool_limits

    from nnqs.common.config import apply_threads

    importlib.import_module("scipy.linalg")  # its OpenBLAS loaded before the limit
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # restored after the test
        monkeypatch.setenv(name, os.environ.get(name, "2"))
    before = torch.get_num_threads()
    with threadpool_limits(2):  # the libraries' limits restored on leaving
        try:
            apply_threads(1)
            pools = [p for p in threadpool_info() if p["internal_api"] in ("openblas", "openmp")]
            assert any(p["internal_api"] == "openblas" for p in pools)
            assert torch.get_num_threads() == 1 and all(p["num_threads"] == 1 for p in pools)
            assert os.environ["OMP_NUM_THREADS"] == os.environ["OPENBLAS_NUM_THREADS"] == "1"  # libraries loaded later
        finally:
            torch.set_num_threads(before)
