"""The step-cost benchmark runs at toy size: one record per working-set size, the exact twin where asked, a fit."""
import json

from benchmarks import step_cost


def test_quick_benchmark_output(capsys, tmp_path):
    out = tmp_path / "step.jsonl"
    assert step_cost.main(["--quick", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    steps, fit = records[:-1], records[-1]
    assert [r["working_set"] for r in steps] == list(step_cost.QUICK["sizes"])
    for r in steps:
        assert r["unique"] >= r["working_set"] and r["t_step"] > 0 and r["peak_rss_mb"] > 0
        assert ("exact_t_step" in r) == (r["working_set"] in step_cost.QUICK["exact"])
    assert fit["benchmark"] == "step_cost_fit" and fit["exponent"] == fit["exponent"]  # a number, not NaN
