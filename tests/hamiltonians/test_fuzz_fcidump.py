"""Fuzzing FCIDUMP files: the reader returns a Hamiltonian or raises one InputError line;
`nnqs exact --fcidump` on small files gives energies or exits 2 with one line."""
import math
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
def small_valid_fcidump(draw):
    n = draw(st.integers(1, 3))
    n_el = draw(st.integers(1, 2 * n))
    ms2 = draw(st.sampled_from([s for s in range(0, n_el + 1) if (n_el - s) % 2 == 0 and (n_el + s) // 2 <= n]))
    lines = [f"&FCI NORB={n}, NELEC={n_el}, MS2={ms2},", "&END"]
    for _ in range(draw(st.integers(1, 10))):
        i, j = draw(st.integers(1, n)), draw(st.integers(0, n))
        k, l_ = (draw(st.integers(1, n)), draw(st.integers(1, n))) if j and draw(st.booleans()) else (0, 0)
        lines.append(f"{draw(st.floats(-1, 1))!r} {i} {j if j or not k else 1} {k} {l_}")
    lines.append(f"{draw(st.floats(-5, 5))!r} 0 0 0 0")
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None)
@given(text=small_valid_fcidump())
def test_exact_on_small_fcidump_files_gives_energies_or_one_line(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "FCIDUMP"
        path.write_text(text)
        run_cli(["exact", "--fcidump", str(path), "--no-cache", "--json"])
