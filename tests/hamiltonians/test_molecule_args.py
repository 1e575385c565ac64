import pytest

from hamiltonians import InputError
from nnqs.cli import OneLineParser
from nnqs.cli.molecule_args import add_molecule_arguments, spec_from_args


def _spec(argv):
    parser = OneLineParser(prog="t")
    add_molecule_arguments(parser)
    return spec_from_args(parser.parse_args(argv))


def test_catalog_geometry_xyz_and_fcidump(tmp_path):
    spec = _spec(["n2", "--basis", "6-31g", "--active", "6", "6"])
    assert (spec.name, spec.basis, spec.active) == ("N2", "6-31g", (6, 6))
    spec = _spec(["--geometry", "H 0 0 0; H 0 0 1.4", "--charge", "1", "--spin", "1"])
    assert (spec.charge, spec.spin, spec.name) == (1, 1, None)
    xyz = tmp_path / "h2.xyz"
    xyz.write_text("2\n\nH 0 0 0\nH 0 0 0.74\n")
    assert _spec(["--xyz", str(xyz)]).name == "h2"
    dump = tmp_path / "x.fcidump"
    dump.write_text(" &FCI NORB=1,NELEC=1,MS2=1,\n &END\n -0.5 1 1 0 0\n")
    assert _spec(["--fcidump", str(dump)]).fcidump == str(dump)


@pytest.mark.parametrize("argv, fragment", [
    ([], "exactly one"),
    (["H2", "--xyz", "a.xyz"], "NAME and --xyz"),
    (["--fcidump", __file__, "--spin", "2"], "--spin cannot be used with --fcidump"),
])
def test_conflicts(argv, fragment):
    with pytest.raises(InputError, match=fragment):
        _spec(argv)
