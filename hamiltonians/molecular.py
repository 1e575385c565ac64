"""The molecular Hamiltonian in an orthonormal MO basis, as plain arrays (no PySCF here).

    H = e_core + sum_pq h1e[p,q] E_pq + 1/2 sum_pqrs eri[p,q,r,s] (E_pq E_rs - delta_qr E_ps)

with E_pq = sum_sigma a+_{p sigma} a_{q sigma} over spatial orbitals, ``eri`` in
chemists' notation (pq|rs), full 4-index, real orbitals. Units: Hartree.
Every source of integrals (PySCF, FCIDUMP, OpenFermion) produces this one type;
this module imports none of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hamiltonians.errors import InputError


@dataclass(frozen=True, eq=False)
class MolecularHamiltonian:
    """Integrals of a molecule in an MO basis (active space if any); energies in Hartree.

    h1e: (n, n) float64; eri: (n, n, n, n) float64 chemists' (pq|rs);
    e_core: nuclear repulsion + frozen-core energy; e_hf: SCF energy (for FCIDUMP
    input, the energy of the determinant filling the lowest orbitals).
    """

    h1e: np.ndarray
    eri: np.ndarray
    e_core: float
    n_orbitals: int
    n_alpha: int
    n_beta: int
    description: str
    e_hf: float | None
    reference: str = "RHF"
    # The orbitals (AO x MO, PySCF's mo_coeff layout) the integrals are in, for a geometry: the first
    # n_core columns are the frozen core, the next n_orbitals the active ones (None for other sources).
    mo_coeff: np.ndarray | None = None
    n_core: int = 0

    def __post_init__(self) -> None:
        n = self.n_orbitals
        assert self.h1e.shape == (n, n) and self.eri.shape == (n, n, n, n)
        assert 0 <= self.n_beta <= self.n_alpha <= n

    @property
    def n_qubits(self) -> int:
        """Number of spin-orbitals, 2 * n_orbitals."""
        return 2 * self.n_orbitals

    @property
    def n_electrons(self) -> int:
        """N_alpha + N_beta."""
        return self.n_alpha + self.n_beta


def determinant_energy(h1e: np.ndarray, eri: np.ndarray, e_core: float, n_alpha: int, n_beta: int) -> float:
    """Energy (Hartree) of the determinant filling orbitals 0..n_alpha-1 (alpha), 0..n_beta-1 (beta)."""
    coulomb = np.einsum("iijj->ij", eri)   # (ii|jj)
    exchange = np.einsum("ijji->ij", eri)  # (ij|ji)
    na, nb = slice(0, n_alpha), slice(0, n_beta)
    energy = e_core + np.trace(h1e[na, na]) + np.trace(h1e[nb, nb])
    for occ in (na, nb):
        energy += 0.5 * (coulomb[occ, occ].sum() - exchange[occ, occ].sum())
    energy += coulomb[na, nb].sum()
    return float(energy)


def freeze_core(h1e: np.ndarray, eri: np.ndarray, e_core: float, n_core: int,
                n_active: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Fold ``n_core`` doubly occupied orbitals into (h1e, eri, e_core) of the next ``n_active``.

    Works in the MO basis. Returns (h1e (a, a), eri (a,)*4, e_core). Kept for FCIDUMP input, which has
    no AO basis or SCF object for mcscf.CASCI; test_integrals checks it equals CASCI's get_h1eff/get_h2eff.
    """
    c, act = np.arange(n_core), slice(n_core, n_core + n_active)
    j_core = np.einsum("pqii->pq", eri[:, :, c][:, :, :, c])
    k_core = np.einsum("piiq->pq", eri[:, c][:, :, c])
    e_frozen = 2 * h1e[c, c].sum() + 2 * j_core[c, c].sum() - k_core[c, c].sum()
    h_eff = h1e + 2 * j_core - k_core
    return h_eff[act, act].copy(), eri[act, act, act, act].copy(), float(e_core + e_frozen)


def core_and_active(active: tuple[int, int] | None, n_mo: int, n_electrons: int, what: str) -> tuple[int, int]:
    """(n_core, n_active) orbitals of an active space (n_orbitals, n_electrons) over ``n_mo`` orbitals.

    The core is the lowest (N - n_electrons)/2 orbitals; InputError if the active orbitals do not fit.
    """
    if active is None:
        return 0, n_mo
    n_act, n_el = active
    n_core = (n_electrons - n_el) // 2
    if n_core + n_act > n_mo:
        raise InputError(f"active space: {n_act} orbitals above a core of {n_core} do not fit in "
                         f"the {n_mo} molecular orbitals of {what}")
    return n_core, n_act
