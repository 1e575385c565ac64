"""A MolecularHamiltonian from a MoleculeSpec: PySCF SCF + integrals, or an FCIDUMP file.

Orbitals: RHF for 2S = 0, ROHF otherwise (one set of spatial orbitals for both
spins). An active space (n_orbitals, n_electrons) keeps the lowest
(N - n_electrons)/2 orbitals doubly occupied and frozen: their energy and mean
field go into ``e_core`` and ``h1e``. Results are cached on disk by spec key.
The Hamiltonian type and its conventions live in :mod:`hamiltonians.molecular`.
"""
from __future__ import annotations

import warnings

import numpy as np

from hamiltonians import cache as _cache
from hamiltonians.errors import InputError, memory_guard
from hamiltonians.fcidump import hamiltonian_from_fcidump, read_fcidump_header
from hamiltonians.molecular import MolecularHamiltonian, core_and_active, determinant_energy, freeze_core
from hamiltonians.sizes import Size, check_integrals, check_method, gib
from hamiltonians.spec import MoleculeSpec, check_active_electrons, parse_geometry

__all__ = ["MolecularHamiltonian", "active_space_integrals", "build_hamiltonian", "build_hamiltonian_and_scf",
           "determinant_energy", "estimate_size", "freeze_core", "hamiltonian_from_scf", "make_mole", "run_scf"]


def _check_basis(spec: MoleculeSpec) -> None:
    from pyscf import gto

    symbols = {a[0].rstrip("0123456789") for a in parse_geometry(spec.atom)}
    for symbol in sorted(symbols):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gto.basis.load(spec.basis, symbol)
        except Exception:  # noqa: BLE001 - PySCF raises several types for a bad name
            raise InputError(f"unknown basis {spec.basis!r} for element {symbol}") from None


def make_mole(spec: MoleculeSpec):
    """A built, silent ``pyscf.gto.Mole`` for a geometry spec (point-group symmetry if found)."""
    from pyscf import gto

    _check_basis(spec)
    for symmetry in (True, False):
        mol = gto.Mole(atom=spec.atom, basis=spec.basis, charge=spec.charge, spin=spec.spin,
                       unit="Angstrom", symmetry=symmetry, verbose=0)
        try:
            return mol.build(dump_input=False, parse_arg=False)
        except Exception as exc:  # noqa: BLE001 - converted at this boundary
            error = exc
    raise InputError(f"PySCF cannot build {spec.describe()}: {str(error).splitlines()[0]}")


def estimate_size(spec: MoleculeSpec) -> Size:
    """The sizes of ``spec`` before any SCF: basis functions of the built Mole (cheap) or the
    FCIDUMP header's NORB, and the electrons and orbitals of the active space."""
    if spec.fcidump is not None:
        n_basis, n_alpha, n_beta = read_fcidump_header(spec.fcidump)
        if spec.active is not None:
            check_active_electrons(spec.active, n_alpha + n_beta, n_alpha - n_beta)
    else:
        mol = make_mole(spec)
        n_basis, (n_alpha, n_beta) = int(mol.nao_nr()), (int(x) for x in mol.nelec)
    n_core, n_act = core_and_active(spec.active, n_basis, n_alpha + n_beta, spec.describe())
    if n_alpha - n_core > n_act:
        raise InputError(f"{n_alpha - n_core} alpha electrons do not fit in {n_act} orbitals of {spec.describe()}")
    return Size(spec.describe(), n_basis, n_act, n_alpha - n_core, n_beta - n_core, spec.fcidump is not None)


def run_scf(spec: MoleculeSpec, mol=None):
    """Converged RHF (2S = 0) or ROHF (2S > 0) of a geometry spec; returns the PySCF object."""
    from pyscf import scf

    mol = make_mole(spec) if mol is None else mol
    if max(mol.nelec) > mol.nao_nr():
        raise InputError(f"{max(mol.nelec)} electrons of one spin do not fit in the {mol.nao_nr()} orbitals "
                         f"of {spec.describe()}")
    mf = scf.RHF(mol) if spec.spin == 0 else scf.ROHF(mol)
    mf.conv_tol = 1e-10
    mf.kernel()
    if not mf.converged:
        mf = mf.newton()
        mf.kernel()
    if not mf.converged:
        raise InputError(f"the {mf.__class__.__name__.split('With')[0]} SCF of {spec.describe()} did not converge")
    return mf


def active_space_integrals(mf, n_core: int, n_act: int, mo_coeff: np.ndarray | None = None,
                           ) -> tuple[np.ndarray, np.ndarray, float]:
    """(h1e (a, a), eri (a,)*4 chemists', e_core Hartree) of orbitals n_core..n_core+a-1 of
    ``mo_coeff`` (default: the SCF orbitals of ``mf``).

    The lower ``n_core`` orbitals are frozen, doubly occupied: PySCF's CASCI folds their energy,
    the nuclear repulsion and their mean field into e_core and h1e (``get_h1eff``, ``get_h2eff``).
    """
    from pyscf import ao2mo, mcscf

    cas = mcscf.CASCI(mf, n_act, mf.mol.nelectron - 2 * n_core)
    cas.verbose = 0
    mo = mf.mo_coeff if mo_coeff is None else mo_coeff
    h1e, e_core = cas.get_h1eff(mo)
    eri = ao2mo.restore(1, cas.get_h2eff(mo), n_act)
    return (np.ascontiguousarray(h1e, dtype=np.float64), np.ascontiguousarray(eri, dtype=np.float64),
            float(e_core))


