"""nnqs.FCISolver inside PySCF's CASCI against PySCF's own FCI solver (JSON lines).

    python -m benchmarks.pyscf_solver [--cases N2/sto-3g H2O/sto-3g N2/6-31g:6,6 H2O/6-31g:8,8] [--threads 1]
    python -m benchmarks.pyscf_solver --quick      # H2O/STO-3G (4, 4), 30 steps (run by the test suite)

``NAME/BASIS[:ORBITALS,ELECTRONS]``: a catalog molecule in a basis, the whole space or that active
space. One record per case: both CASCI energies and their difference (mHa), the largest difference of
the two 1-RDMs, the energy contracted from the network's 1- and 2-RDMs against the solver's, <S^2>,
the dipole moment of the network's state and of FCI's (a.u.; the frozen core, the active 1-RDM and
the nuclei), and the wall time of the network's solver. Where the network's core is not the whole
sector, also the share of its weight on the core and its whole state's sampled 1-RDM against FCI's
(largest difference, largest standard error).
"""
from __future__ import annotations

import time

import numpy as np
import torch

from benchmarks.common import benchmark_parser, emit, software

CASES = ["N2/sto-3g", "H2O/sto-3g", "N2/6-31g:6,6", "H2O/6-31g:8,8"]
QUICK = {"cases": ["H2O/sto-3g:4,4"], "steps": 30}


def scf_of(case: str):
    """``(mf, n_orbitals, n_electrons)`` of a case ``NAME/BASIS[:O,E]`` (the whole space without O,E)."""
    from pyscf import gto, scf

    from hamiltonians import get_spec

    name, _, space = case.partition(":")
    molecule, _, basis = name.partition("/")
    mol = gto.M(atom=get_spec(molecule).atom, basis=basis or "sto-3g", verbose=0)
    mf = scf.RHF(mol).run()
    if space:
        n_orb, n_el = (int(x) for x in space.split(","))
    else:
        n_orb, n_el = mol.nao_nr(), mol.nelectron
    return mf, n_orb, n_el


def dipole(mc, dm1_active: np.ndarray) -> np.ndarray:
    """Dipole moment (a.u.) of the CASCI state with active 1-RDM ``dm1_active``."""
    from pyscf import scf

    core, active = mc.mo_coeff[:, : mc.ncore], mc.mo_coeff[:, mc.ncore : mc.ncore + mc.ncas]
    density = 2.0 * core @ core.T + active @ dm1_active @ active.T
    return np.asarray(scf.hf.dip_moment(mc.mol, density, unit="AU", verbose=0))


def measure(case: str, steps: int | None, threads: int) -> dict:
    from pyscf import ao2mo, mcscf

    import nnqs

    mf, n_orb, n_el = scf_of(case)
    exact = mcscf.CASCI(mf, n_orb, n_el)
    exact.verbose = 0
    exact.kernel()
    mc = mcscf.CASCI(mf, n_orb, n_el)
    mc.verbose = 0
    mc.fcisolver = nnqs.FCISolver(threads=threads, **({} if steps is None else {"steps": steps}))
    t0 = time.perf_counter()
    mc.kernel()
    wall = time.perf_counter() - t0
    nelec = mc.nelecas
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, n_orb, nelec)
    dm1_exact = exact.fcisolver.make_rdm1(exact.ci, n_orb, nelec)
    h1, e_core = mc.get_h1eff()
    h2 = ao2mo.restore(1, mc.get_h2eff(), n_orb)
    contraction = float(np.einsum("pq,pq->", h1, dm1) + 0.5 * np.einsum("pqrs,pqrs->", h2, dm2) + e_core)
    mine, theirs = dipole(mc, dm1), dipole(exact, dm1_exact)
    solver = mc.fcisolver
    sampled = {} if solver.rdm1_sampled is None else {  # the whole state's 1-RDM from samples, against FCI's
        "core_weight": solver.core_weight, "rdm1_sampled_max_difference": float(np.abs(solver.rdm1_sampled - dm1_exact).max()),
        "rdm1_sampled_max_stderr": float(solver.rdm1_stderr.max())}
    return {"benchmark": "pyscf_solver", "case": case, "active": [n_orb, n_el], "steps": mc.fcisolver.steps,
            "e_casci_nnqs": mc.e_tot, "e_casci_fci": exact.e_tot, "error_mha": 1000 * (mc.e_tot - exact.e_tot),
            "e_sampled_error_mha": 1000 * (mc.fcisolver.e_sampled - exact.e_tot),
            "rdm1_max_difference": float(np.abs(dm1 - dm1_exact).max()),
            "rdm2_energy_minus_e_tot_mha": 1000 * (contraction - mc.e_tot),
            "s2": float(mc.fcisolver.spin_square(mc.ci, n_orb, nelec)[0]),
            "dipole_au": mine.tolist(), "dipole_fci_au": theirs.tolist(),
            "dipole_difference_au": float(np.linalg.norm(mine - theirs)), "wall_s": wall, "threads": threads,
            **sampled, **software()}


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser("pyscf_solver", __doc__, "H2O/STO-3G (4, 4), 30 steps")
    parser.add_argument("--cases", nargs="+", default=CASES)
    parser.add_argument("--steps", type=int, default=None, help="VMC steps per solver call (default: nnqs vmc's)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.quick:
        args.cases, args.steps = QUICK["cases"], QUICK["steps"]
    torch.set_num_threads(args.threads)
    for case in args.cases:
        emit(measure(case, args.steps, args.threads), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
