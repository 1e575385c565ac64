"""Objects a user already holds, passed straight in: a PySCF SCF object or an OpenFermion operator.

``from_pyscf(mf, active=None, frozen=None)`` and ``from_openfermion(op, n_alpha, n_beta)`` each
return a :class:`MolecularHamiltonian`, validated: a wrong type is a TypeError; an unconverged
SCF, unrestricted orbitals, an active space that does not fit, or an operator that is not
spin-free (alpha and beta integrals differ, spins mix) is an InputError naming the problem.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from hamiltonians.errors import InputError
from hamiltonians.integrals import active_space_integrals
from hamiltonians.molecular import MolecularHamiltonian, core_and_active, determinant_energy
from hamiltonians.sizes import Size, check_integrals
from hamiltonians.spec import check_active_counts, check_active_electrons

SPIN_TOL = 1e-8  # OpenFermion drops spin-orbital coefficients below 1e-8 when it builds an operator


def _checked_scf(mf) -> None:
    from pyscf import scf

    if not isinstance(mf, scf.hf.SCF):
        raise TypeError(f"from_pyscf needs a PySCF SCF object such as scf.RHF(mol).run(), not {type(mf).__name__}")
    if not isinstance(mf, scf.hf.RHF):  # ROHF and RKS/ROKS are RHF subclasses; UHF, GHF are not
        raise InputError(f"from_pyscf: {type(mf).__name__} orbitals are not restricted; use RHF or ROHF")
    if mf.mo_coeff is None:
        raise InputError(f"from_pyscf: the {type(mf).__name__} has not been run; call mf.kernel() first")
    if not mf.converged:
        raise InputError(f"from_pyscf: the {type(mf).__name__} did not converge (mf.converged is False); "
                         "converge it first, e.g. mf = mf.newton().run()")
    if np.iscomplexobj(mf.mo_coeff):
        raise InputError("from_pyscf: complex orbitals are not supported (real integrals only)")


def _pyscf_description(mf, active: tuple[int, int] | None) -> str:
    mol = mf.mol
    formula = "".join(s + (str(c) if c > 1 else "") for s, c in Counter(mol.elements).items())
    basis = mol.basis if isinstance(mol.basis, str) else "custom basis"
    act = f", active ({active[0]}o, {active[1]}e)" if active else ""
    return f"{formula} ({basis}, charge {mol.charge}, 2S={mol.spin}{act}) from PySCF {type(mf).__name__}"


def from_pyscf(mf, active: tuple[int, int] | None = None, frozen: int | None = None) -> MolecularHamiltonian:
    """The Hamiltonian in the orbitals of a converged PySCF RHF or ROHF object ``mf``.

    ``active``: (n_orbitals, n_electrons), as ``--active`` and ``mcscf.CASCI(mf, n_orbitals,
    n_electrons)``: the lowest (N - n_electrons)/2 orbitals are a frozen, doubly occupied core,
    the next n_orbitals are kept. ``frozen``: freeze that many lowest orbitals, keep all others.
    Give at most one. Integrals by CASCI's get_h1eff/get_h2eff; energies in Hartree; ``e_hf``
    is the energy of the SCF determinant.
    """
    from pyscf import scf

    _checked_scf(mf)
    mol, n_mo = mf.mol, mf.mo_coeff.shape[1]
    if active is not None and frozen is not None:
        raise InputError("from_pyscf: give an active space or a number of frozen orbitals, not both")
    if frozen is not None:
        if isinstance(frozen, bool) or not isinstance(frozen, int) or not 0 <= 2 * frozen <= mol.nelectron - 1:
            raise InputError(f"from_pyscf: frozen={frozen!r} must be a whole number of doubly occupied orbitals "
                             f"below the {mol.nelectron} electrons")
        active = (n_mo - frozen, mol.nelectron - 2 * frozen)
    if active is not None:
        if len(active) != 2 or not all(isinstance(x, (int, np.integer)) for x in active):
            raise TypeError(f"from_pyscf: active must be (n_orbitals, n_electrons), not {active!r}")
        active = (int(active[0]), int(active[1]))
        check_active_counts(active)
        check_active_electrons(active, mol.nelectron, mol.spin)
    what = _pyscf_description(mf, active)
    n_core, n_act = core_and_active(active, n_mo, mol.nelectron, what)
    n_alpha, n_beta = (int(x) - n_core for x in mol.nelec)
    if n_alpha > n_act:
        raise InputError(f"from_pyscf: {n_alpha} alpha electrons do not fit in {n_act} orbitals of {what}")
    check_integrals(Size(what, mol.nao_nr(), n_act, n_alpha, n_beta))
    h1e, eri, e_core = active_space_integrals(mf, n_core, n_act)
    reference = "ROHF" if isinstance(mf, scf.rohf.ROHF) else "RHF"
    return MolecularHamiltonian(h1e, eri, e_core, n_act, n_alpha, n_beta, what,
                                determinant_energy(h1e, eri, e_core, n_alpha, n_beta), reference)


def _antisymmetrized(two: np.ndarray) -> np.ndarray:
    """The part of v[P,Q,R,S] that a+_P a+_Q a_R a_S sees: antisymmetric in (P,Q) and in (R,S)."""
    return two - two.transpose(1, 0, 2, 3) - two.transpose(0, 1, 3, 2) + two.transpose(1, 0, 3, 2)


def _spatial_integrals(one: np.ndarray, two: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h1e, eri chemists') read from the alpha block of ``one`` and the alpha-beta block of ``two``.

    Any representation of the same operator gives the same result: the mixed-spin element
    A[2p, 2r+1, 2s+1, 2q] of the antisymmetrized two-body tensor is (pq|rs) (see hamiltonians.qubit).
    """
    a, b = slice(0, None, 2), slice(1, None, 2)
    prsq = (two[a, b, b, a] - two[b, a, b, a].transpose(1, 0, 2, 3) - two[a, b, a, b].transpose(0, 1, 3, 2)
            + two[b, a, a, b].transpose(1, 0, 3, 2))
    return one[a, a].copy(), np.ascontiguousarray(prsq.transpose(0, 3, 1, 2))


