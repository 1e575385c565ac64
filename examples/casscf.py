"""CASSCF with the network as PySCF's active-space solver, against PySCF's CASSCF with its exact solver.

    python examples/casscf.py [--steps 300] [--threads 1] [--out runs/casscf] [--quick]

N2 in 6-31G at 1.0977 Angstrom with a (6 orbitals, 6 electrons) active space (``--quick``: LiH in
6-31G with (4 orbitals, 2 electrons) and a short run). Prints both CASSCF energies, the difference in
mHa, the number of calls of each solver and the wall times; and, since CASSCF can have several
stationary points, PySCF's exact CASCI on the network's final orbitals and PySCF's exact CASSCF
started from them. Writes all of it to --out/casscf.json.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch


def casscf(mf, n_orbitals: int, n_electrons: int, solver=None):
    """A converged PySCF CASSCF (``solver``: its fcisolver, or PySCF's exact one) and the solver calls it made."""
    from pyscf import mcscf

    mc = mcscf.CASSCF(mf, n_orbitals, n_electrons)
    mc.verbose = 0
    if solver is not None:
        mc.fcisolver = solver
    calls = []
    kernel = mc.fcisolver.kernel

    def counted(*args, **kwargs):
        calls.append(1)
        return kernel(*args, **kwargs)

    mc.fcisolver.kernel = counted
    mc.kernel()
    return mc, len(calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="VMC steps of each solver call")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/casscf")
    parser.add_argument("--quick", action="store_true", help="LiH/6-31G, (4, 2), 20 steps (smoke test)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from pyscf import gto, scf

    import nnqs

    if args.quick:
        atom, basis, space, steps = "Li 0 0 0; H 0 0 1.5949", "6-31g", (4, 2), 20
    else:
        atom, basis, space, steps = "N 0 0 0; N 0 0 1.0977", "6-31g", (6, 6), args.steps
    mf = scf.RHF(gto.M(atom=atom, basis=basis, verbose=0)).run()
    t0 = time.perf_counter()
    exact, exact_calls = casscf(mf, *space)
    t1 = time.perf_counter()
    ours, our_calls = casscf(mf, *space, nnqs.FCISolver(steps=steps, threads=args.threads))
    t2 = time.perf_counter()
    from pyscf import mcscf

    at_ours = mcscf.CASCI(mf, *space)  # PySCF's exact solver on the network's final orbitals
    at_ours.verbose = 0
    at_ours.kernel(ours.mo_coeff)
    from_ours = mcscf.CASSCF(mf, *space)  # and PySCF's CASSCF started there (the stationary point ours is at)
    from_ours.verbose = 0
    from_ours.kernel(ours.mo_coeff)
    row = {"molecule": atom, "basis": basis, "active": list(space), "steps": steps,
           "e_casci_exact_on_nnqs_orbitals": at_ours.e_tot, "e_casscf_exact_from_nnqs_orbitals": from_ours.e_tot,
           "e_casscf_exact_solver": exact.e_tot, "e_casscf_nnqs": ours.e_tot, "converged": bool(ours.converged),
           "error_mha": 1000 * (ours.e_tot - exact.e_tot), "solver_calls_exact": exact_calls,
           "solver_calls_nnqs": our_calls, "wall_s_exact": t1 - t0, "wall_s_nnqs": t2 - t1}
    print(f"CASSCF{tuple(space)} {basis}: PySCF's FCI solver {exact.e_tot:.8f} Ha ({exact_calls} calls, {t1 - t0:.1f} s)")
    print(f"                nnqs.FCISolver   {ours.e_tot:.8f} Ha ({our_calls} calls, {t2 - t1:.1f} s), "
          f"{row['error_mha']:+.4f} mHa, converged: {row['converged']}")
    print(f"  PySCF's exact CASCI on the network's orbitals {at_ours.e_tot:.8f} Ha; its CASSCF from them "
          f"{from_ours.e_tot:.8f} Ha ({1000 * (ours.e_tot - from_ours.e_tot):+.4f} mHa from the network's)")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "casscf.json").write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
