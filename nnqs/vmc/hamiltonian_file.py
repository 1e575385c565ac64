"""``hamiltonian.npz``: the integrals a run works in, kept in its folder so that a resumed run works in
the same ones.

The orbitals' signs (and, where orbitals are degenerate, their rotation) are not fixed by the molecule:
PySCF's SCF and Boys localization return whichever the arithmetic of a machine gives. Two builds of H10
at 1.5 A in localized orbitals, a day and a fresh install apart, gave the same spectrum and integrals that
differ by orbital signs; the saved teacher's energy, -4.99540 Ha in the run, is -4.79343 Ha with the
rebuilt integrals. A network and a teacher are tied to the sign convention they were trained in, so a
resumed run takes the run's own integrals from this file (the checkpoint's fingerprint still checks
them); a folder without it (written before the file existed) rebuilds them as before.
"""
from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from hamiltonians import MolecularHamiltonian, MoleculeSpec
from nnqs.common.atomic import atomic_write_bytes
from nnqs.common.errors import UserError

FILE = "hamiltonian.npz"
FORMAT = 1
_SIZES = ("n_orbitals", "n_alpha", "n_beta", "n_core")


def save_hamiltonian(path: str | Path, spec: MoleculeSpec, ham: MolecularHamiltonian, orbitals: dict) -> None:
    """Write ``ham`` (with ``orbitals``, what the run records of its orbital choice, and the key of the
    ``spec`` it was built for) to ``path``, atomically."""
    arrays = {
        "format": np.array(FORMAT), "spec_key": np.array(spec.key()), "description": np.array(ham.description),
        "reference": np.array(ham.reference), "orbitals": np.array(json.dumps(orbitals, sort_keys=True)),
        "h1e": ham.h1e, "eri": ham.eri, "e_core": np.array(ham.e_core),
        "e_hf": np.array(np.nan if ham.e_hf is None else ham.e_hf),
        **{name: np.array(getattr(ham, name)) for name in _SIZES},
    }  # fmt: skip
    if ham.mo_coeff is not None:
        arrays["mo_coeff"] = ham.mo_coeff
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, lambda fh: fh.write(buffer.getvalue()))


def load_hamiltonian(path: str | Path, spec: MoleculeSpec) -> tuple[MolecularHamiltonian, dict]:
    """The Hamiltonian and orbital record :func:`save_hamiltonian` wrote to ``path``; a UserError in one
    line when the file is damaged or was written for another molecule than ``spec``."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            fields = {name: data[name] for name in data.files}
        if int(fields["format"]) != FORMAT:
            raise ValueError(f"format {int(fields['format'])}, this version reads {FORMAT}")
        sizes = {name: int(fields[name]) for name in _SIZES}
        n = sizes["n_orbitals"]
        h1e, eri = fields["h1e"].astype(np.float64), fields["eri"].astype(np.float64)
        if h1e.shape != (n, n) or eri.shape != (n, n, n, n):
            raise ValueError(f"integrals of shape {h1e.shape} and {eri.shape} for {n} orbitals")
        if not (np.isfinite(h1e).all() and np.isfinite(eri).all() and np.isfinite(float(fields["e_core"]))):
            raise ValueError("integrals that are not finite")
        if not 0 <= sizes["n_beta"] <= sizes["n_alpha"] <= n:
            raise ValueError(f"{sizes['n_alpha']}a+{sizes['n_beta']}b electrons in {n} orbitals")
        orbitals = json.loads(str(fields["orbitals"]))
        if not isinstance(orbitals, dict):
            raise ValueError("no record of the orbitals")
        spec_key, description = str(fields["spec_key"]), str(fields["description"])
        e_hf = float(fields["e_hf"])
        mo_coeff = fields["mo_coeff"].astype(np.float64) if "mo_coeff" in fields else None
        ham = MolecularHamiltonian(
            h1e=h1e, eri=eri, e_core=float(fields["e_core"]), n_orbitals=n, n_alpha=sizes["n_alpha"],
            n_beta=sizes["n_beta"], description=description, e_hf=None if np.isnan(e_hf) else e_hf,
            reference=str(fields["reference"]), mo_coeff=mo_coeff, n_core=sizes["n_core"])
    except (OSError, KeyError, ValueError, TypeError, AssertionError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"{path} is damaged ({str(exc)[:80] or type(exc).__name__}); delete it to rebuild the "
                        "integrals from the molecule (the checkpoint then checks them)") from None
    if spec_key != spec.key():
        raise UserError(f"{path} is for another system ({description[:80]}); resume with the run's own "
                        "molecule (its molecule.json)")
    return ham, orbitals


def folder_hamiltonian(folder: str | Path, spec: MoleculeSpec) -> tuple[MolecularHamiltonian, dict]:
    """The integrals the run in ``folder`` worked in and the record of its orbitals, for tools that read a
    finished run: its saved file, or for a folder from before it, ``spec`` rebuilt in the orbitals its
    ``result.json`` names (canonical without one), whose signs may differ from the run's on another machine
    (this machine's cache of the integrals gives the run's own)."""
    from hamiltonians import build_hamiltonian

    folder = Path(folder)
    if (folder / FILE).is_file():
        return load_hamiltonian(folder / FILE, spec)
    result = folder / "result.json"
    chosen = json.loads(result.read_text()).get("orbitals", "canonical") if result.is_file() else "canonical"
    return build_hamiltonian(dataclasses.replace(spec, orbitals=chosen)), {"orbitals": chosen}