def _check_spin_free(op, ham: MolecularHamiltonian) -> None:
    from hamiltonians.qubit import spin_orbital_tensors

    one, two = spin_orbital_tensors(ham)
    scale = max(1.0, float(np.abs(op.two_body_tensor).max(initial=0.0)))
    if np.abs(op.one_body_tensor.real - one).max() > SPIN_TOL:
        raise InputError("from_openfermion: the one-body tensor is not spin-free (alpha and beta blocks differ, "
                         "spins mix, or it is not symmetric)")
    if not np.allclose(ham.eri, ham.eri.transpose(1, 0, 2, 3), atol=SPIN_TOL * scale) or \
            not np.allclose(ham.eri, ham.eri.transpose(2, 3, 0, 1), atol=SPIN_TOL * scale):
        raise InputError("from_openfermion: the two-electron integrals lack the 8-fold symmetry of real orbitals")
    difference = np.abs(_antisymmetrized(op.two_body_tensor.real) - _antisymmetrized(two)).max()
    if difference > 4 * SPIN_TOL * scale:
        raise InputError(f"from_openfermion: the two-body tensor is not spin-free (it differs from the spin-free "
                         f"operator of its own alpha-beta integrals by {difference:.2e})")


def from_openfermion(op, n_alpha: int, n_beta: int) -> MolecularHamiltonian:
    """The Hamiltonian of an ``openfermion.InteractionOperator`` on 2n spin-orbitals (conventions of
    :mod:`hamiltonians.qubit`: 2p alpha, 2p+1 beta) with ``n_alpha`` >= ``n_beta`` electrons.

    The operator must be spin-free with real orbitals; h1e, eri and e_core (= op.constant, Hartree)
    are read from it and checked by rebuilding the operator.
    """
    from openfermion import InteractionOperator

    if not isinstance(op, InteractionOperator):
        raise TypeError(f"from_openfermion needs an openfermion.InteractionOperator, not {type(op).__name__}")
    one, two, constant = (np.asarray(x) for x in (op.one_body_tensor, op.two_body_tensor, op.constant))
    n_qubits = one.shape[0]
    if n_qubits % 2 or one.shape != (n_qubits,) * 2 or two.shape != (n_qubits,) * 4:
        raise InputError(f"from_openfermion: {n_qubits} spin-orbitals is not an alpha/beta pair per orbital")
    n = n_qubits // 2
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in (n_alpha, n_beta)):
        raise TypeError(f"from_openfermion: n_alpha and n_beta must be integers, not {n_alpha!r}, {n_beta!r}")
    if not 0 <= n_beta <= n_alpha <= n or n_alpha + n_beta < 1:
        raise InputError(f"from_openfermion: need 0 <= n_beta <= n_alpha <= {n} orbitals and at least one "
                         f"electron, got n_alpha={n_alpha}, n_beta={n_beta}")
    imaginary = max(np.abs(np.imag(x)).max(initial=0.0) for x in (one, two, constant))
    if imaginary > SPIN_TOL:
        raise InputError(f"from_openfermion: the operator has imaginary coefficients (up to {imaginary:.2e}); "
                         "real orbitals only")
    h1e, eri = _spatial_integrals(one.real, two.real)
    e_core = float(constant.real)
    ham = MolecularHamiltonian(h1e, eri, e_core, n, int(n_alpha), int(n_beta),
                               f"OpenFermion InteractionOperator ({n} orbitals)",
                               determinant_energy(h1e, eri, e_core, int(n_alpha), int(n_beta)), "InteractionOperator")
    _check_spin_free(op, ham)
    return ham
