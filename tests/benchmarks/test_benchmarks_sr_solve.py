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


def test_run_mode_times_both_solves_on_a_saved_run(capsys, tmp_path, monkeypatch):
    """``--run DIR``: the saved run's model and core, a subsample of ``--rows`` rows, both solves timed; with the
    mixed solve taken from 16 rows on, its direction agrees with the float64 one (to the CG tolerance)."""
    import nnqs.vmc.sr as sr
    from hamiltonians import get_spec
    from nnqs.common.checkpoint import load_checkpoint
    from nnqs.vmc.config import toy_config
    from nnqs.vmc.run import run_molecule

    run = tmp_path / "run"
    run_molecule(get_spec("LiH"), toy_config(3), run, progress=False)
    core = load_checkpoint(str(run / "checkpoint.pt"), "vmc")["extras"]["core"]
    monkeypatch.setattr(sr, "MIXED_ROWS", 16)
    out = tmp_path / "sr_run.jsonl"
    assert sr_solve.main(["--run", str(run), "--molecule", "LiH", "--rows", "48", "--repeats", "1", "--out", str(out)]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record == json.loads(out.read_text().splitlines()[-1])
    assert record["benchmark"] == "sr_solve_run" and record["core"] == len(core) > 16
    assert 16 <= record["rows"] <= len(core)  # distinct rows of a subsample of expected size 48
    assert 0 < record["max_difference_relative"] <= 1e-5  # the mixed solve ran (not the same bits) and agrees
    assert min(record["seconds_solve_float64"], record["seconds_solve_mixed"], record["seconds_jacobian"]) >= 0
