"""`nnqs vmc`: the files a run writes, --json, resume, and one-line errors for bad options."""
import json
import sys

import pytest

from nnqs.cli import main
from tests_support import pyscf_references


def test_vmc_run_writes_files_and_json(tmp_path, capsys):
    out = tmp_path / "h2"
    args = ["vmc", "H2", "--steps", "6", "--d-model", "8", "--n-layers", "1", "--final-samples", "100000",
            "--checkpoint-every", "3", "--out", str(out), "--json"]
    before = vm_hwm_mb()
    assert main(args) == 0
    after = vm_hwm_mb()
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    if before is not None:  # the kernel's high-water mark, read before and after the run
        assert before - 1 <= result["peak_rss_mb"] <= after + 1
    for key in ("energy", "energy_stderr", "e_exact", "error_mha", "e_hf", "e_ccsd_t", "steps", "wall_s", "n_parameters"):
        assert key in result
    e_fci = pyscf_references("H2")["exact (fci)"]  # computed here with PySCF, not by nnqs
    assert result["e_exact"] == pytest.approx(e_fci, abs=1e-8)
    assert result["energy"] >= e_fci - 1e-9  # variational
    assert result["error_mha"] == pytest.approx(1000 * (result["energy"] - e_fci), abs=1e-5)
    for name in ("config.toml", "history.csv", "result.json", "energy.png", "checkpoint.pt", "rdm1.npy",
                 "natural_occupations.png"):
        assert (out / name).is_file(), name
    import numpy as np

    rdm1 = np.load(out / "rdm1.npy")  # the network's 1-RDM: symmetric, trace N, occupations in [0, 2]
    assert rdm1.shape == (2, 2) and np.allclose(rdm1, rdm1.T) and np.trace(rdm1) == pytest.approx(2.0, abs=1e-10)
    occupations = result["properties"]["natural_occupations"]
    assert sum(occupations) == pytest.approx(2.0, abs=1e-10) and all(-1e-12 <= v <= 2 + 1e-12 for v in occupations)
    fci = result["fci_properties"]  # FCI's beside them; H2's dipole moment is zero by symmetry
    assert abs(fci["dipole_norm_au"]) < 1e-8 and fci["s2"] < 1e-10
    assert result["properties"]["dipole_norm_au"] < 1e-2  # six steps of a tiny model: near zero, not at it
    assert len((out / "history.csv").read_text().strip().splitlines()) == 1 + 6
    # resuming with more steps continues the same history, without duplicate or missing steps
    assert main(args[:3] + ["8"] + args[4:] + ["--resume"]) == 0
    steps = [line.split(",")[0] for line in (out / "history.csv").read_text().strip().splitlines()[1:]]
    assert steps == [str(i) for i in range(8)]