def hamiltonian_from_scf(spec: MoleculeSpec, mf) -> MolecularHamiltonian:
    """Integrals in the SCF orbitals of ``mf``, restricted to the spec's active space."""
    mol = mf.mol
    n_core, n_act = core_and_active(spec.active, mf.mo_coeff.shape[1], mol.nelectron, spec.describe())
    n_alpha, n_beta = (int(x) - n_core for x in mol.nelec)
    if n_alpha > n_act:
        raise InputError(f"{n_alpha} alpha electrons do not fit in {n_act} orbitals of {spec.describe()}")
    mo = localized_orbitals(mf, n_core, n_alpha, n_beta, n_act) if spec.orbitals == "localized" else mf.mo_coeff
    h1e, eri, e_core = active_space_integrals(mf, n_core, n_act, mo)
    return MolecularHamiltonian(h1e=h1e, eri=eri, e_core=e_core, n_orbitals=n_act, n_alpha=n_alpha,
                                n_beta=n_beta, description=spec.describe(), e_hf=float(mf.e_tot),
                                reference="RHF" if spec.spin == 0 else "ROHF",
                                mo_coeff=np.ascontiguousarray(mo[:, :n_core + n_act], dtype=np.float64), n_core=n_core)


def localized_orbitals(mf, n_core: int, n_alpha: int, n_beta: int, n_act: int) -> np.ndarray:
    """The SCF orbitals of ``mf`` with the active ones Boys-localized within three blocks that the
    Hartree-Fock determinant does not mix: doubly occupied (``n_beta``), singly occupied
    (``n_alpha - n_beta``) and virtual; each block ordered by its orbitals' centroids along the
    molecule's longest axis. The determinant filling the lowest orbitals is still the SCF one (the
    same state, the same energy), and the space of every block is unchanged, so FCI is too."""
    from pyscf import lo

    mol, mo = mf.mol, np.array(mf.mo_coeff, dtype=np.float64)
    coords = mol.atom_coords()
    axis = np.linalg.svd(coords - coords.mean(0))[2][0] if len(coords) > 1 else np.array([0.0, 0.0, 1.0])
    dipole = np.einsum("x,xij->ij", axis, mol.intor("int1e_r"))  # position along the axis (Bohr)
    start = n_core
    for size in (n_beta, n_alpha - n_beta, n_act - n_alpha):
        block = slice(start, start + size)
        if size > 1:
            local = lo.Boys(mol, mo[:, block])
            local.verbose = 0
            orbitals = local.kernel()
            centroid = np.einsum("pi,pq,qi->i", orbitals, dipole, orbitals)
            mo[:, block] = orbitals[:, np.argsort(centroid, kind="stable")]
        start += size
    return mo


def _to_cache(ham: MolecularHamiltonian) -> tuple[dict, dict]:
    meta = {k: getattr(ham, k) for k in ("e_core", "n_orbitals", "n_alpha", "n_beta", "e_hf", "reference", "n_core")}
    arrays = {"h1e": ham.h1e, "eri": ham.eri}
    if ham.mo_coeff is not None:
        arrays["mo_coeff"] = ham.mo_coeff
    return meta, arrays


def _from_cache(spec: MoleculeSpec, meta: dict, arrays: dict) -> MolecularHamiltonian | None:
    if spec.atom is not None and "mo_coeff" not in arrays:  # an entry from before the orbitals were kept
        return None
    try:
        return MolecularHamiltonian(
            h1e=arrays["h1e"].astype(np.float64), eri=arrays["eri"].astype(np.float64),
            e_core=float(meta["e_core"]), n_orbitals=int(meta["n_orbitals"]), n_alpha=int(meta["n_alpha"]),
            n_beta=int(meta["n_beta"]), description=spec.describe(),
            e_hf=None if meta["e_hf"] is None else float(meta["e_hf"]), reference=str(meta["reference"]),
            mo_coeff=None if "mo_coeff" not in arrays else arrays["mo_coeff"].astype(np.float64),
            n_core=int(meta.get("n_core", 0)))
    except Exception:  # noqa: BLE001 - a damaged entry is a miss
        return None


def build_hamiltonian(spec: MoleculeSpec, cache: bool = True) -> MolecularHamiltonian:
    """The MolecularHamiltonian of a spec, from the on-disk cache when possible.

    Geometry specs run PySCF SCF + integral transformation; FCIDUMP specs read the file.
    """
    ham, _ = build_hamiltonian_and_scf(spec, cache=cache)
    return ham


def build_hamiltonian_and_scf(spec: MoleculeSpec, cache: bool = True, need_scf: bool = False,
                              method: str | None = None):
    """(ham, mf): mf is the PySCF SCF object when it was run (or ``need_scf``), else None.

    Before any SCF or integral transform the request's size is estimated and refused with one
    line if the integrals (or the exact ``method``, when given) cannot fit.
    """
    key = spec.key()
    if cache and not need_scf:
        hit = _cache.load(key, "ham", arrays=True)
        ham = _from_cache(spec, *hit) if hit else None
        if ham is not None:
            return ham, None
    size = estimate_size(spec)
    if method is not None:
        check_method(size, method)
    check_integrals(size)
    mf = None
    with memory_guard(f"the integrals of {spec.describe()} (estimated peak {gib(size.integral_bytes)})",
                      "use a smaller --active space or basis"):
        if spec.fcidump is not None:
            ham = hamiltonian_from_fcidump(spec)
        else:
            mf = run_scf(spec)
            ham = hamiltonian_from_scf(spec, mf)
    if cache:
        _cache.save(key, "ham", *_to_cache(ham))
    return ham, mf
