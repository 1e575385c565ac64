"""What a finished run says besides its energy: the 1-RDM of the network's vector on its core, its
natural-orbital occupations, <S^2> and, for a geometry, the dipole moment; FCI's beside them where
the sector is small enough to diagonalise. Where the core does not hold the whole sector, the 1-RDM
and the dipole moment of the network's whole state are also estimated from fresh samples, with
standard errors (:mod:`nnqs.vmc.sampled_rdm`), and the share of the state's weight on the core is
reported (``core_weight``).

The vector is the network's amplitudes on its selected core, normalised there, as PySCF's CI array
(:mod:`nnqs.vmc.civector`), so the RDM and <S^2> are PySCF's exact contractions of it. The dipole moment (atomic units, e a0) adds
PySCF's nuclear part to the electronic part of the frozen core and of the active 1-RDM, in the
orbitals the integrals were built in (``MolecularHamiltonian.mo_coeff``).
"""
from __future__ import annotations

import numpy as np
import torch

from hamiltonians import MolecularHamiltonian, MoleculeSpec
from hamiltonians.sector import sector_dim
from nnqs.vmc.civector import to_pyscf
from nnqs.vmc.sampled_rdm import SampledRDM, rdm1_estimate

FCI_PROPERTIES_MAX = 10**6  # determinants up to which FCI's RDM is computed beside the network's
CI_ARRAY_MAX = 2 * 10**8  # determinants of the largest sector held as a PySCF CI array (1.6 GB)
SAMPLED_UNIQUE_MAX = 4096  # unique configurations of the sampled 1-RDM (each costs its single moves' passes)


def core_vector(wf, core: torch.Tensor, max_batch: int = 8192) -> np.ndarray:
    """The network's real amplitudes on ``core`` ``(M, n)``, normalised there -> ``(M,)``."""
    with torch.no_grad():
        log_psi = wf.log_psi(core, chunk_size=max_batch).to(torch.complex128)
    psi = torch.exp(log_psi - log_psi.real.max()).real.cpu().numpy()
    return psi / np.linalg.norm(psi)


def rdm_properties(ci: np.ndarray, ham: MolecularHamiltonian, spec: MoleculeSpec | None) -> tuple[dict, np.ndarray]:
    """Natural occupations, <S^2> and the dipole moment of the PySCF CI array ``ci``; and its 1-RDM."""
    from pyscf.fci import direct_spin1, spin_op

    n, nelec = ham.n_orbitals, (ham.n_alpha, ham.n_beta)
    rdm1 = direct_spin1.make_rdm1(ci, n, nelec)
    out = {"natural_occupations": np.linalg.eigvalsh(rdm1)[::-1].tolist(),
           "s2": float(spin_op.spin_square0(ci, n, nelec)[0])}
    dipole = dipole_moment(rdm1, ham, spec)
    if dipole is not None:
        out.update(dipole_au=dipole.tolist(), dipole_norm_au=float(np.linalg.norm(dipole)))
    return out, rdm1


