"""VMC from a finished run's fit: with the run's own settings it retraces the run's steps; with --stop-after it
stops there with a checkpoint; a changed setting is applied and recorded."""
import dataclasses
import json

import pytest

from benchmarks import vmc_from_fit
from hamiltonians import get_spec
from nnqs.common.checkpoint import load_checkpoint
from nnqs.vmc.config import toy_config
from nnqs.vmc.run import run_molecule


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("source") / "run"
    run_molecule(get_spec("LiH"), dataclasses.replace(toy_config(6), threads=1), folder, progress=False)
    return folder


def test_quick_retraces_the_source_run(capsys):
    assert vmc_from_fit.main(["--quick"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["finished"] and record["steps_taken"] == record["steps"] == 4
    assert [r["step"] for r in record["by_step"]] == [0, 2, 3]
    for row in record["by_step"]:
        assert row["changed"]["energy"] == row["source"]["energy"]  # the same fitted start, the same steps
    assert record["error_mha"] == pytest.approx(record["source_error_mha"], abs=1e-9)


def test_a_changed_setting_stopped_early(source, tmp_path, capsys):
    out = tmp_path / "changed"
    assert vmc_from_fit.main(["--source", str(source), "--system", "LiH", "--folder", str(out), "--set", "lr=0.02",
                              "--stop-after", "3", "--report", "0", "1", "--out", str(tmp_path / "r.jsonl")]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record == json.loads((tmp_path / "r.jsonl").read_text().splitlines()[-1])
    assert record["settings"] == {"lr": 0.02} and record["steps"] == 6
    assert not record["finished"] and record["steps_taken"] == 3
    assert int(load_checkpoint(out / "checkpoint.pt", "vmc")["step"]) == 3
    assert "lr = 0.02" in (out / "config.toml").read_text()
    first = record["by_step"][0]
    assert first["step"] == 0 and first["changed"]["energy"] == first["source"]["energy"]  # the same start
    assert (out / "hamiltonian.npz").is_file()  # the source's integrals, kept with the new run


def test_sigint_stops_at_a_step_and_still_writes_the_record(source, tmp_path):
    """Stopping a long comparison by hand (SIGINT) ends it at a step boundary with its record, not a traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out, jsonl = tmp_path / "long", tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.vmc_from_fit", "--source", str(source), "--system", "LiH",
                             "--folder", str(out), "--set", "steps=100000", "--out", str(jsonl)],
                            cwd=Path(__file__).parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    history, deadline = out / "history.csv", time.monotonic() + 120
    while time.monotonic() < deadline and not (history.is_file() and len(history.read_text().splitlines()) >= 3):
        time.sleep(0.2)  # a header and two steps
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in err, err
    record = json.loads(jsonl.read_text().splitlines()[-1])
    assert not record["finished"] and 2 <= record["steps_taken"] < 100000
    assert int(load_checkpoint(out / "checkpoint.pt", "vmc")["step"]) == record["steps_taken"]
