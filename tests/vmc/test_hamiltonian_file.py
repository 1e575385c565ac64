"""``hamiltonian.npz``: a run keeps the integrals it works in, and a resumed run works in those, even where a
rebuild of the same molecule comes out in other orbital signs (as on another machine)."""
import csv
import json
import signal
from pathlib import Path

import numpy as np
import pytest

import nnqs.vmc.run as run_module
from fault_support import fork_cli, signal_after_rows
from hamiltonians import MolecularHamiltonian, build_hamiltonian, get_spec
from nnqs.cli import main
from nnqs.common.errors import UserError
from nnqs.vmc.hamiltonian_file import FILE, load_hamiltonian, save_hamiltonian
from nnqs.vmc.orbitals import hamiltonian_for

STEPS = 16
WALL = {"t_sample", "t_local", "t_grad"}


def argv(out: Path, *extra: str) -> list[str]:
    return ["vmc", "H2", "--basis", "6-31g", "--steps", str(STEPS), "--d-model", "16", "--n-layers", "1",
            "--pretrain-steps", "0", "--final-samples", "10000", "--no-exact", "--threads", "1",
            "--checkpoint-every", "5", "--no-progress", "--out", str(out), *extra]


def history(out: Path) -> list[dict]:
    with open(out / "history.csv", newline="") as fh:
        return [{k: v for k, v in row.items() if k not in WALL} for row in csv.DictReader(fh)]


def flipped(ham: MolecularHamiltonian) -> MolecularHamiltonian:
    """``ham`` with orbital 0's sign flipped: the same spectrum, other integrals (another machine's SCF)."""
    d = np.ones(ham.n_orbitals)
    d[0] = -1.0
    eri = np.einsum("p,q,r,s,pqrs->pqrs", d, d, d, d, ham.eri)
    mo = None if ham.mo_coeff is None else ham.mo_coeff * np.concatenate([np.ones(ham.n_core), d])
    return MolecularHamiltonian(h1e=d[:, None] * ham.h1e * d[None, :], eri=eri, e_core=ham.e_core,
                                n_orbitals=ham.n_orbitals, n_alpha=ham.n_alpha, n_beta=ham.n_beta,
                                description=ham.description, e_hf=ham.e_hf, reference=ham.reference,
                                mo_coeff=mo, n_core=ham.n_core)


def test_the_file_gives_back_the_hamiltonian_and_refuses_another_molecule(tmp_path):
    spec = get_spec("LiH")
    ham, orbitals = hamiltonian_for(spec, "canonical", 1e-4)
    path = tmp_path / FILE
    save_hamiltonian(path, spec, ham, orbitals)
    back, record = load_hamiltonian(path, spec)
    assert record == orbitals == {"orbitals": "canonical"}
    assert np.array_equal(back.h1e, ham.h1e) and np.array_equal(back.eri, ham.eri)
    assert np.array_equal(back.mo_coeff, ham.mo_coeff)
    for name in ("e_core", "n_orbitals", "n_alpha", "n_beta", "n_core", "e_hf", "reference", "description"):
        assert getattr(back, name) == getattr(ham, name), name
    with pytest.raises(UserError, match="is for another system"):
        load_hamiltonian(path, get_spec("H2"))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "no eri", "wrong shape", "not finite", "empty"])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, damage):
    spec = get_spec("H2")
    ham = build_hamiltonian(spec)
    path = tmp_path / FILE
    save_hamiltonian(path, spec, ham, {"orbitals": "canonical"})
    if damage in ("truncated", "garbage", "empty"):
        data = path.read_bytes()
        path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"\x00nnqs" * 50, "empty": b""}[damage])
    else:
        with np.load(path) as f:
            fields = {k: f[k] for k in f.files}
        if damage == "no eri":
            del fields["eri"]
        elif damage == "wrong shape":
            fields["eri"] = fields["eri"][:1]
        else:
            fields["h1e"] = fields["h1e"] * np.nan
        with open(path, "wb") as fh:
            np.savez(fh, **fields)
    with pytest.raises(UserError) as info:
        load_hamiltonian(path, spec)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "is damaged" in message, message


def test_a_resumed_run_works_in_its_own_integrals_where_a_rebuild_differs(tmp_path, capsys, monkeypatch):
    """Killed at step 12 (checkpoint at 10) and resumed where the molecule's integrals now come out with one
    orbital's sign flipped: the resumed run takes the saved integrals and its history is the uninterrupted
    run's. Without the file the same resume is refused in one line (the checkpoint's fingerprint)."""
    reference = tmp_path / "reference"
    assert main(argv(reference)) == 0
    assert (reference / FILE).is_file()

    def rebuilt_elsewhere(*args, **kwargs):
        ham, orbitals = hamiltonian_for(*args, **kwargs)
        return flipped(ham), orbitals

    for keep in (True, False):
        out = tmp_path / f"run_{keep}"
        assert signal_after_rows(fork_cli(argv(out)), out / "history.csv", 12, signal.SIGKILL) == -signal.SIGKILL
        if not keep:
            (out / FILE).unlink()
        capsys.readouterr()
        with monkeypatch.context() as patch:
            patch.setattr(run_module, "hamiltonian_for", rebuilt_elsewhere)
            code = main(argv(out, "--resume"))
        err = capsys.readouterr().err.strip()
        if keep:
            assert code == 0, err
            assert history(out) == history(reference)
            energy = json.loads((out / "result.json").read_text())["energy"]
            assert energy == pytest.approx(json.loads((reference / "result.json").read_text())["energy"], rel=1e-13)
        else:
            assert code == 2 and len(err.splitlines()) == 1 and "is for another system" in err, err
            assert not (out / FILE).exists()  # a resume saves no integrals of its own


def test_tools_read_a_finished_run_in_its_saved_integrals(tmp_path):
    """``folder_hamiltonian``: the saved file where there is one (here a flipped gauge, as another machine's),
    else the molecule rebuilt in the orbitals ``result.json`` names."""
    from nnqs.vmc.hamiltonian_file import folder_hamiltonian

    spec = get_spec("LiH")
    ham = build_hamiltonian(spec)
    (tmp_path / "result.json").write_text(json.dumps({"orbitals": "canonical"}))
    assert np.array_equal(folder_hamiltonian(tmp_path, spec)[0].h1e, ham.h1e)
    save_hamiltonian(tmp_path / FILE, spec, flipped(ham), {"orbitals": "canonical"})
    saved, record = folder_hamiltonian(tmp_path, spec)
    assert record == {"orbitals": "canonical"}
    assert np.array_equal(saved.h1e, flipped(ham).h1e) and not np.array_equal(saved.h1e, ham.h1e)
