"""DMRG ground-state energies beyond FCI's reach, through block2 (optional extra ``.[dmrg]``).

The Hamiltonian is the project's own :class:`MolecularHamiltonian` (h1e, eri in chemists'
notation, e_core), so active spaces, frozen cores and FCIDUMP input all work. block2 runs in
its spin-adapted SU(2) mode with N = n_alpha + n_beta electrons and 2S = n_alpha - n_beta:
the same state as ``--method fci`` (lowest energy of that N_alpha/N_beta sector and spin S).
No point-group symmetry is used (the sector ground state may be in any irrep); orbitals are
reordered by block2's Fiedler ordering unless ``reorder=False``.

Sweep schedule for ``bond_dim`` M (two-site DMRG, 12 sweeps, fixed; :func:`schedule`):

    sweeps  1-2   M/4   noise 1e-4   (warm-up from a random MPS biased to the HF occupations)
    sweeps  3-4   M/2   noise 1e-5
    sweeps  5-8   M     noise 1e-5, 1e-5, 0, 0
    sweeps  9-10  3M/4  noise 0      (reverse schedule, for the extrapolation)
    sweeps 11-12  M/2   noise 0

The energy at M is that of sweep 8 (variational). The extrapolated energy is the intercept
of a straight line E = E0 + a * w fitted to (w, E) of the last sweep at M, 3M/4 and M/2,
w being that sweep's largest discarded weight. Energies in Hartree.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from hamiltonians.errors import InputError
from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.sizes import DMRG_DEFAULT_BOND_DIM as DEFAULT_BOND_DIM
from hamiltonians.sizes import dmrg_cost
SCHEDULE_VERSION = 1
INSTALL_HINT = ("--method dmrg needs block2, an optional extra: pip install -e '.[dmrg]' "
                "(or pip install block2)")
_FLAT_WEIGHT = 1e-12   # discarded weights all below this: the MPS is exact, nothing to extrapolate


class MissingBlock2(InputError):
    """block2 is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Sweep:
    """One DMRG sweep: its settings and outcome (energy Hartree, largest discarded weight)."""

    sweep: int
    bond_dim: int
    noise: float
    davidson_tol: float
    energy: float = float("nan")
    discarded_weight: float = float("nan")
    wall_s: float = 0.0


@dataclass(frozen=True)
class DmrgSettings:
    """What determines a DMRG result (the cache key); ``threads`` does not change it."""

    bond_dim: int = DEFAULT_BOND_DIM
    reorder: bool = True

    def __post_init__(self) -> None:
        if self.bond_dim < 8:
            raise InputError(f"--bond-dim {self.bond_dim}: use at least 8")

    @property
    def name(self) -> str:
        """Cache name, e.g. ``dmrg-M500-fiedler-s1``."""
        return f"dmrg-M{self.bond_dim}-{'fiedler' if self.reorder else 'natural'}-s{SCHEDULE_VERSION}"