def dipole_parts(ham: MolecularHamiltonian, spec: MoleculeSpec | None) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The dipole moment (a.u.) as ``offset + sum_pq D_k[p, q] rdm1[p, q]``: ``(offset (3,), [D_x, D_y,
    D_z])``, the offset being the nuclei and the frozen core (PySCF's ``dip_moment``, origin 0); None
    without orbitals."""
    if ham.mo_coeff is None or spec is None or spec.atom is None:
        return None
    from hamiltonians.integrals import make_mole

    mol = make_mole(spec)
    with mol.with_common_orig((0, 0, 0)):
        ao = mol.intor_symmetric("int1e_r", comp=3)
    active = ham.mo_coeff[:, ham.n_core :]
    offset = dipole_moment(np.zeros((ham.n_orbitals, ham.n_orbitals)), ham, spec)
    return offset, [-(active.T @ ao[k] @ active) for k in range(3)]


def sampled_properties(wf, ham: MolecularHamiltonian, spec: MoleculeSpec | None, core: torch.Tensor, n_samples: int,
                       generator, unique_max: int = SAMPLED_UNIQUE_MAX, max_batch: int = 8192) -> tuple[dict, SampledRDM]:
    """The 1-RDM of the network's whole state from ``n_samples`` fresh samples (at most ``unique_max``
    unique ones), its natural occupations and dipole moment with standard errors, and the share of
    the state's weight on ``core``."""
    from nnqs.vmc.draws import draw

    with torch.no_grad():
        configs, counts = draw(wf, n_samples, generator, unique_max)
        ratios = wf.sampling_ratio(configs, chunk_size=max_batch)
        on_core = torch.exp(2 * wf.log_psi(core, chunk_size=max_batch).real).sum()
    norm = 1.0 if ratios is None else float((counts.double() * ratios.double()).sum() / counts.sum())
    parts = dipole_parts(ham, spec)
    est = rdm1_estimate(wf, configs, counts, ratios, functionals=None if parts is None else parts[1], chunk_size=max_batch)
    out = {"n_unique": est.n_unique, "natural_occupations": np.linalg.eigvalsh(est.rdm1)[::-1].tolist(),
           "rdm1_stderr_max": float(est.stderr.max()), "trace": float(np.trace(est.rdm1)),
           "core_weight": min(1.0, float(on_core) / norm)}
    if parts is not None:
        dipole = parts[0] + est.functionals
        out.update(dipole_au=dipole.tolist(), dipole_stderr_au=est.functional_stderr.tolist(),
                   dipole_norm_au=float(np.linalg.norm(dipole)))
    return out, est


def dipole_moment(rdm1: np.ndarray, ham: MolecularHamiltonian, spec: MoleculeSpec | None) -> np.ndarray | None:
    """``(3,)`` dipole moment (a.u.) of the active ``rdm1`` with the frozen core, or None without orbitals."""
    if ham.mo_coeff is None or spec is None or spec.atom is None:
        return None
    from pyscf import scf

    from hamiltonians.integrals import make_mole

    core, active = ham.mo_coeff[:, : ham.n_core], ham.mo_coeff[:, ham.n_core :]
    density = 2.0 * core @ core.T + active @ rdm1 @ active.T
    return np.asarray(scf.hf.dip_moment(make_mole(spec), density, unit="AU", verbose=0))


def run_properties(wf, ham: MolecularHamiltonian, spec: MoleculeSpec | None, core: torch.Tensor,
                   max_batch: int = 8192) -> tuple[dict, np.ndarray | None, dict | None]:
    """The network's properties (``rdm_properties``) and 1-RDM, and FCI's properties where the
    sector has at most :data:`FCI_PROPERTIES_MAX` determinants (else None)."""
    if sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta) > CI_ARRAY_MAX:
        return {"skipped": f"a sector of more than {CI_ARRAY_MAX:.0e} determinants is not held as a CI array"}, None, None
    ci = to_pyscf(core, core_vector(wf, core, max_batch), ham.n_orbitals, (ham.n_alpha, ham.n_beta))
    mine, rdm1 = rdm_properties(ci, ham, spec)
    fci = None
    if sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta) <= FCI_PROPERTIES_MAX:
        from pyscf.fci import direct_spin1

        solver = direct_spin1.FCI()
        solver.conv_tol, solver.verbose = 1e-10, 0
        _, fci_ci = solver.kernel(ham.h1e, ham.eri, ham.n_orbitals, (ham.n_alpha, ham.n_beta))
        fci = rdm_properties(fci_ci, ham, spec)[0]
    return mine, rdm1, fci


def plot_occupations(path, mine: list[float], fci: list[float] | None, title: str = "",
                     sampled: list[float] | None = None) -> None:
    """Natural-orbital occupations of the network on its core (its whole state's from samples, FCI's)
    on a log scale of their distance from 0 or 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    index = np.arange(1, len(mine) + 1)
    ax.semilogy(index, [max(min(v, 2 - v), 1e-12) for v in mine], "o", color="C0", label="network (its core)")
    if sampled is not None:
        ax.semilogy(index, [max(min(v, 2 - v), 1e-12) for v in sampled], "s", mfc="none", color="C1",
                    label="network (sampled)")
    if fci is not None:
        ax.semilogy(index, [max(min(v, 2 - v), 1e-12) for v in fci], "x", color="k", label="FCI")
    ax.set_xlabel("natural orbital")
    ax.set_ylabel("min(n, 2 - n)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
