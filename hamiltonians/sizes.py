"""How big a request is, known before any SCF or integral transform, and the refusal of what cannot fit.

The inputs are cheap: the number of basis functions (PySCF's ``mol.nao_nr()`` of the
built Mole, or an FCIDUMP header's NORB), the electrons and the active space. From
them come the sector dimension (binomials), the memory of the dense integrals and
of each exact method, and a rough time. Times are orders of magnitude on one core
of a small machine (constants measured on benzene/6-31G, H2O/aug-cc-pVTZ and N2
FCI/ED; DMRG on H2O/6-31G and N2/6-31G); memory figures are peak estimates. Nothing here
imports PySCF or block2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb

from hamiltonians.errors import InputError

MAX_ORBITALS = 128          # dense (ij|kl) in float64: 128**4 * 8 bytes = 2 GiB
ED_MAX_DIM = 2_000_000
ED_MAX_BYTES = 4 * 2**30
FCI_MAX_DIM = 100_000_000
SCF_MAX_SECONDS = 6 * 3600
_SCF_S_PER_N4 = 5e-8        # SCF: integral evaluation ~ n_basis**4
_AO2MO_S_PER_N5 = 6e-10     # transform: ~ n_basis**4 * n_orbitals
_FCI_VECTORS = 30           # Davidson space and work vectors held by PySCF's FCI
_FCI_S_PER_ELEMENT = 3e-7   # per determinant and single excitation, all iterations
_ED_BYTES_PER_ELEMENT = 40  # COO triplets and the CSR copy of one matrix element
_ED_S_PER_ELEMENT = 1.5e-7
DMRG_DEFAULT_BOND_DIM = 500
DMRG_MAX_ORBITALS = 100
DMRG_MAX_BYTES = 16 * 2**30
_DMRG_S_PER_N3M3 = 5e-10    # the whole 12-sweep schedule of hamiltonians.dmrg, per n_orbitals**3 * M**3
_DMRG_BYTES_PER_N2M2 = 16   # renormalized operators of one block, per n_orbitals**2 * M**2
_DMRG_BASE_BYTES = 2**30    # block2's stack (1 GiB at least), the MPO and the integrals
LARGE_WAY_OUT = "use a smaller --active ORBITALS ELECTRONS space, or nnqs vmc"


def _times(factor: float, n: int) -> float | int:
    """factor * n, exact as an int where n is beyond floats (sector sizes reach 10**400 and more)."""
    return factor * n if n < 10**300 else int(factor * 10**12) * n // 10**12


def _scientific(x: float | int, digits: int = 1) -> str:
    """``1.5e+07`` of a positive float or an int of any size."""
    exponent = math.floor(math.log10(x))
    mantissa = x / 10**exponent if isinstance(x, float) else (x * 10**digits // 10**exponent) / 10**digits
    return f"{mantissa:.{digits}f}e+{exponent:02d}"


def gib(n_bytes: float | int) -> str:
    """``~1.5 GiB``; scientific notation for absurd sizes."""
    if n_bytes < 10**6 * 2**30:
        return f"~{n_bytes / 2**30:.1f} GiB"
    return f"~{_scientific(n_bytes // 2**30 if isinstance(n_bytes, int) else n_bytes / 2**30)} GiB"


def duration(seconds: float | int) -> str:
    """``~3 s``, ``~4 min``, ``~3 h``, ``~12 days``, ``~31710 years``, ``~3.2e+40 years``."""
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            if seconds < 10**6 * size:
                return f"~{seconds / size:.0f} {unit}"
            return f"~{_scientific(int(seconds) // size)} {unit}"
    return f"~{max(seconds, 1):.0f} s"


def count(n: int) -> str:
    """``1,656,369``; scientific notation beyond 1e15."""
    return f"{n:,}" if n < 10**15 else _scientific(n, 2)


def _connections(n: int, na: int, nb: int) -> int:
    """Determinants connected to one determinant by H (itself, singles, doubles)."""
    va, vb = n - na, n - nb
    return (1 + na * va + nb * vb + (na * (na - 1) // 2) * (va * (va - 1) // 2)
            + (nb * (nb - 1) // 2) * (vb * (vb - 1) // 2) + na * va * nb * vb)


@dataclass(frozen=True)
class Size:
    """The sizes of one request. ``n_basis``: what the SCF or the FCIDUMP reader handles
    (basis functions, or NORB); ``n_orbitals``, ``n_alpha``, ``n_beta``: the Hamiltonian's."""

    what: str
    n_basis: int
    n_orbitals: int
    n_alpha: int
    n_beta: int
    from_file: bool = False

    @property
    def sector_dim(self) -> int:
        """Determinants with n_alpha, n_beta electrons in n_orbitals."""
        return comb(self.n_orbitals, self.n_alpha) * comb(self.n_orbitals, self.n_beta)

    @property
    def dense_orbitals(self) -> int:
        """Orbitals of the largest dense (ij|kl) held: the file's NORB, or the active orbitals after SCF."""
        return self.n_basis if self.from_file else self.n_orbitals

    @property
    def integral_bytes(self) -> int:
        """Peak memory of the dense two-electron integrals (full array plus the packed copy)."""
        return 10 * self.dense_orbitals ** 4

    @property
    def integral_seconds(self) -> float:
        """SCF plus the integral transform (0 for a file)."""
        if self.from_file:
            return 0.0
        return _SCF_S_PER_N4 * self.n_basis ** 4 + _AO2MO_S_PER_N5 * self.n_basis ** 4 * self.n_orbitals

    def _singles(self) -> int:
        n, na, nb = self.n_orbitals, self.n_alpha, self.n_beta
        return 1 + na * (n - na) + nb * (n - nb)

    def method_cost(self, method: str) -> tuple[int, float]:
        """(peak bytes, seconds) of an exact method on the sector."""
        dim = self.sector_dim
        if method == "ed":
            elements = dim * _connections(self.n_orbitals, self.n_alpha, self.n_beta)
            return _ED_BYTES_PER_ELEMENT * elements, _times(_ED_S_PER_ELEMENT, elements)
        return 8 * _FCI_VECTORS * dim, _times(_FCI_S_PER_ELEMENT, dim * self._singles())

    def describe_sector(self) -> str:
        q = 2 * self.n_orbitals
        return f"the N_alpha/N_beta sector has {count(self.sector_dim)} determinants ({q} qubits)"


