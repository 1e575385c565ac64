import math

import pytest

from hamiltonians import CATALOG, InputError, catalog_names, get_spec
from hamiltonians.catalog import minimal_basis_size
from hamiltonians.spec import parse_geometry


def test_catalog_has_the_required_molecules_with_sources():
    for name in ("H2", "LiH", "BeH2", "H2O", "NH3", "CH4", "N2"):
        assert name in catalog_names()
        assert "CCCBDB" in CATALOG[name].source


def _dist(a, b):
    return math.dist(a[1:], b[1:])


def _angle(center, a, b):
    u = [p - c for p, c in zip(a[1:], center[1:])]
    v = [p - c for p, c in zip(b[1:], center[1:])]
    return math.degrees(math.acos(sum(x * y for x, y in zip(u, v)) / math.hypot(*u) / math.hypot(*v)))


def test_geometries_match_their_cited_values():
    h2o = parse_geometry(CATALOG["H2O"].atom)
    assert _dist(h2o[0], h2o[1]) == pytest.approx(0.9578, abs=1e-5)
    assert _angle(*h2o) == pytest.approx(104.48, abs=1e-3)
    nh3 = parse_geometry(CATALOG["NH3"].atom)
    assert all(_dist(nh3[0], h) == pytest.approx(1.0124, abs=1e-5) for h in nh3[1:])
    assert _angle(nh3[0], nh3[1], nh3[2]) == pytest.approx(106.67, abs=1e-3)
    ch4 = parse_geometry(CATALOG["CH4"].atom)
    assert _angle(ch4[0], ch4[1], ch4[2]) == pytest.approx(109.4712, abs=1e-3)
    beh2 = parse_geometry(CATALOG["BeH2"].atom)
    assert _angle(*beh2) == pytest.approx(180.0)
    assert _dist(*parse_geometry(CATALOG["N2"].atom)) == pytest.approx(1.0977)


def test_minimal_basis_size_counts_sto3g_functions():
    # STO-3G: one 1s function per H/He, 1s 2s 2p (5) per Li-Ne; by hand, not by PySCF.
    expected = {"H2": 2, "LiH": 6, "BeH2": 7, "H2O": 7, "NH3": 8, "CH4": 9, "N2": 10, "HF": 6, "CO": 10, "C2": 10}
    assert {name: minimal_basis_size(entry.atom) for name, entry in CATALOG.items()} == expected


def test_get_spec_is_case_insensitive_and_lists_names_on_error():
    assert get_spec("lih").name == "LiH"
    assert get_spec("N2", basis="6-31g", active=(6, 6)).active == (6, 6)
    with pytest.raises(InputError, match="H2, LiH, BeH2"):
        get_spec("unobtainium")
