"""The SR-solve benchmark runs at toy size; both solves give the same direction."""
import json

import pytest

from benchmarks import sr_solve


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "sr.jsonl"
    assert sr_solve.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    assert [r["unique"] for r in records] == list(sr_solve.QUICK["sizes"])
    for r in records:
        assert r["direction_norm"] > 1e-3  # a real direction, not a zero vector
        assert r["max_difference"] <= 1e-8 * max(1.0, r["direction_norm"])  # the two solves agree
        assert r["speedup"] == pytest.approx(r["seconds_full"] / r["seconds_split"], rel=1e-2)
        assert min(r["calls_split"], r["calls_full"], r["calls_jacobian"]) >= 1
    assert records[0]["parameters"] == records[1]["parameters"]  # one model, two sample sizes
