"""Built-in molecules at experimental equilibrium geometries (Angstrom, degrees).

Every geometry is taken from the NIST Computational Chemistry Comparison and
Benchmark Database (CCCBDB, Release 22, https://cccbdb.nist.gov/), section
"Experimental > Geometry"; the entry's ``source`` names the values used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hamiltonians.errors import InputError
from hamiltonians.spec import MoleculeSpec

_CCCBDB = "NIST CCCBDB experimental geometry"


@dataclass(frozen=True)
class CatalogEntry:
    """A named molecule: formula, PySCF atom string (Angstrom), citation."""

    name: str
    formula: str
    atom: str
    source: str
    spin: int = 0


def _fmt(atoms: list[tuple[str, float, float, float]]) -> str:
    return "; ".join(f"{s} {x:.6f} {y:.6f} {z:.6f}" for s, x, y, z in atoms)


def _diatomic(a: str, b: str, r: float) -> str:
    return _fmt([(a, 0.0, 0.0, 0.0), (b, 0.0, 0.0, r)])


def _linear_ah2(a: str, r: float) -> str:
    return _fmt([(a, 0.0, 0.0, 0.0), ("H", 0.0, 0.0, r), ("H", 0.0, 0.0, -r)])


def _bent_ah2(a: str, r: float, angle_deg: float) -> str:
    half = math.radians(angle_deg) / 2
    x, z = r * math.sin(half), r * math.cos(half)
    return _fmt([(a, 0.0, 0.0, 0.0), ("H", x, 0.0, z), ("H", -x, 0.0, z)])


def _pyramidal_ah3(a: str, r: float, angle_deg: float) -> str:
    # H atoms on a circle of radius rho below A; H-A-H angle fixes rho.
    rho = r * math.sqrt((1.0 - math.cos(math.radians(angle_deg))) / 1.5)
    h = math.sqrt(r * r - rho * rho)
    hs = [("H", rho * math.cos(t), rho * math.sin(t), -h)
          for t in (0.0, 2 * math.pi / 3, 4 * math.pi / 3)]
    return _fmt([(a, 0.0, 0.0, 0.0), *hs])


def _tetrahedral_ah4(a: str, r: float) -> str:
    c = r / math.sqrt(3.0)
    signs = [(1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1)]
    return _fmt([(a, 0.0, 0.0, 0.0), *[("H", c * i, c * j, c * k) for i, j, k in signs]])


_ENTRIES = [
    CatalogEntry("H2", "H2", _diatomic("H", "H", 0.7414), f"{_CCCBDB}: r(HH)=0.7414 A"),
    CatalogEntry("LiH", "LiH", _diatomic("Li", "H", 1.5949), f"{_CCCBDB}: r(LiH)=1.5949 A"),
    CatalogEntry("BeH2", "BeH2", _linear_ah2("Be", 1.3264), f"{_CCCBDB}: r(BeH)=1.3264 A, linear"),
    CatalogEntry("H2O", "H2O", _bent_ah2("O", 0.9578, 104.48),
                 f"{_CCCBDB}: r(OH)=0.9578 A, a(HOH)=104.48 deg"),
    CatalogEntry("NH3", "NH3", _pyramidal_ah3("N", 1.0124, 106.67),
                 f"{_CCCBDB}: r(NH)=1.0124 A, a(HNH)=106.67 deg"),
    CatalogEntry("CH4", "CH4", _tetrahedral_ah4("C", 1.087), f"{_CCCBDB}: r(CH)=1.087 A, Td"),
    CatalogEntry("N2", "N2", _diatomic("N", "N", 1.0977), f"{_CCCBDB}: r(NN)=1.0977 A"),
    CatalogEntry("HF", "HF", _diatomic("H", "F", 0.9168), f"{_CCCBDB}: r(HF)=0.9168 A"),
    CatalogEntry("CO", "CO", _diatomic("C", "O", 1.1283), f"{_CCCBDB}: r(CO)=1.1283 A"),
    CatalogEntry("C2", "C2", _diatomic("C", "C", 1.2425), f"{_CCCBDB}: r(CC)=1.2425 A; the singlet ground state"),
]

CATALOG: dict[str, CatalogEntry] = {e.name: e for e in _ENTRIES}


def minimal_basis_size(atom: str) -> int:
    """Spatial orbitals (basis functions) of a geometry in STO-3G, counted by PySCF."""
    from pyscf import gto

    from hamiltonians.spec import electron_count

    mol = gto.M(atom=atom, basis="sto-3g", spin=electron_count(atom) % 2, verbose=0)
    return int(mol.nao_nr())


def catalog_names() -> list[str]:
    """Names of the built-in molecules, in catalog order."""
    return list(CATALOG)


def get_spec(name: str, basis: str = "sto-3g", charge: int = 0, spin: int | None = None,
             active: tuple[int, int] | None = None) -> MoleculeSpec:
    """The MoleculeSpec of a catalog molecule (name matched case-insensitively).

    ``spin`` (2S) defaults to the entry's ground-state spin. Raises InputError
    listing the valid names when ``name`` is unknown.
    """
    matches = [e for e in _ENTRIES if e.name.lower() == name.strip().lower()]
    if not matches:
        raise InputError(f"unknown molecule {name!r}; the catalog has: {', '.join(catalog_names())}")
    entry = matches[0]
    return MoleculeSpec(name=entry.name, atom=entry.atom, basis=basis, charge=charge,
                        spin=entry.spin if spin is None else spin, active=active)
