"""The Hamiltonian as a sparse matrix on one N_alpha/N_beta sector (the ED test oracle).

Basis states are integers x = sum_P x_P 2^P over spin-orbitals P (conventions in
:mod:`hamiltonians.qubit`: P = 2p alpha, 2p+1 beta; |x> is the Jordan-Wigner
computational basis state, prod_{P ascending, x_P=1} a+_P |vac>). A sector's
states are sorted by that integer, ascending; this is the order of every row of
:func:`sector_basis` and of the matrices built here.

A Pauli string with flip mask f (its X/Y qubits), Z/Y mask m and n_Y Y's maps
|x> to i^{n_Y} (-1)^{popcount(x & m)} |x ^ f>. Terms are grouped by f; each group
is applied to all sector states at once and targets are found by binary search.
Targets outside the sector are dropped: H conserves N_alpha and N_beta, so the
terms of a group cancel there exactly.
"""
from __future__ import annotations

from itertools import combinations
from math import comb
from typing import TYPE_CHECKING

import numpy as np

from hamiltonians.errors import InputError
from hamiltonians.molecular import MolecularHamiltonian

if TYPE_CHECKING:
    import scipy.sparse as sp

_MAX_BITS = 62
_CHUNK = 1 << 22  # rows x terms evaluated per block, bounds temporary memory


def sector_dim(n_orbitals: int, n_alpha: int, n_beta: int) -> int:
    """Number of determinants with n_alpha alpha and n_beta beta electrons in n_orbitals."""
    return comb(n_orbitals, n_alpha) * comb(n_orbitals, n_beta)


def _spin_strings(n_orbitals: int, n_electrons: int, offset: int) -> np.ndarray:
    strings = [sum(1 << (2 * p + offset) for p in occ) for occ in combinations(range(n_orbitals), n_electrons)]
    return np.array(strings, dtype=np.int64)


def sector_states(n_orbitals: int, n_alpha: int, n_beta: int) -> np.ndarray:
    """(D,) int64 sorted sector states, bit P = occupation of spin-orbital P."""
    if not (0 <= n_alpha <= n_orbitals and 0 <= n_beta <= n_orbitals):
        raise InputError(f"sector N_alpha={n_alpha}, N_beta={n_beta} does not fit in {n_orbitals} orbitals")
    if 2 * n_orbitals > _MAX_BITS:
        raise InputError(f"{2 * n_orbitals} qubits are more than the {_MAX_BITS} a sector state can hold")
    alpha = _spin_strings(n_orbitals, n_alpha, 0)
    beta = _spin_strings(n_orbitals, n_beta, 1)
    return np.sort((alpha[:, None] | beta[None, :]).ravel())


def sector_basis(n_orbitals: int, n_alpha: int, n_beta: int) -> np.ndarray:
    """(D, 2 n_orbitals) uint8 occupations of the sector, column P = spin-orbital P.

    Rows in ascending order of sum_P x_P 2^P (see module docstring).
    """
    states = sector_states(n_orbitals, n_alpha, n_beta)
    return occupations(states, 2 * n_orbitals)


def occupations(states: np.ndarray, n_qubits: int) -> np.ndarray:
    """(D, n_qubits) uint8 bits of integer states, column P = bit P."""
    return ((states[:, None] >> np.arange(n_qubits, dtype=np.int64)) & 1).astype(np.uint8)


def group_pauli_terms(qubit_operator) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{flip mask: (Z/Y masks (T,) int64, real coefficients i^{n_Y} c (T,) float64)}."""
    groups: dict[int, tuple[list[int], list[float]]] = {}
    for term, coef in qubit_operator.terms.items():
        flip = zy = n_y = 0
        for qubit, pauli in term:
            bit = 1 << qubit
            flip |= bit if pauli in "XY" else 0
            zy |= bit if pauli in "YZ" else 0
            n_y += pauli == "Y"
        value = complex(coef) * 1j ** n_y
        assert abs(value.imag) < 1e-10, "Hamiltonian terms must give a real matrix"
        masks, coefs = groups.setdefault(flip, ([], []))
        masks.append(zy)
        coefs.append(value.real)
    return {f: (np.array(m, dtype=np.int64), np.array(c)) for f, (m, c) in groups.items()}


def _group_elements(states: np.ndarray, flip: int, masks: np.ndarray, coefs: np.ndarray):
    targets = states ^ flip
    pos = np.minimum(np.searchsorted(states, targets), len(states) - 1)
    src = np.flatnonzero(states[pos] == targets)
    vals = np.empty(len(src))
    step = max(1, _CHUNK // len(masks))
    for start in range(0, len(src), step):
        x = states[src[start:start + step]]
        parity = np.bitwise_count(x[:, None] & masks[None, :]) & 1
        vals[start:start + step] = (1.0 - 2.0 * parity) @ coefs
    keep = np.abs(vals) > 1e-13
    return pos[src[keep]], src[keep], vals[keep]


def sector_matrix(qubit_operator, states: np.ndarray) -> sp.csr_matrix:
    """(D, D) real CSR matrix <x'|O|x> of a number-conserving QubitOperator on sorted ``states``."""
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    for flip, (masks, coefs) in group_pauli_terms(qubit_operator).items():
        r, c, v = _group_elements(states, flip, masks, coefs)
        rows.append(r), cols.append(c), vals.append(v)
    d = len(states)
    matrix = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(d, d))
    return matrix.tocsr()


def sector_hamiltonian(ham: MolecularHamiltonian) -> tuple[np.ndarray, sp.csr_matrix]:
    """(occupations (D, 2n) uint8, H (D, D) real symmetric CSR incl. e_core, Hartree).

    The basis is that of :func:`sector_basis`; H[i, j] = <x_i|H|x_j> with the
    Jordan-Wigner sign convention of OpenFermion's ``get_sparse_operator``.
    """
    from hamiltonians.qubit import get_qubit_operator

    states = sector_states(ham.n_orbitals, ham.n_alpha, ham.n_beta)
    return occupations(states, ham.n_qubits), sector_matrix(get_qubit_operator(ham), states)
