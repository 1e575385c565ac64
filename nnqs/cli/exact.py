"""`nnqs exact` (reference energies of a molecule) and `nnqs molecules` (the catalog)."""
from __future__ import annotations

import argparse
import json
import sys

from hamiltonians import CATALOG, exact_references
from hamiltonians.catalog import minimal_basis_size
from hamiltonians.dmrg import DmrgSettings, format_sweep
from hamiltonians.sizes import DMRG_DEFAULT_BOND_DIM
from hamiltonians.references import References
from hamiltonians.spec import electron_count
from nnqs.cli.molecule_args import add_molecule_arguments, spec_from_args


def register(subparsers) -> None:
    """Add the `exact` and `molecules` subcommands."""
    exact = subparsers.add_parser("exact", help="HF, CCSD, CCSD(T) and exact energies of a molecule",
                                  description="HF, CCSD, CCSD(T) and exact (FCI, sparse ED or DMRG) energies, "
                                              "in Hartree, of a molecule or FCIDUMP file.")
    add_molecule_arguments(exact)
    exact.add_argument("--method", choices=("fci", "ed", "dmrg"), default="fci",
                       help="exact solver: PySCF FCI (default), sparse ED of the qubit Hamiltonian, or DMRG "
                            "(block2, optional extra: pip install -e '.[dmrg]') beyond FCI's reach")
    dmrg = exact.add_argument_group("dmrg")
    dmrg.add_argument("--bond-dim", type=int, default=DMRG_DEFAULT_BOND_DIM, metavar="M",
                      help=f"largest DMRG bond dimension (default {DMRG_DEFAULT_BOND_DIM}); 12 sweeps at "
                           "M/4, M/2, M, then 3M/4 and M/2 for the extrapolation to zero discarded weight")
    dmrg.add_argument("--no-reorder", action="store_true", help="keep the orbital order (default: Fiedler order)")
    dmrg.add_argument("--threads", type=int, metavar="N", help="DMRG threads (default $OMP_NUM_THREADS, else all CPUs)")
    exact.add_argument("--no-cache", action="store_true", help="recompute instead of using the cache")
    exact.add_argument("--json", action="store_true", help="print one JSON object")
    exact.set_defaults(func=run_exact)
    molecules = subparsers.add_parser("molecules", help="list the built-in molecules",
                                      description="The built-in molecules and their geometry sources.")
    molecules.add_argument("--json", action="store_true", help="print a JSON list")
    molecules.set_defaults(func=run_molecules)


def _energy_rows(refs: References) -> list[str]:
    e_hf, e_exact = refs.e_hf, refs.e_exact
    corr = None if e_hf is None else e_exact - e_hf
    rows = [f"{'':14}{'energy / Ha':>16}{'E - E_HF / mHa':>17}{'correlation':>13}"]
    rows_exact = [(f"exact ({refs.method})", e_exact)]
    if refs.dmrg is not None:
        rows_exact = [(f"DMRG M={refs.dmrg['bond_dim']}", refs.dmrg["energy"]), ("DMRG extrap.", e_exact)]
    for label, energy in (("HF", e_hf), ("CCSD", refs.e_ccsd), ("CCSD(T)", refs.e_ccsd_t), *rows_exact):
        if energy is None:
            rows.append(f"{label:14}{'n/a':>16}")
            continue
        row = f"{label:14}{energy:16.8f}"
        if e_hf is not None:
            row += f"{1000 * (energy - e_hf):17.3f}"
            if label != "HF" and corr and abs(corr) > 1e-12:
                row += f"{100 * (energy - e_hf) / corr:12.1f}%"
        rows.append(row)
    return rows


def _dmrg_rows(refs: References) -> list[str]:
    """The DMRG fit and its settings, or nothing for another method."""
    if refs.dmrg is None:
        return []
    d = refs.dmrg
    fit = ", ".join(f"M={m}: {e:.8f} (dw {w:.1e})" for m, w, e in d["fit"])
    return [f"DMRG     extrapolation error |E(M={d['bond_dim']}) - E(dw=0)| = {1000 * d['extrapolation_error']:.4f} mHa",
            f"         fit E = E0 + a*dw over {fit}",
            f"         schedule {d['schedule']}; {'Fiedler' if d['reorder'] else 'given'} orbital order, "
            f"{d['threads']} thread(s), {d['wall_s']:.1f} s", ""]


def format_references(refs: References) -> str:
    """Human-readable table of a References object."""
    lines = [f"system   {refs.description}, {refs.reference} orbitals",
             f"sizes    {refs.n_orbitals} spatial orbitals, {refs.n_qubits} qubits, N_alpha={refs.n_alpha}, "
             f"N_beta={refs.n_beta}, sector dimension {refs.sector_dim:,}",
             "", *_energy_rows(refs), "", *_dmrg_rows(refs),
             f"wall time {refs.wall_s:.2f} s" + (" (from cache)" if refs.from_cache else "")]
    return "\n".join(lines)


def run_exact(args: argparse.Namespace) -> int:
    """`nnqs exact`: print the reference energies of the requested system."""
    spec = spec_from_args(args)
    if args.method == "dmrg":
        progress = None if args.json else (lambda step: print(format_sweep(step), file=sys.stderr, flush=True))
        refs = exact_references(spec, method="dmrg", cache=not args.no_cache, threads=args.threads, progress=progress,
                                dmrg=DmrgSettings(bond_dim=args.bond_dim, reorder=not args.no_reorder))
    else:
        refs = exact_references(spec, method=args.method, cache=not args.no_cache)
    print(json.dumps(refs.to_dict()) if args.json else format_references(refs))
    return 0


def catalog_rows() -> list[dict]:
    """One dict per catalog molecule: name, formula, electrons, STO-3G orbitals/qubits, source, atom."""
    rows = []
    for entry in CATALOG.values():
        n_orb = minimal_basis_size(entry.atom)
        rows.append({"name": entry.name, "formula": entry.formula, "n_electrons": electron_count(entry.atom),
                     "n_orbitals_sto3g": n_orb, "n_qubits_sto3g": 2 * n_orb, "spin": entry.spin,
                     "source": entry.source, "atom": entry.atom})
    return rows


def run_molecules(args: argparse.Namespace) -> int:
    """`nnqs molecules`: print the catalog."""
    rows = catalog_rows()
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'name':6} {'formula':8} {'electrons':>9} {'orbitals':>8} {'qubits':>6}  source")
    for r in rows:
        print(f"{r['name']:6} {r['formula']:8} {r['n_electrons']:9d} {r['n_orbitals_sto3g']:8d} "
              f"{r['n_qubits_sto3g']:6d}  {r['source']}")
    print("orbitals and qubits in STO-3G (the default basis); geometries in Angstrom")
    return 0
