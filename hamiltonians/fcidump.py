"""FCIDUMP files (Knowles & Handy format) to and from MolecularHamiltonian, read strictly.

Header ``&FCI NORB=n, NELEC=N, MS2=2S, ORBSYM=..., ISYM=..., &END`` (or ``/``),
then lines ``value i j k l`` with 1-based orbital indices: all four > 0 is
(ij|kl) (8-fold symmetry, real orbitals), ``i j 0 0`` is h1e[i,j], ``0 0 0 0``
is the core energy, ``i 0 0 0`` an orbital energy (ignored). RHF only.

A file is refused, with one line naming the file, the line and the problem, when
(the rules, in the order they are checked):

* a line is not ``value i j k l``, a value is not a finite number (``1.0D-01``
  is read), an index is not an integer, or the index pattern is none of the above;
* an index lies outside 1..NORB;
* an entry repeats an earlier line's indices (with any value: a repeated core
  line is never summed, a repeated (11|11) never overwrites);
* symmetric partners disagree by more than ``SYMMETRY_TOL``: h[i,j] vs h[j,i],
  or (ij|kl) vs any of its 8 permutations; partners that agree are accepted;
* the core-energy line is missing or not the last entry. Every writer we know
  (PySCF, Molpro, ours) puts it last, so this rule catches a file cut at any
  line boundary (a cut inside a line is a malformed line);
* some orbital 1..NORB appears in no integral (NORB larger than the integrals).

NORB is checked against ``MAX_NORB`` from the header alone, and the rules above
run on the parsed table, before any (n, n, n, n) array is allocated.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from hamiltonians.errors import InputError
from hamiltonians.molecular import MolecularHamiltonian, core_and_active, determinant_energy, freeze_core
from hamiltonians.sizes import MAX_ORBITALS
from hamiltonians.spec import MoleculeSpec, check_active_electrons

MAX_NORB = MAX_ORBITALS  # dense (ij|kl) of 128 orbitals already take 2 GiB
SYMMETRY_TOL = 1e-8  # Hartree; partners printed from one number agree to ~1e-16
_HEADER_END = re.compile(r"(&END|/)[ \t\r]*$", re.IGNORECASE | re.MULTILINE)
_MAX_HEADER_LINES = 1000


def _where(path: str | Path) -> str:
    return f"FCIDUMP {str(path)!r}"


def _split_header(text: str, where: str) -> tuple[dict[str, tuple[str, int]], int]:
    """({FIELD: (value, line number)}, number of header lines) of an FCIDUMP text."""
    match = _HEADER_END.search(text)
    if not text.lstrip().upper().startswith("&FCI") or match is None:
        raise InputError(f"{where} line 1: not an FCIDUMP file (no '&FCI ... &END' header)")
    header = text[:match.start()]
    start = header.upper().index("&FCI") + 4
    fields = {}
    for found in re.finditer(r"(\w+)\s*=\s*([^=]*?)\s*,?\s*(?=\w+\s*=|$)", header[start:], re.DOTALL):
        line = header[:start + found.start()].count("\n") + 1
        fields.setdefault(found.group(1).upper(), (found.group(2), line))
    return fields, text[:match.end()].count("\n") + 1


def _header_int(fields: dict[str, tuple[str, int]], name: str, where: str, default: int | None = None) -> int:
    if name not in fields:
        if default is None:
            raise InputError(f"{where}: header has no {name}")
        return default
    text, line = fields[name]
    try:
        return int(text.strip().rstrip(","))
    except ValueError:
        raise InputError(f"{where} line {line}: header {name}={text!r} is not an integer") from None


def _header_sizes(fields: dict[str, tuple[str, int]], where: str) -> tuple[int, int, int]:
    """(NORB, N_alpha, N_beta) from the header fields, checked; no body is needed."""
    if fields.get("UHF", ("",))[0].strip(" ,.").upper() in ("TRUE", "T", "1"):
        raise InputError(f"{where} line {fields['UHF'][1]}: UHF integrals are not supported (restricted orbitals only)")
    n = _header_int(fields, "NORB", where)
    n_el = _header_int(fields, "NELEC", where)
    ms2 = abs(_header_int(fields, "MS2", where, default=0))
    if n > MAX_NORB:
        raise InputError(f"{where}: NORB={n} is more orbitals than the dense integrals can hold ({MAX_NORB})")
    if n < 1 or n_el < 1 or n_el > 2 * n:
        raise InputError(f"{where}: NELEC={n_el} electrons do not fit in NORB={n} orbitals")
    if ms2 > n_el or (n_el - ms2) % 2 or (n_el + ms2) // 2 > n:
        raise InputError(f"{where}: MS2={ms2} is inconsistent with NELEC={n_el}, NORB={n}")
    return n, (n_el + ms2) // 2, (n_el - ms2) // 2


def read_fcidump_header(path: str | Path) -> tuple[int, int, int]:
    """(n_orbitals, n_alpha, n_beta) from an FCIDUMP header, reading only the header lines."""
    where = _where(path)
    lines = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                lines.append(line)
                if _HEADER_END.search(line) or len(lines) >= _MAX_HEADER_LINES:
                    break
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {where}: {exc.__class__.__name__}") from None
    return _header_sizes(_split_header("".join(lines), where)[0], where)


def _body_table(lines: list[str], first: int, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values (m,) float64, indices (m, 4) int64, line numbers (m,)) of the non-blank body lines."""
    tokens: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=first):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5:
            raise InputError(f"{where} line {number}: {line.strip()[:60]!r} should be 'value i j k l'")
        tokens += fields
        numbers.append(number)
    if not numbers:
        raise InputError(f"{where} line {first - 1}: no integrals after the header")
    try:
        values = np.array([t.replace("D", "E").replace("d", "e") for t in tokens[0::5]], dtype=np.float64)
        idx = np.array([tokens[c::5] for c in range(1, 5)], dtype=np.int64).T
    except (ValueError, OverflowError):
        _raise_first_unparsable(tokens, numbers, where)
    if not np.isfinite(values).all():
        bad = numbers[int(np.argmin(np.isfinite(values)))]
        raise InputError(f"{where} line {bad}: the value is not finite (nan or inf)")
    return values, idx, np.array(numbers)


