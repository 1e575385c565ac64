"""Molecular Hamiltonians for nnqs: specs and catalog, PySCF integrals, FCIDUMP,
the Jordan-Wigner qubit Hamiltonian, sector matrices and exact references; a PySCF
SCF object or an OpenFermion InteractionOperator passed straight in (``from_pyscf``,
``from_openfermion``).

Conventions (spin-orbital order, Jordan-Wigner signs) are written once, in
:mod:`hamiltonians.qubit`. Energies are in Hartree, lengths in Angstrom.
PySCF and OpenFermion are imported only inside the functions that need them.
This package never imports ``nnqs``.
"""
from hamiltonians.catalog import CATALOG, CatalogEntry, catalog_names, get_spec
from hamiltonians.errors import InputError
from hamiltonians.exact import exact_energy
from hamiltonians.fcidump import read_fcidump, write_fcidump
from hamiltonians.integrals import build_hamiltonian
from hamiltonians.interop import from_openfermion, from_pyscf
from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.qubit import get_qubit_operator
from hamiltonians.references import References, exact_references
from hamiltonians.sector import sector_basis, sector_dim, sector_hamiltonian
from hamiltonians.spec import MoleculeSpec

__all__ = [
    "CATALOG", "CatalogEntry", "InputError", "MolecularHamiltonian", "MoleculeSpec", "References",
    "build_hamiltonian", "catalog_names", "exact_energy", "exact_references", "from_openfermion", "from_pyscf",
    "get_qubit_operator", "get_spec", "read_fcidump", "sector_basis", "sector_dim", "sector_hamiltonian", "write_fcidump",
]
