"""The SR-solve benchmark runs at toy size; both solves give the same direction."""
import json

from benchmarks import sr_solve


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "sr.jsonl"
    assert sr_solve.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    assert [r["unique"] for r in records] == list(sr_solve.QUICK["sizes"])
    for r in records:
        assert r["seconds_split"] > 0 and r["seconds_full"] > 0
        assert r["max_difference"] <= 1e-8 * max(1.0, r["direction_norm"])