def _raise_first_unparsable(tokens: list[str], numbers: list[int], where: str) -> None:
    for row, number in enumerate(numbers):
        value, *indices = tokens[5 * row:5 * row + 5]
        try:
            float(value.replace("D", "E").replace("d", "e"))
        except ValueError:
            raise InputError(f"{where} line {number}: value {value[:30]!r} is not a number") from None
        for index in indices:
            if not re.fullmatch(r"[+-]?\d{1,18}", index):
                raise InputError(f"{where} line {number}: orbital index {index[:30]!r} is not an integer") from None
    raise AssertionError("a token failed to parse but none is found")


def _kinds(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masks (two-electron, one-electron, core) of the table rows; other rows are orbital energies."""
    on = idx > 0
    two = on.all(axis=1)
    one = on[:, 0] & on[:, 1] & ~on[:, 2] & ~on[:, 3]
    return two, one, ~on.any(axis=1)


def _canonical_keys(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(literal key, symmetry-class key) per row: equal class keys are partners under the 8-fold symmetry."""
    i, j, k, l = idx.T
    base = n + 1
    literal = ((i * base + j) * base + k) * base + l
    ij = np.maximum(i, j) * base + np.minimum(i, j)
    kl = np.maximum(k, l) * base + np.minimum(k, l)
    return literal, np.maximum(ij, kl) * base**2 + np.minimum(ij, kl)


def _first_of_key(keys: np.ndarray) -> np.ndarray:
    """(m,) row of the first occurrence of each row's key."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first[inverse]


def _label(idx: np.ndarray) -> str:
    i, j, k, l = (int(x) for x in idx)
    return "the core energy" if i == 0 else f"h[{i},{j}]" if k == 0 else f"({i}{j}|{k}{l})"


def _check_indices(idx: np.ndarray, lines: np.ndarray, n: int, where: str) -> None:
    outside = (idx < 0) | (idx > n)
    if outside.any():
        row = int(np.argmax(outside.any(axis=1)))
        bad = int(idx[row][outside[row]][0])
        raise InputError(f"{where} line {lines[row]}: orbital index {bad} is outside 1..NORB={n}")
    two, one, core = _kinds(idx)
    energy = (idx[:, 0] > 0) & (idx[:, 1:] == 0).all(axis=1)
    odd = ~(two | one | core | energy)
    if odd.any():
        row = int(np.argmax(odd))
        raise InputError(f"{where} line {lines[row]}: indices {' '.join(map(str, idx[row]))} are none of "
                         "(ij|kl) 'i j k l', h[ij] 'i j 0 0', core '0 0 0 0' or orbital energy 'i 0 0 0'")


def _check_entries(values: np.ndarray, idx: np.ndarray, lines: np.ndarray, n: int, where: str) -> np.ndarray:
    """Duplicates and symmetry; returns the rows holding the integrals (first of each symmetry class)."""
    two, one, core = _kinds(idx)
    rows = np.flatnonzero(two | one | core)
    literal, cls = _canonical_keys(idx[rows], n)
    first = _first_of_key(literal)
    repeats = np.flatnonzero(first != np.arange(len(rows)))
    if len(repeats):
        r, f = rows[repeats[0]], rows[first[repeats[0]]]
        same = "the same value" if values[r] == values[f] else f"{float(values[r])!r} after {float(values[f])!r}"
        raise InputError(f"{where} line {lines[r]}: {_label(idx[r])} is given again ({same}; first on "
                         f"line {lines[f]}); each entry must appear once")
    first = _first_of_key(cls)
    apart = np.flatnonzero(np.abs(values[rows] - values[rows[first]]) > SYMMETRY_TOL)
    if len(apart):
        r, f = rows[apart[0]], rows[first[apart[0]]]
        kind = "one-electron" if idx[r][2] == 0 else "two-electron"
        raise InputError(f"{where} line {lines[r]}: {_label(idx[r])} = {float(values[r])!r} differs from its symmetric "
                         f"partner {_label(idx[f])} = {float(values[f])!r} on line {lines[f]} by more than {SYMMETRY_TOL:g}: "
                         f"the {kind} integrals are not symmetric")
    return rows[np.unique(first)]


def _check_complete(idx: np.ndarray, lines: np.ndarray, n: int, norb_line: int, where: str) -> None:
    two, one, core = _kinds(idx)
    if not core.any():
        raise InputError(f"{where} line {lines[-1]}: the file ends without the core-energy line "
                         "'value 0 0 0 0', which FCIDUMP writers put last: the file looks truncated")
    last = int(np.flatnonzero(core)[0])
    if last != len(idx) - 1:
        raise InputError(f"{where} line {lines[last + 1]}: an entry follows the core-energy line (line "
                         f"{lines[last]}), which FCIDUMP writers put last: the file looks damaged or concatenated")
    present = np.zeros(n + 1, dtype=bool)
    present[idx[two | one].ravel()] = True
    missing = np.flatnonzero(~present[1:]) + 1
    if len(missing):
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise InputError(f"{where} line {norb_line}: NORB={n} but orbital(s) {shown} appear in no integral "
                         f"({len(missing)} of {n}): the header does not match the integrals")


def _fill(values: np.ndarray, idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    two, one, core = _kinds(idx)
    i, j, k, l = (idx - 1).T
    eri = np.zeros((n, n, n, n))
    a, b, c, d, v = i[two], j[two], k[two], l[two], values[two]
    for p, q, r, s in ((a, b, c, d), (b, a, c, d), (a, b, d, c), (b, a, d, c)):
        eri[p, q, r, s] = v
        eri[r, s, p, q] = v
    h1e = np.zeros((n, n))
    h1e[i[one], j[one]] = values[one]
    h1e[j[one], i[one]] = values[one]
    return h1e, eri, float(values[core][0])


def read_fcidump(path: str | Path) -> MolecularHamiltonian:
    """Read an FCIDUMP file strictly (rules in the module docstring); InputError names the line at fault."""
    where = _where(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {where}: {exc.__class__.__name__}") from None
    fields, n_header = _split_header(text, where)
    n, n_alpha, n_beta = _header_sizes(fields, where)
    values, idx, lines = _body_table(text.splitlines()[n_header:], n_header + 1, where)
    _check_indices(idx, lines, n, where)
    keep = _check_entries(values, idx, lines, n, where)
    _check_complete(idx, lines, n, fields["NORB"][1], where)
    # Filled from our validated table, not pyscf.tools.fcidump.read: that reader takes an 'i 0 0 0' line
    # for the core energy, stops at a blank line, cannot parse 1.0D-01 (test_fcidump_strict.py shows each).
    h1e, eri, e_core = _fill(values[keep], idx[keep], n)
    return MolecularHamiltonian(h1e, eri, e_core, n, n_alpha, n_beta, f"FCIDUMP {Path(path).name}",
                                determinant_energy(h1e, eri, e_core, n_alpha, n_beta), "FCIDUMP")


def hamiltonian_from_fcidump(spec: MoleculeSpec) -> MolecularHamiltonian:
    """Read the spec's FCIDUMP file and apply its active space (frozen core in the MO basis)."""
    ham = read_fcidump(spec.fcidump)
    if spec.active is None:  # named as a cache hit names it (a run's checkpoint holds the name)
        return replace(ham, description=spec.describe())
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
    """Write ``ham`` as an FCIDUMP file (integrals with |value| <= tol are omitted; core line last)."""
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
