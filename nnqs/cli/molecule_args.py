"""Command-line options that name a molecule, shared by the commands that take one.

``add_molecule_arguments(parser)`` adds: NAME (catalog name, optional positional),
``--geometry``, ``--xyz``, ``--fcidump``, ``--basis``, ``--charge``, ``--spin`` (2S)
and ``--active ORBITALS ELECTRONS``; ``spec_from_args(args)`` turns them into a
validated :class:`hamiltonians.MoleculeSpec` or raises InputError. A run folder records its
molecule (``save_molecule``, ``molecule.json``) so that ``--resume --out DIR`` needs no molecule
options (``saved_molecule``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
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


MOLECULE_FILE = "molecule.json"
MOLECULE_OPTIONS = ("name", "geometry", "xyz", "fcidump", "basis", "charge", "spin", "active")


def molecule_given(args: argparse.Namespace) -> bool:
    """Whether any molecule option was given."""
    return any(getattr(args, key) is not None for key in MOLECULE_OPTIONS)


def save_molecule(folder: Path, spec: MoleculeSpec) -> None:
    """Record ``spec`` in the run ``folder`` (atomically; an FCIDUMP by its absolute path)."""
    from nnqs.common.atomic import atomic_write_text

    fields = dataclasses.asdict(spec)
    if fields["fcidump"] is not None:
        fields["fcidump"] = str(Path(fields["fcidump"]).resolve())
    atomic_write_text(Path(folder) / MOLECULE_FILE, json.dumps(fields, indent=1) + "\n")


def saved_molecule(folder: Path) -> MoleculeSpec:
    """The molecule the run in ``folder`` recorded (:func:`save_molecule`); InputError, naming what to do,
    when the record is missing or unreadable."""
    from nnqs.common.runfolder import RUN_FILES

    path = Path(folder) / MOLECULE_FILE
    again = "give the molecule options again with --resume"
    if not any((Path(folder) / name).is_file() for name in RUN_FILES):
        raise InputError(f"no run in {folder} to resume (none of {', '.join(RUN_FILES)})")
    if not path.is_file():
        raise InputError(f"{path} is missing: the run does not record its molecule; {again}")
    try:
        fields = json.loads(path.read_text())
        names = {f.name for f in dataclasses.fields(MoleculeSpec)}
        if not isinstance(fields, dict) or not set(fields) <= names:
            raise ValueError("unknown fields")
        return MoleculeSpec(**fields)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is unreadable ({str(exc)[:80]}); {again}") from None
