"""Command-line options that name a molecule, shared by the commands that take one.

``add_molecule_arguments(parser)`` adds: NAME (catalog name, optional positional),
``--geometry``, ``--xyz``, ``--fcidump``, ``--basis``, ``--charge``, ``--spin`` (2S)
and ``--active ORBITALS ELECTRONS``; ``spec_from_args(args)`` turns them into a
validated :class:`hamiltonians.MoleculeSpec` or raises InputError.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from hamiltonians import InputError, MoleculeSpec, catalog_names, get_spec
from hamiltonians.spec import read_xyz


def add_molecule_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the molecule options to ``parser`` (defaults None, resolved by spec_from_args)."""
    parser.add_argument("name", nargs="?", metavar="NAME",
                        help=f"catalog molecule: {', '.join(catalog_names())} (see `nnqs molecules`)")
    group = parser.add_argument_group("molecule")
    group.add_argument("--geometry", metavar="ATOMS",
                       help='PySCF atom string in Angstrom, e.g. "N 0 0 0; N 0 0 1.0977"')
    group.add_argument("--xyz", metavar="FILE", help="XYZ file (Angstrom)")
    group.add_argument("--fcidump", metavar="FILE", help="FCIDUMP file with the integrals")
    group.add_argument("--basis", help="Gaussian basis set (default sto-3g)")
    group.add_argument("--charge", type=int, help="total charge (default 0)")
    group.add_argument("--spin", type=int, metavar="2S", help="2S = N_alpha - N_beta (default 0)")
    group.add_argument("--active", type=int, nargs=2, metavar=("ORBITALS", "ELECTRONS"),
                       help="active space on top of the SCF orbitals; lower orbitals are a frozen core")


def spec_from_args(args: argparse.Namespace) -> MoleculeSpec:
    """The MoleculeSpec named by the parsed molecule options; InputError if they conflict."""
    given = [flag for flag, value in (("NAME", args.name), ("--geometry", args.geometry),
                                      ("--xyz", args.xyz), ("--fcidump", args.fcidump)) if value is not None]
    if len(given) != 1:
        what = "none" if not given else " and ".join(given)
        raise InputError(f"give exactly one of NAME, --geometry, --xyz or --fcidump (got {what})")
    active = tuple(args.active) if args.active else None
    if args.fcidump is not None:
        extra = [f for f, v in (("--basis", args.basis), ("--charge", args.charge), ("--spin", args.spin))
                 if v is not None]
        if extra:
            raise InputError(f"{', '.join(extra)} cannot be used with --fcidump (the file fixes them)")
        return MoleculeSpec(name=Path(args.fcidump).name, fcidump=args.fcidump, active=active)
    basis = args.basis or "sto-3g"
    charge = args.charge or 0
    if args.name is not None:
        return get_spec(args.name, basis=basis, charge=charge, spin=args.spin, active=active)
    atom = args.geometry if args.geometry is not None else read_xyz(args.xyz)
    name = Path(args.xyz).stem if args.xyz else None
    return MoleculeSpec(name=name, atom=atom, basis=basis, charge=charge, spin=args.spin or 0, active=active)
