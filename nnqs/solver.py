"""nnqs as a PySCF active-space solver: ``mc.fcisolver = nnqs.FCISolver()``.

PySCF's CASCI and CASSCF call ``kernel(h1e, eri, norb, nelec, ci0=None, ecore=0, **kw)`` and then
``make_rdm1``, ``make_rdm1s``, ``make_rdm12`` and ``spin_square`` of the returned state, as they do
with :class:`pyscf.fci.direct_spin1.FCI`. Here ``kernel`` runs the default VMC of ``nnqs vmc`` on the
active-space integrals (in a scratch run folder), and the state it returns is the network's vector on
its selected core, normalised there, as PySCF's ``(n_a, n_b)`` CI array
(:mod:`nnqs.vmc.civector`): its RDMs are exact for that vector (PySCF's own contractions), and the
energy returned is its Rayleigh quotient, so that energy and RDMs agree, as CASSCF's orbital gradient
needs. Where the core holds the whole sector (small active spaces) that vector is the network's
state itself; elsewhere ``solver.core_weight`` says how much of the network's weight the core holds,
``solver.e_sampled`` is the network's own energy from fresh samples (Hartree), and
``solver.rdm1_sampled`` / ``solver.rdm1_stderr`` are the whole state's spin-summed 1-RDM from fresh
samples and its elements' standard errors (:mod:`nnqs.vmc.sampled_rdm`; None where the core is the sector).

Every field of :class:`nnqs.vmc.config.VMCConfig` is an attribute (``solver.steps``, ``solver.seed``,
...). Between calls the network is kept and warm-starts the next one (CASSCF's macro-iterations); a
call on another active space starts afresh.
"""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np
import torch

from nnqs.vmc.config import VMCConfig

from nnqs.vmc.properties import CI_ARRAY_MAX as MAX_CI_ELEMENTS  # a larger PySCF CI array is refused


class FCISolver:
    """A PySCF fcisolver backed by nnqs VMC (see the module docstring)."""

    def __init__(self, verbose: bool = False, **settings) -> None:
        for f in dataclasses.fields(VMCConfig):
            setattr(self, f.name, f.default)
        self.threads = 1
        for name, value in settings.items():
            if not hasattr(self, name):
                raise ValueError(f"FCISolver: unknown setting {name!r} (the fields of nnqs.vmc.config.VMCConfig)")
            setattr(self, name, value)
        self.verbose, self.nroots, self.spin, self.wfnsym = verbose, 1, None, None  # PySCF reads the last three
        self.e_sampled = self.core_weight = self.rdm1_sampled = self.rdm1_stderr = None
        self._model: tuple | None = None  # (norb, n_alpha, n_beta), the last network's weights and core

    def dump_flags(self, verbose=None) -> "FCISolver":
        """PySCF's hook for printing a solver's settings (PySCF's wrappers call it); nothing to print."""
        return self

    def config(self) -> VMCConfig:
        """The VMC settings now on the solver's attributes."""
        return VMCConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(VMCConfig)})

    def kernel(self, h1e, eri, norb: int, nelec, ci0=None, ecore: float = 0.0, **kwargs) -> tuple[float, np.ndarray]:
        """Run VMC on the active-space Hamiltonian; return ``(e_tot, ci)`` (Hartree; ``ci``: PySCF's CI array)."""
        from nnqs.vmc.civector import to_pyscf

        if self.nroots != 1 or kwargs.get("nroots", 1) != 1:
            raise ValueError("nnqs.FCISolver solves for the ground state only (nroots = 1): state-averaged or "
                             "multi-root CASSCF/CASCI is not supported")
        ham = active_hamiltonian(h1e, eri, norb, nelec, ecore)
        nelec = (ham.n_alpha, ham.n_beta)
        configs, amplitudes = self._run_vmc(ham)
        ci = to_pyscf(configs, amplitudes, norb, nelec)
        return self.energy(ham.h1e, ham.eri, ci, norb, nelec) + ham.e_core, ci

    def _run_vmc(self, ham) -> tuple[torch.Tensor, np.ndarray]:
        """The network's core ``(M, n)`` and its normalised real amplitudes there ``(M,)``; sets
        ``e_sampled``, ``core_weight`` and, where the core is not the sector, ``rdm1_sampled`` and
        ``rdm1_stderr`` (the whole state's 1-RDM from samples and its standard errors)."""
        from hamiltonians import MoleculeSpec, write_fcidump
        from nnqs.common.checkpoint import load_checkpoint
        from nnqs.vmc.vmc_loop import KIND
        from nnqs.vmc.run import run_molecule
        from nnqs.vmc.wavefunction import TransformerWavefunction

        key = (ham.n_orbitals, ham.n_alpha, ham.n_beta)
        warm, core = self._model[1:] if self._model is not None and self._model[0] == key else (None, None)
        with tempfile.TemporaryDirectory(prefix="nnqs-solver-") as scratch:
            dump = Path(scratch) / "active.fcidump"
            write_fcidump(dump, ham)
            result = run_molecule(MoleculeSpec(name="active space", fcidump=str(dump)), self.config(), Path(scratch) / "run",
                                  init_model=warm, init_core=core, progress=self.verbose, exact=False)
            data = load_checkpoint(Path(scratch) / "run", KIND)
            sampled = result.get("properties_sampled")
            self.rdm1_sampled = self.rdm1_stderr = None
            if sampled:
                self.rdm1_sampled = np.load(Path(scratch) / "run" / "rdm1_sampled.npy")
                self.rdm1_stderr = np.load(Path(scratch) / "run" / "rdm1_stderr.npy")
        self.e_sampled, self.core_weight = float(result["energy"]), sampled["core_weight"] if sampled else 1.0
        wf = TransformerWavefunction(**data["model_config"])
        wf.load_state_dict(data["model"])
        core = data["extras"].get("core")
        if core is None:
            raise ValueError("FCISolver needs the selected core (selection 'core', the default)")
        self._model = (key, data["model"], core)
        with torch.no_grad():
            log_psi = wf.log_psi(core).to(torch.complex128)
        psi = torch.exp(log_psi - log_psi.real.max()).real.numpy()
        return core, psi / np.linalg.norm(psi)

    @staticmethod
    def energy(h1e, eri, ci: np.ndarray, norb: int, nelec) -> float:
        """``<ci|H|ci>`` without the core energy (Hartree), by PySCF's contraction."""
        from pyscf.fci import direct_spin1

        return float(direct_spin1.energy(h1e, eri, ci, norb, nelec))

    def make_rdm1(self, ci, norb: int, nelec, **kwargs) -> np.ndarray:
        """Spin-summed 1-RDM ``(norb, norb)``: ``D[p, q] = <a+_p a_q>``, PySCF's convention."""
        from pyscf.fci import direct_spin1

        return direct_spin1.make_rdm1(ci, norb, _pair(nelec, norb))

    def make_rdm1s(self, ci, norb: int, nelec, **kwargs) -> tuple[np.ndarray, np.ndarray]:
        """Alpha and beta 1-RDMs."""
        from pyscf.fci import direct_spin1

        return direct_spin1.make_rdm1s(ci, norb, _pair(nelec, norb))

    def make_rdm12(self, ci, norb: int, nelec, **kwargs) -> tuple[np.ndarray, np.ndarray]:
        """1-RDM and spin-summed 2-RDM ``(norb,)*4`` in PySCF's convention (``dm2[p,q,r,s] = <p+ r+ s q>``)."""
        from pyscf.fci import direct_spin1

        return direct_spin1.make_rdm12(ci, norb, _pair(nelec, norb))

    def spin_square(self, ci, norb: int, nelec, **kwargs) -> tuple[float, float]:
        """``(<S^2>, 2S + 1)`` of the state."""
        from pyscf.fci import spin_op

        return spin_op.spin_square0(ci, norb, _pair(nelec, norb))