@dataclass(frozen=True)
class DmrgResult:
    """Outcome of :func:`dmrg_energy`. ``energy``: variational energy at the largest bond dimension;
    ``energy_extrapolated``: the fit's value at zero discarded weight; ``extrapolation_error``:
    their difference in absolute value; ``fit``: (bond dim, discarded weight, energy) used."""

    bond_dim: int
    energy: float
    energy_extrapolated: float
    extrapolation_error: float
    fit: list[tuple[int, float, float]]
    sweeps: list[Sweep]
    reorder: bool
    threads: int
    wall_s: float
    schedule: str = field(default=f"v{SCHEDULE_VERSION}: M/4 x2, M/2 x2, M x4, 3M/4 x2, M/2 x2")

    def to_dict(self) -> dict:
        """JSON-ready dict of all fields."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> DmrgResult:
        """Inverse of :meth:`to_dict` (KeyError/TypeError on a damaged dict)."""
        data = dict(data)
        data["sweeps"] = [Sweep(**s) for s in data["sweeps"]]
        data["fit"] = [(int(m), float(w), float(e)) for m, w, e in data["fit"]]
        return DmrgResult(**data)


def schedule(bond_dim: int) -> list[Sweep]:
    """The 12 sweeps (bond dim, noise, Davidson tolerance) of the fixed schedule for ``bond_dim`` M."""
    m = bond_dim
    plan = [(m // 4, 1e-4, 1e-7)] * 2 + [(m // 2, 1e-5, 1e-8)] * 2
    plan += [(m, 1e-5, 1e-9)] * 2 + [(m, 0.0, 1e-10)] * 2
    plan += [(3 * m // 4, 0.0, 1e-10)] * 2 + [(m // 2, 0.0, 1e-10)] * 2
    return [Sweep(i + 1, max(mi, 4), noise, tol) for i, (mi, noise, tol) in enumerate(plan)]


def _fit_sweeps(sweeps: list[Sweep]) -> list[Sweep]:
    """The last sweep at M (sweep 8), 3M/4 (10) and M/2 (12)."""
    return [sweeps[7], sweeps[9], sweeps[11]]


def extrapolate(points: list[tuple[int, float, float]]) -> tuple[float, float]:
    """(E at zero discarded weight, |that - E at the largest M|) from (M, weight, E) points.

    Linear least squares E = E0 + a * w. If every weight is below 1e-12 the MPS is exact at
    these bond dimensions and E0 is the energy at the largest M.
    """
    m, w, e = (np.array(x, dtype=np.float64) for x in zip(*points))
    e_top = float(e[np.argmax(m)])
    if w.max() < _FLAT_WEIGHT or np.ptp(w) < _FLAT_WEIGHT:
        return e_top, 0.0
    _, intercept = np.polyfit(w, e, 1)
    return float(intercept), abs(float(intercept) - e_top)


def resolve_threads(threads: int | None) -> int:
    """``threads`` if given, else OMP_NUM_THREADS, else the CPUs this process may use."""
    if threads is not None:
        if threads < 1:
            raise InputError(f"--threads {threads}: use at least 1")
        return threads
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return max(1, len(os.sched_getaffinity(0)))


def import_block2():
    """(DMRGDriver, SymmetryTypes) of pyblock2, or MissingBlock2 saying how to install it."""
    try:
        from pyblock2.driver.core import DMRGDriver, SymmetryTypes
    except ImportError:
        raise MissingBlock2(INSTALL_HINT) from None
    return DMRGDriver, SymmetryTypes


def _hf_occupations(ham: MolecularHamiltonian) -> np.ndarray:
    occ = np.zeros(ham.n_orbitals)
    occ[:ham.n_alpha] += 1
    occ[:ham.n_beta] += 1
    return occ


def _driver_and_state(ham: MolecularHamiltonian, settings: DmrgSettings, threads: int, scratch: str,
                      stack_bytes: int):
    """(driver, mpo, mps) ready to sweep: SU(2) mode, orbitals reordered if asked."""
    driver_type, symmetry = import_block2()
    driver = driver_type(scratch=scratch, symm_type=symmetry.SU2, n_threads=threads, n_mkl_threads=1,
                         stack_mem=stack_bytes)
    driver.initialize_system(n_sites=ham.n_orbitals, n_elec=ham.n_electrons, spin=ham.n_alpha - ham.n_beta)
    h1e, eri, occ = ham.h1e, ham.eri, _hf_occupations(ham)
    if settings.reorder and ham.n_orbitals > 2:
        idx = np.asarray(driver.orbital_reordering(h1e, eri))
        h1e, eri, occ = h1e[np.ix_(idx, idx)], eri[np.ix_(idx, idx, idx, idx)], occ[idx]
    mpo = driver.get_qc_mpo(h1e=np.ascontiguousarray(h1e), g2e=np.ascontiguousarray(eri), ecore=ham.e_core,
                            iprint=0)
    mps = driver.get_random_mps(tag="KET", bond_dim=schedule(settings.bond_dim)[0].bond_dim, nroots=1,
                                occs=occ)
    return driver, mpo, mps


def dmrg_energy(ham: MolecularHamiltonian, settings: DmrgSettings = DmrgSettings(), threads: int | None = None,
                progress: Callable[[Sweep], None] | None = None, stack_bytes: int | None = None) -> DmrgResult:
    """Ground-state energy of ``ham``'s N and spin S by two-site SU(2) DMRG with the fixed schedule.

    ``threads``: block2's threads (default :func:`resolve_threads`; MKL inside block2 gets 1, so
    nothing is nested). ``progress`` is called after each sweep. ``stack_bytes``: block2's stack for
    renormalized operators (default the estimate of :func:`hamiltonians.sizes.dmrg_cost`, at least
    1 GiB). Scratch files go to a temporary folder (under $TMPDIR), removed at the end.
    MissingBlock2 if block2 is not installed.
    """
    start = time.perf_counter()
    if stack_bytes is None:
        stack_bytes = max(1 << 30, dmrg_cost(ham.n_orbitals, settings.bond_dim)[0])
    n_threads = resolve_threads(threads)
    plan = schedule(settings.bond_dim)
    done: list[Sweep] = []
    with tempfile.TemporaryDirectory(prefix="nnqs-dmrg-") as scratch:
        driver, mpo, mps = _driver_and_state(ham, settings, n_threads, scratch, stack_bytes)
        driver.dmrg(mpo, mps, n_sweeps=-1, bond_dims=[settings.bond_dim], noises=[0.0], thrds=[1e-10], iprint=0)
        solver = driver._dmrg  # block2's DMRG object; sweeping it one sweep at a time gives progress
        solver.me.init_environments(False)
        forward = mps.center == 0
        for index, step in enumerate(plan):
            solver.isweep = index
            energies, weight, _ = solver.sweep(forward, step.bond_dim, step.noise, step.davidson_tol)
            forward = not forward
            done.append(Sweep(step.sweep, step.bond_dim, step.noise, step.davidson_tol, float(energies[0]),
                              float(weight), time.perf_counter() - start))
            if progress is not None:
                progress(done[-1])
        solver.me.remove_partition_files()
        del solver, driver, mpo, mps
    fit = [(s.bond_dim, s.discarded_weight, s.energy) for s in _fit_sweeps(done)]
    e0, error = extrapolate(fit)
    return DmrgResult(bond_dim=settings.bond_dim, energy=done[7].energy, energy_extrapolated=e0,
                      extrapolation_error=error, fit=fit, sweeps=done, reorder=settings.reorder,
                      threads=n_threads, wall_s=time.perf_counter() - start)


def format_sweep(step: Sweep) -> str:
    """One progress line: ``dmrg sweep  5/12  M=500  E=-76.12087645  dw=3.1e-10  12.3 s``."""
    return (f"dmrg sweep {step.sweep:2d}/12  M={step.bond_dim:<5d} noise={step.noise:.0e}  "
            f"E={step.energy:.8f}  dw={step.discarded_weight:.1e}  {step.wall_s:.1f} s")
