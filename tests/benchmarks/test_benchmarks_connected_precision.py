"""The float32-versus-float64 benchmark of the connected x' on a toy state: one draw, both precisions."""
import json

import pytest

from benchmarks.connected_precision import main


def test_quick_record_compares_the_two_precisions_on_one_draw(tmp_path, capsys):
    out = tmp_path / "connected_precision.jsonl"
    record = main(["--quick", "--out", str(out)])[0]
    assert json.loads(out.read_text()) == json.loads(capsys.readouterr().out.strip())
    assert record["molecule"] == "LiH" and 0 < record["n_unique"] <= 64
    assert record["difference"] == pytest.approx(record["energy_float32"] - record["energy_float64"], abs=1e-15)
    assert abs(record["difference"]) < 1e-6 and record["max_local_energy_change"] < 1e-5  # float32 rounding only
    assert record["stderr"] > 0 and record["seconds_float32"] > 0 and record["seconds_float64"] > 0
