"""FCIDUMP files (Knowles & Handy format) to and from MolecularHamiltonian.

Header ``&FCI NORB=n, NELEC=N, MS2=2S, ORBSYM=..., ISYM=..., &END`` (or ``/``),
then lines ``value i j k l`` with 1-based orbital indices: all four > 0 is
(ij|kl) (8-fold symmetry, real orbitals), ``i j 0 0`` is h1e[i,j], ``0 0 0 0``
is the core energy. Orbital-energy lines ``i 0 0 0`` are ignored. RHF only.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from hamiltonians.errors import InputError
from hamiltonians.molecular import MolecularHamiltonian, core_and_active, determinant_energy, freeze_core
from hamiltonians.spec import MoleculeSpec, check_active_electrons

MAX_NORB = 128  # dense (ij|kl) of 128 orbitals already take 2 GiB
_HEADER_END = re.compile(r"(&END|/)\s*$", re.IGNORECASE | re.MULTILINE)


def _parse_header(text: str, where: str) -> tuple[dict[str, str], str]:
    match = _HEADER_END.search(text)
    if not text.lstrip().upper().startswith("&FCI") or match is None:
        raise InputError(f"{where}: not an FCIDUMP file (no '&FCI ... &END' header)")
    header = text[:match.start()].strip()[4:]
    fields = dict(re.findall(r"(\w+)\s*=\s*([^=]*?)\s*,?\s*(?=\w+\s*=|$)", header, re.DOTALL))
    return {k.upper(): v for k, v in fields.items()}, text[match.end():]


def _header_int(fields: dict[str, str], name: str, where: str, default: int | None = None) -> int:
    if name not in fields:
        if default is None:
            raise InputError(f"{where}: header has no {name}")
        return default
    try:
        return int(fields[name].strip().rstrip(","))
    except ValueError:
        raise InputError(f"{where}: header {name}={fields[name]!r} is not an integer") from None


def _parse_body(body: str, where: str) -> np.ndarray:
    """(m, 5) float array of ``value i j k l`` rows."""
    rows = [line.split() for line in body.splitlines() if line.strip()]
    for number, row in enumerate(rows, start=1):
        if len(row) != 5:
            raise InputError(f"{where}: integral line {number} {' '.join(row)!r} should be 'value i j k l'")
    try:
        table = np.array([[x.replace("D", "E").replace("d", "e") for x in row] for row in rows], dtype=np.float64)
    except ValueError:
        raise InputError(f"{where}: an integral line contains something that is not a number") from None
    if not np.isfinite(table).all():
        raise InputError(f"{where}: an integral line contains a value that is not finite (nan or inf)")
    return table.reshape(-1, 5)


def _fill(table: np.ndarray, n: int, where: str) -> tuple[np.ndarray, np.ndarray, float]:
    values, idx = table[:, 0], table[:, 1:]
    if np.any(idx != np.round(idx)) or np.any(idx < 0) or np.any(idx > n):
        raise InputError(f"{where}: orbital indices must be integers between 0 and NORB={n}")
    i, j, k, l = (idx.astype(np.int64) - 1).T
    two = (i >= 0) & (j >= 0) & (k >= 0) & (l >= 0)
    one = (i >= 0) & (j >= 0) & (k < 0) & (l < 0)
    core = (i < 0) & (j < 0) & (k < 0) & (l < 0)
    energy_line = (i >= 0) & (j < 0) & (k < 0) & (l < 0)
    if not np.all(two | one | core | energy_line):
        raise InputError(f"{where}: an integral line has an index pattern that is not (ij|kl), h[ij] or core")
    eri = np.zeros((n, n, n, n))
    a, b, c, d, v = i[two], j[two], k[two], l[two], values[two]
    for p, q, r, s in ((a, b, c, d), (b, a, c, d), (a, b, d, c), (b, a, d, c)):
        eri[p, q, r, s] = v
        eri[r, s, p, q] = v
    h1e = np.zeros((n, n))
    h1e[i[one], j[one]] = values[one]
    h1e[j[one], i[one]] = values[one]
    return h1e, eri, float(values[core].sum())


def read_fcidump(path: str | Path) -> MolecularHamiltonian:
    """Read an FCIDUMP file; raises InputError naming the problem if it is unreadable or inconsistent."""
    where = f"FCIDUMP {str(path)!r}"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {where}: {exc.__class__.__name__}") from None
    fields, body = _parse_header(text, where)
    if fields.get("UHF", "").strip(" ,.").upper() in ("TRUE", "T", "1"):
        raise InputError(f"{where}: UHF integrals are not supported (restricted orbitals only)")
    n = _header_int(fields, "NORB", where)
    n_el = _header_int(fields, "NELEC", where)
    ms2 = abs(_header_int(fields, "MS2", where, default=0))
    if n > MAX_NORB:
        raise InputError(f"{where}: NORB={n} is more orbitals than the dense integrals can hold ({MAX_NORB})")
    if n < 1 or n_el < 1 or n_el > 2 * n:
        raise InputError(f"{where}: NELEC={n_el} electrons do not fit in NORB={n} orbitals")
    if ms2 > n_el or (n_el - ms2) % 2 or (n_el + ms2) // 2 > n:
        raise InputError(f"{where}: MS2={ms2} is inconsistent with NELEC={n_el}, NORB={n}")
    table = _parse_body(body, where)
    if not len(table):
        raise InputError(f"{where}: no integrals after the header")
    h1e, eri, e_core = _fill(table, n, where)
    n_alpha, n_beta = (n_el + ms2) // 2, (n_el - ms2) // 2
    return MolecularHamiltonian(h1e, eri, e_core, n, n_alpha, n_beta, f"FCIDUMP {Path(path).name}",
                                determinant_energy(h1e, eri, e_core, n_alpha, n_beta), "FCIDUMP")


def hamiltonian_from_fcidump(spec: MoleculeSpec) -> MolecularHamiltonian:
    """Read the spec's FCIDUMP file and apply its active space (frozen core in the MO basis)."""
    ham = read_fcidump(spec.fcidump)
    if spec.active is None:
        return ham
    check_active_electrons(spec.active, ham.n_electrons, ham.n_alpha - ham.n_beta)
    n_core, n_act = core_and_active(spec.active, ham.n_orbitals, ham.n_electrons, spec.describe())
    h1e, eri, e_core = freeze_core(ham.h1e, ham.eri, ham.e_core, n_core, n_act)
    n_alpha, n_beta = ham.n_alpha - n_core, ham.n_beta - n_core
    return MolecularHamiltonian(h1e, eri, e_core, n_act, n_alpha, n_beta, spec.describe(),
                                determinant_energy(h1e, eri, e_core, n_alpha, n_beta), "FCIDUMP")


