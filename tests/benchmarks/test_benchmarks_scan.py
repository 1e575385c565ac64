"""The scan benchmark at toy size: each variant runs with its settings, and its errors are its history's."""
import json
import tomllib

import pytest

from benchmarks.common import history_rows
from benchmarks.scan import main, parse_variant


def test_quick_scan_runs_each_variant_with_its_settings(tmp_path, capsys):
    records = main(["--quick", "--keep", str(tmp_path), "--at", "1"])
    assert [r["variant"] for r in records] == ["base", "lr"]
    lowest = min(float(row["energy"]) for r in records for row in history_rows(tmp_path / r["variant"] / "history.csv"))
    for record in records:
        assert record["reference"] == lowest  # no reference given: the lowest energy any variant reached
        assert record["finished"] and record["steps_done"] == 3
        config = tomllib.loads((tmp_path / record["variant"] / "config.toml").read_text())
        assert all(config[k] == v for k, v in record["settings"].items())
        rows = history_rows(tmp_path / record["variant"] / "history.csv")
        assert record["error_mha_last"] == pytest.approx(1000 * (float(rows[-1]["energy"]) - lowest), abs=1e-4)
        assert record["error_mha_at"]["1"] == pytest.approx(1000 * (float(rows[1]["energy"]) - lowest), abs=1e-4)
    assert records[1]["settings"] == {"lr": 0.1, "d_model": 8, "n_layers": 1}
    assert len(capsys.readouterr().out.strip().splitlines()) == 2  # one JSON line per variant
    assert json.loads(json.dumps(records[0]))  # plain JSON


def test_a_variant_names_fields_of_the_run_config():
    assert parse_variant("clip:grad_clip=5,lr_final=0.05") == ("clip", {"grad_clip": 5.0, "lr_final": 0.05})
    with pytest.raises(SystemExit, match="VMCConfig field"):
        parse_variant("bad:no_such_field=1")
