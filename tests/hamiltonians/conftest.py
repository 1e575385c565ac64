"""Shared fixtures: a private cache folder, and Hamiltonians built once per session."""
from __future__ import annotations

import os

import pytest

from hamiltonians import build_hamiltonian, get_spec


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Every test (and subprocess) caches into a fresh folder, never ~/.cache/nnqs."""
    old = os.environ.get("NNQS_CACHE_DIR")
    os.environ["NNQS_CACHE_DIR"] = str(tmp_path_factory.mktemp("nnqs-cache"))
    yield
    if old is None:
        os.environ.pop("NNQS_CACHE_DIR", None)
    else:
        os.environ["NNQS_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def hams():
    """{name: MolecularHamiltonian} for small catalog molecules (STO-3G), built without cache."""
    return {name: build_hamiltonian(get_spec(name), cache=False) for name in ("H2", "LiH", "H2O")}
