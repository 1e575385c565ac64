"""Fuzzing molecule input: geometry strings, XYZ files and the molecule options of `nnqs exact`.

Every case ends in a parsed result or one clear line with exit code 2, never a traceback.
"""
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nnqs.cli.exact
from fuzz_support import FUZZ, TEXT, run_cli, stub
from hamiltonians import InputError, MoleculeSpec
from hamiltonians.spec import atomic_number, parse_geometry, read_xyz

SYMBOLS = st.sampled_from(["H", "He", "Li", "h", "HE", "H1", "Li2", "X", "Hx", "", "Q", "C", "O", "Xe", "H١"])
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-5, 5).map(str),
    st.sampled_from(["1e400", "-0", "nan", "inf", "1_0", "0x1", "", "a", "1,2", "１"]),
)
ATOM = st.tuples(SYMBOLS, st.lists(NUMBERS, min_size=0, max_size=5)).map(lambda a: " ".join([a[0], *a[1]]))
GEOMETRY = st.one_of(
    TEXT,
    st.lists(ATOM, min_size=0, max_size=4).flatmap(
        lambda atoms: st.sampled_from([";", "\n", "; ", ",", ";;"]).map(lambda sep: sep.join(atoms))),
)


def check_parsed(atoms):
    assert atoms
    for symbol, *xyz in atoms:
        assert atomic_number(symbol.rstrip("0123456789")) is not None
        assert all(isinstance(c, float) and math.isfinite(c) for c in xyz) and len(xyz) == 3


@FUZZ
@given(GEOMETRY, st.integers(-3, 3), st.integers(-2, 4),
       st.one_of(st.none(), st.tuples(st.integers(-1, 4), st.integers(-1, 5))))
def test_geometry_parser_and_spec_accept_or_raise_input_error(atom, charge, spin, active):
    try:
        check_parsed(parse_geometry(atom))
        MoleculeSpec(atom=atom, charge=charge, spin=spin, active=active)
    except InputError as exc:
        assert "\n" not in str(exc) or "\n" in atom or "\r" in atom  # the message quotes the input with repr
        assert "\n" not in repr(str(exc))


@pytest.fixture
def no_references(monkeypatch):
    monkeypatch.setattr(nnqs.cli.exact, "exact_references", stub)


@FUZZ
@given(atom=GEOMETRY, extra=st.lists(st.sampled_from(
    ["--charge", "--spin", "--basis", "--active", "1", "-1", "2", "sto-3g", "nope", "6-31g", "x", "0"]), max_size=5))
def test_exact_geometry_cli_is_one_line_or_success(no_references, atom, extra):
    run_cli(["exact", "--geometry", atom, *extra])


XYZ = st.one_of(
    TEXT,
    st.tuples(st.sampled_from(["2", "1", "0", "-1", "x", "", "3 atoms", "99999999999999999999"]), TEXT,
              st.lists(ATOM, max_size=3)).map(lambda t: "\n".join([t[0], t[1].replace("\n", " "), *t[2]])),
)


@FUZZ
@given(text=XYZ)
def test_xyz_files_are_read_or_refused_with_one_line(no_references, text):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.xyz"
        path.write_text(text, encoding="utf-8")
        try:
            check_parsed(parse_geometry(read_xyz(path)))
        except InputError:
            pass
        run_cli(["exact", "--xyz", str(path)])


@settings(max_examples=12, deadline=None)
@given(a=st.sampled_from(["H", "He", "Li"]), b=st.sampled_from(["H", "He"]), r=st.floats(0.1, 4.0),
       charge=st.integers(-1, 1), spin=st.integers(0, 2))
def test_small_real_molecules_give_energies_or_one_line(a, b, r, charge, spin):
    code, _ = run_cli(["exact", "--geometry", f"{a} 0 0 0; {b} 0 0 {r!r}", "--charge", str(charge),
                       "--spin", str(spin), "--no-cache", "--json"])
    assert code in (0, 2)


@pytest.fixture
def scf_reached(monkeypatch):
    """The SCF stands in for all the work after the size checks: reaching it counts as success."""
    import hamiltonians.integrals

    monkeypatch.setattr(hamiltonians.integrals, "run_scf", stub)


@FUZZ
@given(n_atoms=st.integers(1, 260), basis=st.sampled_from(["sto-3g", "6-31g", "cc-pvdz"]),
       method=st.sampled_from(["fci", "ed"]),
       active=st.one_of(st.none(), st.tuples(st.integers(-1, 40), st.integers(-1, 40))))
def test_size_checks_refuse_in_one_line_or_reach_the_scf(scf_reached, n_atoms, basis, method, active):
    geometry = "; ".join(f"H 0 0 {0.9 * i:.1f}" for i in range(n_atoms))
    argv = ["exact", "--geometry", geometry, "--basis", basis, "--spin", str(n_atoms % 2), "--method", method]
    code, lines = run_cli(argv + (["--active", *map(str, active)] if active else []) + ["--no-cache"])
    if code == 2 and ("too large" in lines[0] or "too many" in lines[0]):
        assert "--active" in lines[0]


BENZENE = ("C 0.000 1.396 0; C 1.209 0.698 0; C 1.209 -0.698 0; C 0.000 -1.396 0; C -1.209 -0.698 0; "
           "C -1.209 0.698 0; H 0.000 2.479 0; H 2.147 1.240 0; H 2.147 -1.240 0; H 0.000 -2.479 0; "
           "H -2.147 -1.240 0; H -2.147 1.240 0")


@pytest.mark.parametrize("argv, files, fragment", [
    (["exact", "--geometry", BENZENE, "--basis", "cc-pvtz", "--method", "ed"], {}, "too large for --method ed"),
    (["exact", "--xyz", "m.xyz"], {"m.xyz": "2\ncomment\nH 0 0 0\nH 0 0\n"}, "atom 2 'H 0 0'"),
    (["exact", "--fcidump", "F"], {"F": "&FCI NORB=1,NELEC=1,MS2=1\n&END\n-0.5 1 1 0 0\n0.1 0 0 0 0\n0.1 0 0 0 0\n"},
     "line 5: the core energy is given again"),
])
def test_real_process_refuses_with_one_line_and_exit_2(tmp_path, argv, files, fragment):
    """A handful of checks through the installed entry point, in a fresh process."""
    import subprocess
    import sys

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = subprocess.run([sys.executable, "-m", "nnqs", *argv, "--no-cache"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