@pytest.mark.parametrize("ansatz", ["complex", "real"])
def test_the_ansatz_flag_builds_that_wavefunction_and_resumes_it(ansatz, tmp_path, capsys):
    from nnqs.common.checkpoint import load_checkpoint

    out = tmp_path / ansatz
    args = ["vmc", "H2", "--steps", "4", "--d-model", "8", "--n-layers", "1", "--final-samples", "100000",
            "--ansatz", ansatz, "--out", str(out), "--json"]
    assert main(args) == 0
    assert load_checkpoint(out / "checkpoint.pt", "vmc")["model_config"]["real"] == (ansatz == "real")
    assert main(args[:3] + ["6"] + args[4:] + ["--resume"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # a sampled estimate (10^5 samples) is variational up to its statistical error
    assert result["energy"] >= pyscf_references("H2")["exact (fci)"] - 1e-9 - 5 * result["energy_stderr"]
    assert load_checkpoint(out / "checkpoint.pt", "vmc")["model_config"]["real"] == (ansatz == "real")


def vm_hwm_mb() -> float | None:
    """VmHWM of this process from /proc (MiB), None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))


@pytest.mark.parametrize("argv, words", [
    (["vmc", "H2", "--steps", "0"], "steps must be positive"),
    (["vmc", "H2", "--samples", "-5"], "samples must be positive"),
    (["vmc", "H2", "--optimizer", "lbfgs"], "optimizer"),
    (["vmc", "Xe2"], "unknown molecule"),
    (["vmc", "H2", "--out", "/proc/nope/run"], "not writable"),
    (["vmc", "H2", "--config", "/nonexistent.toml"], "cannot read config"),
    (["vmc", "H2", "--steps", "many"], "invalid int value"),
    (["vmc", "H2", "--ansatz", "imaginary"], "ansatz"),
    (["vmc", "H2", "--pretrain-lr", "nan"], "pretrain_lr must be a finite number"),
    (["vmc", "H2", "--estimator", "heat-bath"], "applies to selection 'samples' only"),
    (["vmc", "H2", "--estimator", "sample-space"], "applies to selection 'samples' only"),
    (["vmc", "H2", "--sr-rows", "-1"], "sr_rows must be in"),
    (["vmc", "H2", "--sr-exact-max", "-1"], "sr_exact_max must be in"),
    (["vmc", "H2", "--phase-pretrain", "50"], "--phase-pretrain applies to --teacher mp1 only"),
    (["vmc", "H2", "--teacher", "mp1", "--pretrain-steps", "10", "--teacher-max", "8"],
     "--teacher-max, --pretrain-steps applies to --teacher sci only"),
    (["vmc", "H2", "--teacher", "mp1", "--pretrain-batch", "512"], "--pretrain-batch applies to --teacher sci only"),
    (["vmc", "H2", "--pretrain-batch", "0"], "pretrain_batch must be in"),
    (["vmc", "H2", "--core-rule", "amplitude"], "unrecognized arguments"),
    (["vmc", "--geometry", "He 0 0 0", "--no-exact"], "make a single determinant"),
    (["vmc", "LiH", "--active", "1", "2", "--no-exact"], "make a single determinant"),
])
def test_bad_vmc_options_exit_2_with_one_line(argv, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a refused run leaves nothing in the repository
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_a_model_too_large_to_allocate_ends_in_one_line(tmp_path, capsys):
    code = main(["vmc", "H2", "--d-model", "4000000", "--n-heads", "1", "--steps", "1", "--no-exact",
                 "--out", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("nnqs: error: out of memory (tried to allocate ")
    assert "GiB" in err and "--d-model" in err


def test_out_of_memory_is_recognised_and_other_errors_are_not():
    import torch

    from nnqs.cli import is_out_of_memory, out_of_memory_message

    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    from pyscf.lib.misc import ThreadRuntimeError

    wrapped = ThreadRuntimeError("Error on thread <T>:\nUnable to allocate 1.60 GiB for an array with shape (1,)")
    assert is_out_of_memory(wrapped) and "(tried to allocate 1.60 GiB)" in out_of_memory_message(wrapped)
    try:
        try:
            raise MemoryError()
        except MemoryError:
            raise ThreadRuntimeError("Error on thread <T>:\n")
    except ThreadRuntimeError as chained:
        assert is_out_of_memory(chained)
    cuda = out_of_memory_message(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0)"))
    assert "\n" not in cuda and cuda.startswith("out of memory")


def test_a_run_moved_to_another_device_resumes_on_a_stream_seeded_by_its_checkpoint(tmp_path, capsys):
    """A checkpoint whose sampler state is of another device kind (here: relabelled 'cuda', as a GPU
    run's is) resumes on the CPU: the run goes on, with a note, on a stream seeded by the checkpoint,
    so resuming the same checkpoint twice gives the same history."""
    import shutil

    from nnqs.common.checkpoint import load_checkpoint, save_checkpoint

    out = tmp_path / "h2"
    args = ["vmc", "H2", "--d-model", "8", "--n-layers", "1", "--final-samples", "1000", "--out", str(out),
            "--json", "--no-exact", "--no-progress", "--selection", "samples"]
    assert main(args + ["--steps", "3"]) == 0
    data = load_checkpoint(out / "checkpoint.pt", "vmc")
    assert data["rng"]["generator_device"] == "cpu"
    data["rng"]["generator_device"] = "cuda"
    data["config"]["device"] = "cuda"
    save_checkpoint(out / "checkpoint.pt", "vmc", data)
    (out / "config.toml").write_text((out / "config.toml").read_text().replace('device = "cpu"', 'device = "cuda"'))
    shutil.copytree(out, tmp_path / "copy")
    capsys.readouterr()
    histories = []
    for folder in (out, tmp_path / "copy"):
        argv = [a if a != str(out) else str(folder) for a in args]
        assert main(argv + ["--steps", "5", "--device", "cpu", "--resume"]) == 0
        assert "sampler stream is of another device" in capsys.readouterr().err
        rows = [line.split(",") for line in (folder / "history.csv").read_text().splitlines()[1:]]
        assert [row[0] for row in rows] == [str(i) for i in range(5)]
        histories.append([row[:9] for row in rows])  # all but the wall times
        assert 'device = "cpu"' in (folder / "config.toml").read_text()
    assert histories[0] == histories[1]


def test_every_flag_is_a_config_field_and_its_help_shows_that_fields_default():
    import dataclasses

    from nnqs.cli.vmc import FLAGS, SYSTEM_DEFAULTS, help_text
    from nnqs.vmc.config import VMCConfig

    fields = {f.name: f.default for f in dataclasses.fields(VMCConfig)}
    for name, (_, text) in FLAGS.items():
        assert name in fields, name
        assert "(default" not in text, name  # a default written by hand would drift from VMCConfig's
        shown = help_text(name, text).rsplit("(default ", 1)[1].rstrip(")")
        value = fields[name]
        if name in SYSTEM_DEFAULTS:  # taken from the system: None in VMCConfig, the rule in the help
            assert value is None and shown == SYSTEM_DEFAULTS[name] == "300, or 20 at 32 qubits and more", name
            continue
        assert (float(shown) == value) if isinstance(value, (int, float)) else shown == str(value), name


def test_a_diverged_run_ends_in_one_line_with_its_files_kept(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["vmc", "H2", "--lr", "1e30", "--steps", "3", "--d-model", "8", "--n-layers", "1", "--final-samples",
                 "1000", "--no-exact", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "final energy is not finite" in err, err
    assert (out / "checkpoint.pt").is_file() and (out / "history.csv").is_file()


def test_resume_alone_reads_the_molecule_the_run_folder_recorded(tmp_path, capsys):
    """A run records its molecule (molecule.json); `--resume --out DIR` then needs no molecule options and
    continues the same system (the checkpoint's integrals agree). A missing or corrupt record, or --resume
    with neither molecule nor --out, ends in one line that says what to give."""
    out = tmp_path / "h2"
    args = ["vmc", "--geometry", "H 0 0 0; H 0 0 0.8", "--basis", "sto-3g", "--steps", "3", "--d-model", "8",
            "--n-layers", "1", "--final-samples", "1000", "--no-exact", "--no-progress", "--out", str(out), "--json"]
    assert main(args) == 0
    recorded = json.loads((out / "molecule.json").read_text())
    assert recorded["atom"] == "H 0 0 0; H 0 0 0.8" and recorded["basis"] == "sto-3g"
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["vmc", "--resume", "--steps", "5", "--out", str(out), "--no-progress", "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert resumed["system"] == first["system"] and resumed["steps"] == 5
    steps = [line.split(",")[0] for line in (out / "history.csv").read_text().strip().splitlines()[1:]]
    assert steps == [str(i) for i in range(5)]

    for damage, words in ((lambda p: p.write_text("{not json"), "is unreadable"),
                          (lambda p: p.unlink(), "is missing")):
        damage(out / "molecule.json")
        assert main(["vmc", "--resume", "--steps", "6", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err and "give the molecule options again" in err, err
    assert main(["vmc", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs --out" in err, err
    assert main(["vmc", "--resume", "--out", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no run in" in err, err
