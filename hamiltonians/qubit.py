"""The Jordan-Wigner qubit Hamiltonian of a MolecularHamiltonian (via OpenFermion).

Conventions (the one place they are defined; everything else refers here):

* Spin-orbitals: spin-orbital 2p is spatial orbital p with spin alpha, 2p+1 is
  orbital p with spin beta (OpenFermion's ``up_index``/``down_index``).
* Second quantization: H = e_core + sum_{PQ} t[P,Q] a+_P a_Q
  + sum_{PQRS} v[P,Q,R,S] a+_P a+_Q a_R a_S (OpenFermion ``InteractionOperator``),
  with t[(p,s),(q,s)] = h1e[p,q] and v[(p,s),(r,t),(s',t),(q,s)] = 1/2 (pq|rs):
  the 1/2 of the two-body sum is stored in v.
* Jordan-Wigner: qubit P is spin-orbital P; a+_P = Z_0 ... Z_{P-1} (X_P - i Y_P)/2,
  |1> = occupied. A computational basis state |x> (bit P of the integer
  x = sum_P x_P 2^P) is prod_{P ascending, x_P = 1} a+_P |vac> with sign +1.
  OpenFermion's ``get_sparse_operator`` orders its basis with qubit 0 as the
  MOST significant bit of the row index; convert when comparing.
"""
from __future__ import annotations

import numpy as np

from hamiltonians.molecular import MolecularHamiltonian


def spin_orbital_tensors(ham: MolecularHamiltonian) -> tuple[np.ndarray, np.ndarray]:
    """(one_body (2n, 2n), two_body (2n,)*4) in the InteractionOperator convention above.

    Built by OpenFermion's ``spinorb_from_spatial`` (as its ``MolecularData`` does), which
    zeroes coefficients below 1e-8; ED energies are unchanged (tests/hamiltonians/test_qubit.py).
    """
    from openfermion.chem.molecular_data import spinorb_from_spatial

    # OpenFermion's spatial two-body tensor is [p, r, s, q] = (pq|rs): chemists' transposed (0, 2, 3, 1).
    one, two = spinorb_from_spatial(ham.h1e, ham.eri.transpose(0, 2, 3, 1))
    return one, 0.5 * two


def get_interaction_operator(ham: MolecularHamiltonian):
    """``openfermion.InteractionOperator`` of ``ham`` (constant = e_core, Hartree)."""
    from openfermion import InteractionOperator

    one, two = spin_orbital_tensors(ham)
    return InteractionOperator(float(ham.e_core), one, two)


def get_qubit_operator(ham: MolecularHamiltonian):
    """Jordan-Wigner ``openfermion.QubitOperator`` of ``ham`` on 2 * n_orbitals qubits."""
    from openfermion import jordan_wigner

    return jordan_wigner(get_interaction_operator(ham))


def get_s_squared_qubit_operator(n_orbitals: int):
    """Jordan-Wigner total-spin operator S^2 on 2 * n_orbitals qubits (same conventions)."""
    from openfermion import jordan_wigner, s_squared_operator

    return jordan_wigner(s_squared_operator(n_orbitals))
