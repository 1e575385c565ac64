"""Shared fixtures: Hamiltonians built once per session (the private cache is in tests/conftest.py)."""
from __future__ import annotations

import pytest

from hamiltonians import build_hamiltonian, get_spec


@pytest.fixture(scope="session")
def hams():
    """{name: MolecularHamiltonian} for small catalog molecules (STO-3G), built without cache."""
    return {name: build_hamiltonian(get_spec(name), cache=False) for name in ("H2", "LiH", "H2O")}