def dmrg_cost(n_orbitals: int, bond_dim: int) -> tuple[int, float]:
    """(peak bytes, seconds) of the DMRG schedule at bond dimension ``bond_dim`` on ``n_orbitals`` sites.

    M is capped at 4**(n/2), the states of half the chain, beyond which a larger M changes nothing.
    """
    m = min(bond_dim, 4 ** (n_orbitals // 2))
    n_bytes = _DMRG_BASE_BYTES + 8 * n_orbitals ** 4 + _DMRG_BYTES_PER_N2M2 * n_orbitals ** 2 * m ** 2
    return n_bytes, _DMRG_S_PER_N3M3 * n_orbitals ** 3 * m ** 3


def check_dmrg(size: Size, bond_dim: int) -> None:
    """InputError if DMRG at ``bond_dim`` is refused: too many orbitals, or too much memory."""
    n = size.n_orbitals
    n_bytes, seconds = dmrg_cost(n, bond_dim)
    if n > DMRG_MAX_ORBITALS:
        raise InputError(f"{size.what}: {n} orbitals are too many for --method dmrg (limit {DMRG_MAX_ORBITALS}); "
                         "use an --active ORBITALS ELECTRONS space")
    if n_bytes > DMRG_MAX_BYTES:
        raise InputError(f"{size.what}: --method dmrg at --bond-dim {bond_dim} on {n} orbitals would need "
                         f"{gib(n_bytes)} and {duration(seconds)} (limit {gib(DMRG_MAX_BYTES)}); "
                         "use a smaller --bond-dim or --active space")


def beyond_fci_way_out(size: Size) -> str:
    """The way out of an FCI/ED refusal: --method dmrg with its cost where it fits, else a smaller space or VMC."""
    n_bytes, seconds = dmrg_cost(size.n_orbitals, DMRG_DEFAULT_BOND_DIM)
    if size.n_orbitals <= DMRG_MAX_ORBITALS and n_bytes <= DMRG_MAX_BYTES:
        return (f"use --method dmrg ({gib(n_bytes)}, {duration(seconds)} at --bond-dim {DMRG_DEFAULT_BOND_DIM}), "
                f"{LARGE_WAY_OUT.removeprefix('use ')}")
    return LARGE_WAY_OUT


def ed_memory_bytes(n_orbitals: int, n_alpha: int, n_beta: int) -> int:
    """Rough peak memory (bytes) of building the sparse sector matrix for ED."""
    return Size("", n_orbitals, n_orbitals, n_alpha, n_beta).method_cost("ed")[0]


def check_integrals(size: Size) -> None:
    """InputError, with the estimate and the way out, if the integrals cannot be made or held."""
    n = size.dense_orbitals
    if n > MAX_ORBITALS:
        source = f"NORB={n} of the file" if size.from_file else f"{n} orbitals ({size.n_basis} basis functions)"
        scf = "" if size.from_file else f", after an SCF and transform of {duration(size.integral_seconds)}"
        raise InputError(f"{size.what}: {source} are too many for the dense two-electron integrals "
                         f"({gib(size.integral_bytes)}{scf}; limit {MAX_ORBITALS} orbitals); "
                         "use an --active ORBITALS ELECTRONS space or a smaller basis")
    if size.integral_seconds > SCF_MAX_SECONDS:
        raise InputError(f"{size.what}: the SCF and integrals of {size.n_basis} basis functions would take "
                         f"{duration(size.integral_seconds)} (limit {duration(SCF_MAX_SECONDS)}); use a smaller basis")


def check_method(size: Size, method: str) -> None:
    """InputError if the exact ``method`` ('fci', 'ed'; 'dmrg' at its default bond dimension) cannot handle
    the sector; names a way out that fits."""
    if method == "dmrg":
        check_dmrg(size, DMRG_DEFAULT_BOND_DIM)
        return
    if method not in ("fci", "ed"):
        raise InputError(f"unknown exact method {method!r}; choose one of fci, ed, dmrg")
    dim = size.sector_dim
    fci_bytes, fci_seconds = size.method_cost("fci")
    fci_fits = dim <= FCI_MAX_DIM
    if method == "ed":
        ed_bytes, ed_seconds = size.method_cost("ed")
        if dim <= ED_MAX_DIM and ed_bytes <= ED_MAX_BYTES:
            return
        way_out = (f"use --method fci ({gib(fci_bytes)}, {duration(fci_seconds)}), an --active space or nnqs vmc"
                   if fci_fits else f"--method fci is over its limit ({count(FCI_MAX_DIM)}) too; {beyond_fci_way_out(size)}")
        raise InputError(f"{size.what}: {size.describe_sector()} and --method ed would need {gib(ed_bytes)} and "
                         f"{duration(ed_seconds)}, too large for --method ed (limits {count(ED_MAX_DIM)} "
                         f"determinants, {gib(ED_MAX_BYTES)}); {way_out}")
    if not fci_fits:
        raise InputError(f"{size.what}: {size.describe_sector()}, too large for --method fci ({gib(fci_bytes)}, "
                         f"{duration(fci_seconds)}; limit {count(FCI_MAX_DIM)}); {beyond_fci_way_out(size)}")
