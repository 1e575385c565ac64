"""The distributed benchmark runs at toy size (1 and 2 processes) and prints parseable JSON lines."""
import json

import pytest

from benchmarks import distributed

FIELDS = {"molecule", "optimizer", "samples", "median_unique", "seconds_per_step_1", "seconds_per_step_2",
          "speedup", "max_energy_diff", "threads_per_process", "backend"}  # fmt: skip


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "distributed.jsonl"
    assert distributed.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [r["optimizer"] for r in records] == list(distributed.QUICK["optimizers"])
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    for r in records:
        assert FIELDS <= set(r)
        assert r["speedup"] == pytest.approx(r["seconds_per_step_1"] / r["seconds_per_step_2"], rel=1e-2)
        assert 0 < r["median_unique"] <= 4  # the H2 STO-3G sector holds C(2,1)^2 = 4 configurations
        assert r["max_energy_diff"] < 1e-8  # both runs follow the same trajectory


def test_the_26_qubit_job_runs_the_user_defaults(tmp_path):
    """The h2o-6-31g job passes the basis and no model, optimizer or sample options (the defaults)."""
    cmd = distributed.vmc_command(2, distributed.JOBS["h2o-6-31g"], None, tmp_path / "c.toml", tmp_path / "out")
    assert cmd[cmd.index("vmc") + 1] == "H2O" and cmd[cmd.index("--basis") + 1] == "6-31g"
    assert "--nproc_per_node" in cmd
    for option in ("--samples", "--d-model", "--n-layers", "--optimizer", "--lr"):
        assert option not in cmd
