"""Fuzzing FCIDUMP files: the reader returns a Hamiltonian or raises one InputError line;
`nnqs exact --fcidump` on small files gives energies or exits 2 with one line."""
import math
import re
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fuzz_support import FUZZ, TEXT, run_cli
from hamiltonians import InputError
from hamiltonians.fcidump import read_fcidump

VALUE = st.one_of(st.floats(-2, 2).map(repr), st.sampled_from(["1.0D-01", "nan", "inf", "-1e999", "x", "1e5"]))
INDEX = st.one_of(st.integers(-1, 5).map(str), st.sampled_from(["1.5", "a", "0x1"]))
LINE = st.one_of(
    st.tuples(VALUE, INDEX, INDEX, INDEX, INDEX).map(" ".join),
    st.tuples(VALUE, st.integers(1, 3), st.integers(1, 3), st.integers(0, 3), st.integers(0, 3))
    .map(lambda t: " ".join(map(str, t))),
    TEXT.map(lambda t: t.replace("\n", " ")),
)
FIELD = st.one_of(st.integers(-2, 7).map(str), st.sampled_from(["", "x", "2.0", "99999999"]))


@st.composite
def fcidump_text(draw):
    fields = {"NORB": draw(FIELD), "NELEC": draw(FIELD), "MS2": draw(FIELD)}
    present = [f"{k}={v}" for k, v in fields.items() if draw(st.booleans()) or k == "NORB"]
    if draw(st.booleans()):
        present.append(draw(st.sampled_from(["UHF=.TRUE.", "ORBSYM=1,1,1,", "ISYM=1", "X"])))
    start = draw(st.sampled_from(["&FCI", " &fci", "FCI", ""]))
    end = draw(st.sampled_from(["&END", "/", " &end", ""]))
    body = draw(st.lists(LINE, max_size=12))
    return "\n".join([f"{start} {', '.join(present)},", end, *body]) + "\n"