def _pair(nelec, norb: int) -> tuple[int, int]:
    """``nelec`` as (N_alpha, N_beta): an int (2S = 0 or 1) or a pair; anything else is a ValueError."""
    if isinstance(nelec, (int, np.integer)):
        n = int(nelec)
        pair = ((n + 1) // 2, n // 2)
    elif isinstance(nelec, (tuple, list, np.ndarray)) and len(nelec) == 2 and all(
            isinstance(x, (int, np.integer)) for x in nelec):
        pair = (int(nelec[0]), int(nelec[1]))
    else:
        raise ValueError(f"nelec must be an int or a pair (N_alpha, N_beta) of ints, got {nelec!r}")
    if min(pair) < 0 or max(pair) > norb:
        raise ValueError(f"nelec {pair} does not fit in {norb} orbitals")
    return pair


def active_hamiltonian(h1e, eri, norb: int, nelec, ecore: float = 0.0):
    """A :class:`hamiltonians.MolecularHamiltonian` of PySCF's active-space arrays (``eri`` in any of
    PySCF's packings), checked: shapes, finite real values, Hermitian, 8-fold symmetric, size."""
    from pyscf import ao2mo
    from pyscf.fci import cistring

    from hamiltonians import MolecularHamiltonian

    if not isinstance(norb, (int, np.integer)) or norb < 1:
        raise ValueError(f"norb must be a positive int, got {norb!r}")
    n_alpha, n_beta = _pair(nelec, norb)
    size = cistring.num_strings(norb, n_alpha) * cistring.num_strings(norb, n_beta)
    if size > MAX_CI_ELEMENTS:
        raise ValueError(f"an active space of {norb} orbitals and {n_alpha + n_beta} electrons has {size:.2e} "
                         f"determinants; FCISolver holds at most {MAX_CI_ELEMENTS:.0e} as a CI array")
    h1e = np.asarray(h1e)
    if h1e.shape != (norb, norb) or not np.isrealobj(h1e) or not np.all(np.isfinite(h1e)):
        raise ValueError(f"h1e must be a finite real ({norb}, {norb}) array, got shape {h1e.shape}")
    if not np.allclose(h1e, h1e.T, atol=1e-8):
        raise ValueError(f"h1e is not symmetric (largest |h - h^T| {np.abs(h1e - h1e.T).max():.2e}): "
                         "nnqs needs real orbitals and a Hermitian Hamiltonian")
    try:
        full = ao2mo.restore(1, np.asarray(eri, dtype=np.float64), norb)
    except Exception as exc:  # noqa: BLE001 - any packing PySCF cannot read is the user's array
        raise ValueError(f"eri is not an active-space integral array of {norb} orbitals ({exc})") from None
    if not np.all(np.isfinite(full)):
        raise ValueError("eri holds non-finite values")
    for perm in ((1, 0, 2, 3), (2, 3, 0, 1)):
        if not np.allclose(full, full.transpose(perm), atol=1e-8):
            raise ValueError("eri lacks the 8-fold symmetry of real orbitals ((pq|rs) = (qp|rs) = (rs|pq))")
    if n_beta > n_alpha:
        raise ValueError(f"nelec {(n_alpha, n_beta)}: nnqs takes N_alpha >= N_beta")
    return MolecularHamiltonian(h1e=np.ascontiguousarray(h1e, dtype=np.float64), eri=full, e_core=float(ecore),
                                n_orbitals=int(norb), n_alpha=n_alpha, n_beta=n_beta,
                                description=f"active space ({norb}o, {n_alpha + n_beta}e)", e_hf=None)