def _unique_eri_indices(n: int) -> np.ndarray:
    """(m, 4) indices i>=j, k>=l, ij>=kl (0-based) of the 8-fold unique (ij|kl)."""
    pi, pj = np.tril_indices(n)
    pa, pb = np.tril_indices(len(pi))
    return np.stack([pi[pa], pj[pa], pi[pb], pj[pb]], axis=1)


def write_fcidump(path: str | Path, ham: MolecularHamiltonian, tol: float = 1e-15) -> None:
    """Write ``ham`` as an FCIDUMP file (integrals with |value| <= tol are omitted)."""
    n = ham.n_orbitals
    lines = [f" &FCI NORB={n},NELEC={ham.n_electrons},MS2={ham.n_alpha - ham.n_beta},",
             "  ORBSYM=" + ",".join(["1"] * n) + ",", "  ISYM=1,", " &END"]
    idx = _unique_eri_indices(n)
    values = ham.eri[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]]
    keep = np.abs(values) > tol
    lines += [f"{v: .17e} {i} {j} {k} {l}" for v, (i, j, k, l) in zip(values[keep], idx[keep] + 1)]
    hi, hj = np.tril_indices(n)
    for v, i, j in zip(ham.h1e[hi, hj], hi + 1, hj + 1):
        if abs(v) > tol:
            lines.append(f"{v: .17e} {i} {j} 0 0")
    lines.append(f"{ham.e_core: .17e} 0 0 0 0")
    try:
        Path(path).write_text("\n".join(lines) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write FCIDUMP {str(path)!r}: {exc.__class__.__name__}") from None