def read(text: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "FCIDUMP"
        path.write_text(text, encoding="utf-8")
        return read_fcidump(path)


@FUZZ
@given(st.one_of(TEXT, fcidump_text()))
@example("&FCI NORB=2, NELEC=2, MS2=0,\n&END\nnan 1 1 0 0\n1.0 0 0 0 0\n")
@example("&FCI NORB=2, NELEC=2, MS2=0,\n&END\n1e999 1 1 1 1\n")
@example("&FCI NORB=99999999, NELEC=2, MS2=0,\n&END\n1.0 1 1 0 0\n")
@example("&FCI NORB=300, NELEC=2, MS2=0,\n&END\n1.0 1 1 0 0\n")
def test_reader_returns_a_hamiltonian_or_raises_input_error(text):
    try:
        ham = read(text)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= ham.n_orbitals and ham.n_alpha + ham.n_beta >= 1
    assert np.isfinite(ham.h1e).all() and np.isfinite(ham.eri).all() and math.isfinite(ham.e_core)


@st.composite
def valid_integrals(draw):
    """(n, n_electrons, ms2, h1e, eri (n,)*4 8-fold symmetric, e_core) of a small made-up system."""
    n = draw(st.integers(1, 3))
    n_el = draw(st.integers(1, 2 * n))
    ms2 = draw(st.sampled_from([s for s in range(n_el + 1) if (n_el - s) % 2 == 0 and (n_el + s) // 2 <= n]))
    value = st.floats(-1, 1, allow_subnormal=False)
    h1e = np.array(draw(st.lists(value, min_size=n * n, max_size=n * n))).reshape(n, n)
    h1e = h1e + h1e.T + np.diag(draw(st.lists(st.floats(0.1, 2), min_size=n, max_size=n)))
    raw = np.array(draw(st.lists(value, min_size=n**4, max_size=n**4))).reshape((n,) * 4)
    eri = sum(raw.transpose(p) for p in ((0, 1, 2, 3), (1, 0, 2, 3), (0, 1, 3, 2), (1, 0, 3, 2)))
    eri = eri + eri.transpose(2, 3, 0, 1)
    return n, n_el, ms2, h1e, eri, draw(st.floats(-5, 5))


def pyscf_file(integrals) -> str:
    """The text PySCF's writer makes of ``integrals`` (core line last)."""
    from pyscf.tools import fcidump

    n, n_el, ms2, h1e, eri, e_core = integrals
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "FCIDUMP"
        fcidump.from_integrals(str(path), h1e, eri, n, n_el, nuc=e_core, ms=ms2)
        return path.read_text()


def read_both(text: str):
    """(ours or the InputError, PySCF's (H1, H2 restored, ECORE) or None where it fails) of one file text."""
    from pyscf import ao2mo
    from pyscf.tools import fcidump

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "FCIDUMP"
        path.write_text(text)
        try:
            ours = read_fcidump(path)
        except InputError as exc:
            ours = exc
        try:
            data = fcidump.read(str(path), verbose=False)
        except (ValueError, IndexError):  # PySCF's reader: a Fortran exponent, an index past NORB
            return ours, None
        return ours, (data["H1"], ao2mo.restore(1, data["H2"], data["NORB"]), data.get("ECORE"))


@settings(max_examples=60, deadline=None)
@given(valid_integrals())
def test_valid_files_read_as_pyscf_reads_them(integrals):
    ours, (h1e, eri, e_core) = read_both(pyscf_file(integrals))
    assert not isinstance(ours, InputError), ours
    np.testing.assert_array_equal(ours.h1e, h1e)
    np.testing.assert_array_equal(ours.eri, eri)
    assert ours.e_core == e_core and ours.n_electrons == integrals[1]


def _mutate(lines: list[str], kind: str, data) -> list[str]:
    body = list(range(4, len(lines) - 1))  # header is 4 lines, the core line last
    k = data.draw(st.sampled_from(body), label="line")
    value, *idx = lines[k].split()
    if kind == "duplicate":
        where = data.draw(st.integers(k + 1, len(lines)), label="at")
        return lines[:where] + [lines[k]] + lines[where:]
    if kind == "asymmetric":
        i, j, a, b = idx
        partner = f"{j} {i} {a} {b}" if a == "0" else f"{a} {b} {i} {j}" if (i, j) != (a, b) else f"{j} {i} {b} {a}"
        if i == j and (a == "0" or a == b):  # a diagonal entry has no distinct partner: change it twice instead
            partner = " ".join(idx)
        return lines[:-1] + [f" {float(value) + data.draw(st.sampled_from([1e-6, -0.3, 2.0]))!r} {partner}", lines[-1]]
    if kind == "truncate":
        return lines[:data.draw(st.integers(5, len(lines) - 1), label="keep")]
    if kind == "norb":
        grow = data.draw(st.integers(1, 100), label="grow")
        return [re.sub(r"NORB=\s*(\d+)", lambda m: f"NORB={int(m.group(1)) + grow}", lines[0])] + lines[1:]
    if kind == "outside":
        return lines[:-1] + [f" 0.5 {len(lines)} 1 0 0", lines[-1]]  # more lines than orbitals: out of range
    if kind == "blank":
        return lines[:k] + [""] + lines[k:]
    if kind == "swap":
        other = data.draw(st.sampled_from(body), label="other")
        swapped = list(lines)
        swapped[k], swapped[other] = lines[other], lines[k]
        return swapped
    assert kind == "fortran"
    return lines[:k] + [f" {float(value):.17E} {' '.join(idx)}".replace("E", "D")] + lines[k + 1:]


REFUSED = ("duplicate", "asymmetric", "truncate", "norb", "outside")


@settings(max_examples=200, deadline=None)
@given(integrals=valid_integrals(), kind=st.sampled_from([*REFUSED, "blank", "swap", "fortran"]), data=st.data())
def test_each_lie_in_a_valid_file_is_refused_and_harmless_changes_are_not(integrals, kind, data):
    lines = pyscf_file(integrals).splitlines()
    original, _ = read_both("\n".join(lines) + "\n")
    mutated, _ = read_both("\n".join(_mutate(lines, kind, data)) + "\n")
    if kind in REFUSED:
        assert isinstance(mutated, InputError), (kind, lines)
        assert "\n" not in str(mutated) and re.search(r"FCIDUMP '.*' line \d+: ", str(mutated)), str(mutated)
    else:
        assert not isinstance(mutated, InputError), (kind, mutated)
        np.testing.assert_array_equal(mutated.h1e, original.h1e)
        np.testing.assert_array_equal(mutated.eri, original.eri)
        assert mutated.e_core == original.e_core


@settings(max_examples=25, deadline=None)
@given(integrals=valid_integrals())
def test_exact_on_small_valid_fcidump_files_gives_energies(integrals):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "FCIDUMP"
        path.write_text(pyscf_file(integrals))
        code, lines = run_cli(["exact", "--fcidump", str(path), "--no-cache", "--json"])
        assert code == 0, lines
