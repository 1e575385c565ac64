"""All reference energies of one system in one call, cached on disk.

``exact_references(spec, method)`` returns HF, CCSD, CCSD(T) (PySCF, same
orbitals and frozen core as the Hamiltonian; None for FCIDUMP input or where
CC does not apply) and the exact energy by ``method``, with the sizes of the
problem. A second call with the same spec reads everything from the cache.
For ``method="dmrg"`` (block2, :mod:`hamiltonians.dmrg`) ``e_exact`` is the energy
extrapolated to zero discarded weight and ``dmrg`` holds the sweeps, the energy at the
largest bond dimension and the fit; the cache entry is keyed by the DMRG settings.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

from collections.abc import Callable

from hamiltonians import cache as _cache
from hamiltonians.dmrg import DmrgResult, DmrgSettings, Sweep, dmrg_energy, import_block2
from hamiltonians.errors import memory_guard
from hamiltonians.exact import check_size, exact_energy
from hamiltonians.integrals import build_hamiltonian_and_scf, estimate_size
from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.sector import sector_dim
from hamiltonians.sizes import LARGE_WAY_OUT, Size, check_dmrg
from hamiltonians.spec import MoleculeSpec


@dataclass(frozen=True)
class References:
    """Reference energies (Hartree) and sizes of one system; ``wall_s`` is this call's time."""

    name: str | None
    description: str
    reference: str          # orbitals: RHF, ROHF or FCIDUMP
    n_orbitals: int
    n_qubits: int
    n_alpha: int
    n_beta: int
    sector_dim: int
    e_core: float
    e_hf: float | None
    e_ccsd: float | None
    e_ccsd_t: float | None
    e_exact: float
    method: str
    wall_s: float
    from_cache: bool
    dmrg: dict | None = None  # DmrgResult.to_dict() for method "dmrg"

    def to_dict(self) -> dict:
        """JSON-ready dict of all fields."""
        return asdict(self)


def coupled_cluster(mf, ham: MolecularHamiltonian) -> tuple[float | None, float | None]:
    """(E_CCSD, E_CCSD(T)) in Hartree with ``ham``'s frozen orbitals, or (None, None).

    RHF orbitals give RCCSD(T); ROHF orbitals give UCCSD(T) on that reference.
    None where CC does not apply (fewer than 2 correlated electrons, no virtual
    orbitals) or does not converge in 300 iterations.
    """
    from pyscf import cc

    if ham.n_electrons < 2 or ham.n_alpha == ham.n_orbitals:
        return None, None
    n_mo = mf.mo_coeff.shape[1]
    n_core = (mf.mol.nelectron - ham.n_electrons) // 2
    frozen = list(range(n_core)) + list(range(n_core + ham.n_orbitals, n_mo))
    solver = cc.CCSD(mf, frozen=frozen or None)
    # 300 iterations: N2/6-31G at 2.2 A needs about 60 (PySCF's default is 50)
    solver.verbose, solver.conv_tol, solver.max_cycle = 0, 1e-10, 300
    try:
        solver.kernel()
        if not solver.converged:
            return None, None
        return float(solver.e_tot), float(solver.e_tot + solver.ccsd_t())
    except (ValueError, RuntimeError, ArithmeticError):
        return None, None


def _stored(key: str, cache: bool) -> dict:
    hit = _cache.load(key, "refs") if cache else None
    if hit is None:
        return {}
    stored = hit[0]
    numbers = [stored.get("e_ccsd"), stored.get("e_ccsd_t"), *stored.get("exact", {}).values()]
    ok = "e_ccsd" in stored and isinstance(stored.get("exact"), dict)
    return stored if ok and all(x is None or (isinstance(x, float) and math.isfinite(x)) for x in numbers) else {}


def _dmrg_stored(key: str, settings: DmrgSettings, cache: bool) -> DmrgResult | None:
    hit = _cache.load(key, settings.name) if cache else None
    try:
        return DmrgResult.from_dict(hit[0]) if hit else None
    except (KeyError, TypeError, ValueError):
        return None


def _exact(ham: MolecularHamiltonian, method: str, known: float | None, key: str, cache: bool,
           settings: DmrgSettings, threads: int | None,
           progress: Callable[[Sweep], None] | None) -> tuple[float, dict | None, bool]:
    """(exact energy, DMRG details or None, whether it came from the cache); ``known``: the cached energy."""
    if method != "dmrg":
        return (known, None, True) if known is not None else (exact_energy(ham, method), None, False)
    result = _dmrg_stored(key, settings, cache)
    hit = result is not None
    if result is None:
        result = dmrg_energy(ham, settings, threads=threads, progress=progress)
        if cache:
            _cache.save(key, settings.name, result.to_dict())
    return result.energy_extrapolated, result.to_dict(), hit


def exact_references(spec: MoleculeSpec, method: str = "fci", cache: bool = True,
                     dmrg: DmrgSettings | None = None, threads: int | None = None,
                     progress: Callable[[Sweep], None] | None = None) -> References:
    """HF, CCSD, CCSD(T) and exact (``fci``, ``ed`` or ``dmrg``) energies of ``spec``, with sizes;
    ``method="none"``: no exact energy (``e_exact`` None), for systems too large for any.

    Raises InputError if the system is too large for ``method``, before any SCF
    (:mod:`hamiltonians.sizes`), or if ``dmrg`` is asked and block2 is not installed;
    OutOfMemory if memory runs out all the same. ``dmrg``: the DMRG settings (default
    bond dimension if None); ``threads`` (DMRG only): default OMP_NUM_THREADS;
    ``progress`` (DMRG only): called after each sweep.
    """
    start = time.perf_counter()
    key = spec.key()
    settings = dmrg or DmrgSettings()
    slot = settings.name if method == "dmrg" else method
    if method == "dmrg":
        import_block2()
        check_dmrg(estimate_size(spec), settings.bond_dim)
    stored = _stored(key, cache)
    need_scf = not stored and spec.fcidump is None
    ham, mf = build_hamiltonian_and_scf(spec, cache=cache, need_scf=need_scf,
                                        method=None if method in ("dmrg", "none") else method)
    if method == "none":
        pass
    elif method == "dmrg":
        check_dmrg(Size(ham.description, ham.n_orbitals, ham.n_orbitals, ham.n_alpha, ham.n_beta), settings.bond_dim)
    else:
        check_size(ham, method)
    with memory_guard(f"the references of {ham.description}", LARGE_WAY_OUT):
        if not stored:
            e_ccsd, e_ccsd_t = coupled_cluster(mf, ham) if mf is not None else (None, None)
            stored = {"e_ccsd": e_ccsd, "e_ccsd_t": e_ccsd_t, "exact": {}}
        if method == "none":
            e_exact, details, from_cache = None, None, False
        else:
            e_exact, details, from_cache = _exact(ham, method, stored["exact"].get(slot), key, cache, settings,
                                                  threads, progress)
            stored["exact"][slot] = e_exact
    if cache:
        _cache.save(key, "refs", stored)
    return References(
        name=spec.name, description=ham.description, reference=ham.reference, n_orbitals=ham.n_orbitals,
        n_qubits=ham.n_qubits, n_alpha=ham.n_alpha, n_beta=ham.n_beta,
        sector_dim=sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta), e_core=ham.e_core, e_hf=ham.e_hf,
        e_ccsd=stored["e_ccsd"], e_ccsd_t=stored["e_ccsd_t"], e_exact=e_exact,
        method=method, wall_s=time.perf_counter() - start, from_cache=from_cache, dmrg=details)
