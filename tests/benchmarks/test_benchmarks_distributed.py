"""The distributed benchmark runs at toy size (1 and 2 processes) and prints parseable JSON lines."""
import json

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
        assert r["seconds_per_step_1"] > 0 and r["seconds_per_step_2"] > 0 and r["speedup"] > 0
        assert r["max_energy_diff"] < 1e-8  # both runs follow the same trajectory
