import pytest

from hamiltonians import InputError, MoleculeSpec
from hamiltonians.spec import electron_count, formula, parse_geometry, read_xyz, split_electrons


def test_parse_geometry_accepts_semicolons_newlines_and_commas():
    atoms = parse_geometry("N 0 0 0; n1 0,0,1.0977\nH 1 2 3")
    assert atoms == [("N", 0.0, 0.0, 0.0), ("N1", 0.0, 0.0, 1.0977), ("H", 1.0, 2.0, 3.0)]
    assert formula("O 0 0 0; H 0 0 1; H 0 1 0") == "OH2"
    assert electron_count("O 0 0 0; H 0 0 1; H 0 1 0", charge=1) == 9


@pytest.mark.parametrize("atom, fragment", [
    ("", "no atoms"),
    ("N 0 0 0; N 0 0", "atom 2 'N 0 0'"),
    ("Xx 0 0 0", "unknown element 'Xx'"),
    ("H 0 0 zero", "must be numbers"),
    ("H 0 0 nan", "finite"),
    ("H 0 0 0; H 0 0 0.05", "atoms 1 and 2"),
])
def test_malformed_geometry_names_the_part(atom, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_geometry(atom)


def test_spec_validates_charge_spin_and_active_space():
    with pytest.raises(InputError, match="impossible"):
        MoleculeSpec(atom="H 0 0 0; H 0 0 0.74", spin=1)
    with pytest.raises(InputError, match="electrons"):
        MoleculeSpec(atom="H 0 0 0; H 0 0 0.74", charge=2)
    with pytest.raises(InputError, match=">= 0"):
        MoleculeSpec(atom="H 0 0 0", spin=-1)
    with pytest.raises(InputError, match="doubly occupied"):
        MoleculeSpec(atom="Li 0 0 0; H 0 0 1.6", active=(3, 3))
    with pytest.raises(InputError, match="do not fit"):
        MoleculeSpec(atom="Li 0 0 0; H 0 0 1.6", active=(1, 4))
    with pytest.raises(InputError, match="exactly one"):
        MoleculeSpec(name="x")
    assert split_electrons(9, 1, "x") == (5, 4)


def test_key_is_stable_and_ignores_the_name():
    a = MoleculeSpec(name="a", atom="H 0 0 0; H 0 0 0.7414", basis="STO-3G")
    b = MoleculeSpec(name="b", atom="H 0 0 0\nH 0, 0, 0.74140", basis="sto-3g")
    c = MoleculeSpec(atom="H 0 0 0; H 0 0 0.75")
    assert a.key() == b.key() != c.key()
    assert a.key() != MoleculeSpec(atom=a.atom, active=(2, 2)).key()
    assert "sto-3g" in c.describe() and "H2" in c.describe()


def test_read_xyz(tmp_path):
    good = tmp_path / "w.xyz"
    good.write_text("3\nwater\nO 0 0 0\nH 0 0.757 0.587\nH 0 -0.757 0.587\n")
    assert electron_count(read_xyz(good)) == 10
    bad = tmp_path / "bad.xyz"
    bad.write_text("4\nwater\nO 0 0 0\nH 0 0.757 0.587\n")
    with pytest.raises(InputError, match="says 4 atoms but has 2"):
        read_xyz(bad)
    with pytest.raises(InputError, match="cannot read"):
        read_xyz(tmp_path / "missing.xyz")


def test_element_table_comes_from_pyscf_and_reaches_past_xenon():
    from hamiltonians.spec import atomic_number

    # Z by hand for a few elements, then the whole periodic table is known
    assert [atomic_number(s) for s in ("H", "He", "O", "Xe", "U", "Og")] == [1, 2, 8, 54, 92, 118]
    assert atomic_number("Xx") is None and atomic_number("X") is None  # X is PySCF's ghost atom
    assert electron_count("U 0 0 0") == 92


def test_an_element_without_the_basis_is_one_clear_error():
    from hamiltonians import build_hamiltonian

    with pytest.raises(InputError, match="unknown basis 'sto-3g' for element U"):
        build_hamiltonian(MoleculeSpec(atom="U 0 0 0; H 0 0 2", spin=1), cache=False)
