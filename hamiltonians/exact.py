"""Reference energies: HF, CCSD, CCSD(T) and the exact ground state of a sector.

The exact energy is the lowest eigenvalue of H among states with the requested
N_alpha, N_beta and total spin S = (N_alpha - N_beta)/2, computed two ways that
must agree: ``fci`` (PySCF's direct_spin1 FCI solver on h1e/eri) and ``ed``
(sparse Jordan-Wigner matrix on the N_alpha/N_beta sector, SciPy eigensolver).
Both check <S^2> of the state found; if it belongs to another spin (possible
for stretched or multireference molecules), a penalty shift(S^2 - S(S+1))
pushes the other spins up and the state is searched again. Units: Hartree.
"""
from __future__ import annotations

import numpy as np

from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.sector import sector_matrix, sector_states
from hamiltonians.sizes import ED_MAX_BYTES, ED_MAX_DIM, FCI_MAX_DIM, Size, check_method, ed_memory_bytes

__all__ = ["ED_MAX_BYTES", "ED_MAX_DIM", "FCI_MAX_DIM", "METHODS", "check_size", "ed_energy", "ed_memory_bytes",
           "exact_energy", "fci_energy"]

METHODS = ("fci", "ed", "dmrg")
_DENSE_MAX_DIM = 2000
_SPIN_TOL = 1e-5


def check_size(ham: MolecularHamiltonian, method: str) -> None:
    """Raise InputError if ``method`` cannot handle the sector of ``ham`` (limits in :mod:`hamiltonians.sizes`)."""
    check_method(Size(ham.description, ham.n_orbitals, ham.n_orbitals, ham.n_alpha, ham.n_beta), method)


def _target_s2(ham: MolecularHamiltonian) -> float:
    s = 0.5 * (ham.n_alpha - ham.n_beta)
    return s * (s + 1)


def fci_energy(ham: MolecularHamiltonian) -> float:
    """Lowest energy of the requested spin from PySCF FCI on (h1e, eri); Hartree."""
    from pyscf.fci import addons, direct_spin1, spin_op

    n, nelec, target = ham.n_orbitals, (ham.n_alpha, ham.n_beta), _target_s2(ham)
    solver = direct_spin1.FCI()
    solver.verbose, solver.conv_tol, solver.max_cycle = 0, 1e-12, 300
    for shift in (None, 0.5, 5.0):
        if shift is not None:
            solver = addons.fix_spin_(direct_spin1.FCI(), shift=shift, ss=target)
            solver.verbose, solver.conv_tol, solver.max_cycle = 0, 1e-12, 300
        _, ci = solver.kernel(ham.h1e, ham.eri, n, nelec, ecore=ham.e_core)
        if abs(spin_op.spin_square(ci, n, nelec)[0] - target) < _SPIN_TOL:
            return float(direct_spin1.energy(ham.h1e, ham.eri, ci, n, nelec) + ham.e_core)
    raise RuntimeError(f"FCI found no state with S(S+1)={target} for {ham.description}")


def lowest_eigenpair(matrix) -> tuple[float, np.ndarray]:
    """The lowest eigenvalue and its vector of a sparse symmetric ``matrix``: dense below
    ``_DENSE_MAX_DIM``, else Lanczos from a seeded start (reproducible)."""
    dim = matrix.shape[0]
    if dim <= _DENSE_MAX_DIM:
        w, v = np.linalg.eigh(matrix.toarray())
        return float(w[0]), v[:, 0]
    from scipy.sparse.linalg import eigsh

    v0 = np.random.default_rng(0).standard_normal(dim)
    w, v = eigsh(matrix, k=1, which="SA", v0=v0, tol=1e-13)
    return float(w[0]), v[:, 0]


def ed_energy(ham: MolecularHamiltonian) -> float:
    """Lowest energy of the requested spin by sparse ED on the N_alpha/N_beta sector; Hartree."""
    import scipy.sparse as sp

    from hamiltonians.qubit import get_qubit_operator, get_s_squared_qubit_operator

    states = sector_states(ham.n_orbitals, ham.n_alpha, ham.n_beta)
    h = sector_matrix(get_qubit_operator(ham), states)
    s2 = sector_matrix(get_s_squared_qubit_operator(ham.n_orbitals), states)
    target = _target_s2(ham)
    penalty = s2 - target * sp.identity(len(states), format="csr")
    for shift in (0.0, 0.5, 5.0):
        _, v = lowest_eigenpair(h + shift * penalty if shift else h)
        if abs(v @ (s2 @ v) - target) < _SPIN_TOL:
            return float(v @ (h @ v))
    raise RuntimeError(f"ED found no state with S(S+1)={target} for {ham.description}")


def exact_energy(ham: MolecularHamiltonian, method: str = "fci") -> float:
    """Exact ground energy (Hartree) of ``ham``'s sector and spin by ``fci``, ``ed`` or ``dmrg``
    (block2 at the default bond dimension, extrapolated to zero discarded weight; :mod:`hamiltonians.dmrg`)."""
    check_size(ham, method)
    if method == "dmrg":
        from hamiltonians.dmrg import dmrg_energy

        return dmrg_energy(ham).energy_extrapolated
    return fci_energy(ham) if method == "fci" else ed_energy(ham)
