"""The accuracy benchmark runs at toy size so it cannot rot."""
from benchmarks.accuracy import main


def test_quick_accuracy_benchmark(capsys):
    records = main(["--quick", "--threads", "1"])
    assert len(records) == 1 and records[0]["molecule"] == "H2"
    r = records[0]
    assert r["e_exact"] < r["energy"] + 1e-9  # variational
    assert r["error_mha"] == 1000 * (r["energy"] - r["e_exact"]) and r["error_mha"] < 1.0  # within 1 mHa of FCI
    assert r["e_teacher_sci_error_mha"] < 1e-6  # H2's teacher holds its whole ground state
    assert '"benchmark": "accuracy"' in capsys.readouterr().out


def test_chain_names_build_hydrogen_chains():
    from benchmarks.accuracy import CHAINS, system_spec

    spec, bond = system_spec("H6@1.5")
    assert bond == 1.5 and spec.atom.count("H") == 6 and spec.basis == "sto-3g"
    assert [system_spec(name)[1] for name in CHAINS] == [float(name.split("@")[1]) for name in CHAINS]
    assert system_spec("N2@1.4")[0].atom.split(";")[1].split()[3] == "1.4"  # diatomics as before


def test_collect_reads_finished_default_runs_and_refuses_others(tmp_path):
    """--runs keeps the folder; --collect gives the same line from it without running, and refuses a
    folder whose config.toml is not the defaults (but for steps and threads)."""
    import json

    import pytest

    from hamiltonians import get_spec
    from nnqs.vmc.config import VMCConfig
    from nnqs.vmc.run import run_molecule

    cfg = VMCConfig(steps=2, threads=1, d_model=8, n_layers=1, phase_hidden=8, pretrain_steps=5, final_samples=10**4)
    run_molecule(get_spec("H2"), cfg, tmp_path / "toy", progress=False)
    with pytest.raises(SystemExit, match="did not run with the defaults"):
        main(["--collect", f"H2={tmp_path / 'toy'}"])
    default = tmp_path / "default"
    run_molecule(get_spec("H2"), VMCConfig(steps=2, threads=1), default, progress=False)
    line = main(["--collect", f"H2={default}"])[0]
    result = json.loads((default / "result.json").read_text())
    assert (line["energy"], line["steps"], line["threads"], line["wall_s"]) == (result["energy"], 2, 1, result["wall_s"])


def test_settings_are_typed_by_their_field_and_unknown_ones_refused():
    import pytest

    from benchmarks.accuracy import parse_settings

    assert parse_settings(["sr_momentum=0.99", "steps=1e2", "dtype=float32"]) == {
        "sr_momentum": 0.99, "steps": 100, "dtype": "float32"}
    for bad in (["no_such_field=1"], ["steps"]):
        with pytest.raises(SystemExit, match="FIELD=VALUE"):
            parse_settings(bad)
