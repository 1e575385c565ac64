"""What the user asked for: a molecule (geometry or catalog name) or an FCIDUMP file.

A :class:`MoleculeSpec` is validated when it is made, without running PySCF (only
its element table, :mod:`pyscf.data.elements`, is read): the geometry
is parsed here (so a malformed one is named precisely), the electron count is
checked against charge and spin, and the active space against the electron
count. The basis name and the active space's orbital count are checked when the
integrals are built, because they need the basis set.

Units: Angstrom. ``spin`` is 2S = N_alpha - N_beta (PySCF convention).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from hamiltonians.errors import InputError

# Cache keys change when this does; bump it when the integrals' recipe changes.
ORBITALS = ("canonical", "localized")
SPEC_VERSION = 2  # 2: active-space integrals from PySCF's CASCI.get_h1eff/get_h2eff


@functools.cache
def _atomic_numbers() -> dict[str, int]:
    from pyscf.data.elements import ELEMENTS  # ELEMENTS[Z] is the symbol; index 0 is a ghost atom

    return {symbol: z for z, symbol in enumerate(ELEMENTS) if z > 0}


def atomic_number(symbol: str) -> int | None:
    """Nuclear charge Z of an element symbol such as ``"He"`` (PySCF's element table), None if unknown."""
    return _atomic_numbers().get(symbol)


_LABEL = re.compile(r"^([A-Za-z]{1,2})([0-9]*)$")  # ASCII digits only: PySCF reads the label


def parse_geometry(atom: str) -> list[tuple[str, float, float, float]]:
    """Parse a PySCF atom string ``"N 0 0 0; N 0 0 1.0977"`` (Angstrom).

    Parts are separated by ``;`` or newlines; each is ``SYMBOL x y z`` (commas
    allowed between fields; a numeric suffix on the symbol, ``H1``, is kept).
    Returns ``[(symbol, x, y, z), ...]``; raises InputError naming the bad part.
    """
    parts = [p.strip() for p in re.split(r"[;\n]", atom) if p.strip()]
    if not parts:
        raise InputError("malformed geometry: no atoms given")
    atoms = []
    for i, part in enumerate(parts, start=1):
        fields = part.replace(",", " ").split()
        where = f"malformed geometry: atom {i} {part!r}"
        if len(fields) != 4:
            raise InputError(f"{where} should be 'SYMBOL x y z' (Angstrom)")
        match = _LABEL.match(fields[0])
        symbol = match.group(1).capitalize() if match else None
        if atomic_number(symbol) is None:
            raise InputError(f"{where}: unknown element {fields[0]!r}")
        try:
            xyz = tuple(float(f) for f in fields[1:])
        except ValueError:
            raise InputError(f"{where}: coordinates must be numbers") from None
        if not all(math.isfinite(c) for c in xyz):
            raise InputError(f"{where}: coordinates must be finite")
        atoms.append((symbol + match.group(2), *xyz))
    _check_distances(atoms)
    return atoms


def _check_distances(atoms: list[tuple[str, float, float, float]]) -> None:
    for i, a in enumerate(atoms):
        for j in range(i):
            d = math.dist(a[1:], atoms[j][1:])
            if d < 0.1:
                raise InputError(f"malformed geometry: atoms {j + 1} and {i + 1} are "
                                 f"{d:.3f} Angstrom apart (at least 0.1 needed)")


def read_xyz(path: str | Path) -> str:
    """Read an XYZ file (count line, comment line, ``SYMBOL x y z`` lines, Angstrom).

    Returns the equivalent PySCF atom string; raises InputError if unreadable.
    """
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read XYZ file {str(path)!r}: {exc.__class__.__name__}") from None
    try:
        count = int(lines[0].split()[0])
    except (IndexError, ValueError):
        raise InputError(f"XYZ file {str(path)!r}: first line must be the atom count") from None
    body = [line for line in lines[2:] if line.strip()]
    if count < 1 or len(body) != count:
        raise InputError(f"XYZ file {str(path)!r}: says {count} atoms but has {len(body)} atom lines")
    atom = "; ".join(line.strip() for line in body)
    parse_geometry(atom)
    return atom


def formula(atom: str) -> str:
    """Chemical formula with elements in order of first appearance, e.g. ``"OH2"``, ``"N2"``."""
    counts: dict[str, int] = {}
    for a in parse_geometry(atom):
        symbol = _LABEL.match(a[0]).group(1)
        counts[symbol] = counts.get(symbol, 0) + 1
    return "".join(s + (str(c) if c > 1 else "") for s, c in counts.items())


def electron_count(atom: str, charge: int = 0) -> int:
    """Number of electrons of a geometry string at a given total charge."""
    z = sum(atomic_number(_LABEL.match(a[0]).group(1)) for a in parse_geometry(atom))
    return z - charge


def split_electrons(n_electrons: int, spin: int, what: str) -> tuple[int, int]:
    """(N_alpha, N_beta) from an electron count and 2S; InputError if inconsistent."""
    if spin < 0:
        raise InputError(f"spin (2S = N_alpha - N_beta) must be >= 0, got {spin}")
    if n_electrons < 1:
        raise InputError(f"{what} has {n_electrons} electrons; at least 1 is needed")
    if spin > n_electrons or (n_electrons - spin) % 2:
        raise InputError(f"spin 2S={spin} is impossible with {n_electrons} electrons in {what} "
                         f"(2S must have the parity of the electron count and be <= it)")
    return (n_electrons + spin) // 2, (n_electrons - spin) // 2


@dataclass(frozen=True)
class MoleculeSpec:
    """A molecule (``atom``) or an FCIDUMP file (``fcidump``), validated on construction.

    ``atom``: PySCF atom string in Angstrom. ``spin``: 2S. ``active``:
    (n_orbitals, n_electrons) of a CASCI-style active space; the remaining
    lowest orbitals are a frozen, doubly occupied core. For FCIDUMP input the
    electron count and spin come from the file; ``basis``, ``charge`` and
    ``spin`` are not used.
    """

    name: str | None = None
    atom: str | None = None
    basis: str = "sto-3g"
    charge: int = 0
    spin: int = 0
    active: tuple[int, int] | None = None
    fcidump: str | None = None
    orbitals: str = "canonical"  # or "localized": Boys-localized within the occupied and the virtual blocks

    def __post_init__(self) -> None:
        if (self.atom is None) == (self.fcidump is None):
            raise InputError("a molecule needs exactly one of a geometry or an FCIDUMP file")
        if self.orbitals not in ORBITALS:
            raise InputError(f"orbitals must be one of {', '.join(ORBITALS)}, got {self.orbitals!r}")
        if self.fcidump is not None and self.orbitals != "canonical":
            raise InputError("localized orbitals need a geometry; an FCIDUMP's orbitals are used as given")
        if self.active is not None:
            object.__setattr__(self, "active", tuple(int(x) for x in self.active))
            check_active_counts(self.active)
        if self.fcidump is not None:
            if not Path(self.fcidump).is_file():
                raise InputError(f"FCIDUMP file {self.fcidump!r} does not exist")
            return
        if not isinstance(self.basis, str) or not self.basis.strip():
            raise InputError("basis must be a non-empty name such as 'sto-3g'")
        n_el = electron_count(self.atom, self.charge)
        split_electrons(n_el, self.spin, self.describe())
        if self.active is not None:
            check_active_electrons(self.active, n_el, self.spin)

    def describe(self) -> str:
        """One line naming the system, e.g. ``H2O (sto-3g, charge 0, 2S=0)``."""
        act = f", active ({self.active[0]}o, {self.active[1]}e)" if self.active else ""
        act += ", localized orbitals" if self.orbitals == "localized" else ""
        if self.fcidump is not None:
            return f"{self.name or Path(self.fcidump).name} (FCIDUMP {self.fcidump}{act})"
        name = self.name or formula(self.atom)
        return f"{name} ({self.basis}, charge {self.charge}, 2S={self.spin}{act})"

    def key(self) -> str:
        """Stable hash of everything that determines the Hamiltonian (not the name)."""
        payload: dict = {"version": SPEC_VERSION, "active": self.active}
        if self.orbitals != "canonical":  # canonical specs keep the keys they always had
            payload["orbitals"] = self.orbitals
        if self.fcidump is not None:
            payload["fcidump_sha256"] = hashlib.sha256(Path(self.fcidump).read_bytes()).hexdigest()
        else:
            payload.update(atoms=[[a[0], *(round(c, 10) for c in a[1:])] for a in parse_geometry(self.atom)],
                           basis=self.basis.strip().lower(), charge=self.charge, spin=self.spin)
        text = json.dumps(payload, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def check_active_counts(active: tuple[int, int]) -> None:
    """Checks of an active space (n_orbitals, n_electrons) that need no molecule."""
    n_orb, n_el = active
    if n_orb < 1 or n_el < 1:
        raise InputError(f"active space ({n_orb} orbitals, {n_el} electrons) needs at least 1 of each")
    if n_el > 2 * n_orb:
        raise InputError(f"active space: {n_el} electrons do not fit in {n_orb} orbitals")


def check_active_electrons(active: tuple[int, int], n_electrons: int, spin: int) -> None:
    """Check an active space against the electron count and 2S of the whole system."""
    n_orb, n_el = active
    if n_el > n_electrons or (n_electrons - n_el) % 2:
        raise InputError(f"active space: {n_el} active electrons of {n_electrons} leave a core "
                         "that is not a whole number of doubly occupied orbitals")
    if n_el < spin or (n_el - spin) % 2:
        raise InputError(f"active space: {n_el} active electrons cannot carry spin 2S={spin}")
    if (n_el + spin) // 2 > n_orb:
        raise InputError(f"active space: {(n_el + spin) // 2} alpha electrons do not fit in {n_orb} orbitals")
