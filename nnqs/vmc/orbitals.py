"""Which orbitals a run works in: canonical SCF orbitals, or orbitals localized within the occupied and
the virtual blocks (:func:`hamiltonians.integrals.localized_orbitals`), chosen from the system.

The energy, the sector and FCI do not depend on the choice; how many configurations the state needs
does. In a stretched hydrogen chain the canonical orbitals spread the state over the whole sector
(H10 at 1.5 Angstrom: a selected-CI set of 4,096 is 31.2 mHa above FCI), localized ones gather it
(7.9 mHa with the same 4,096); near equilibrium the canonical ones are as good or better (N2 +3.4
mHa localized at 1,024). The rule: grow a selected-CI set of :data:`PROBE_SIZE` configurations in
both and take the localized orbitals only when their set's energy is lower by more than
:data:`PROBE_MARGIN` (benchmarks/RESULTS.md, "Orbitals").
"""
from __future__ import annotations

import dataclasses
import sys

from hamiltonians import InputError, MolecularHamiltonian, MoleculeSpec, build_hamiltonian
from hamiltonians.sector import sector_dim
from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.configurations import hf_tokens
from nnqs.vmc.sci import selected_ci

PROBE_SIZE = 1024  # configurations of the selected-CI set each orbital choice is judged by
PROBE_MARGIN = 1.6e-3  # Hartree (chemical accuracy): how much lower the localized set must be


def probe_energy(ham: MolecularHamiltonian, threshold: float, size: int = PROBE_SIZE) -> float:
    """Energy (Hartree) of the selected-CI set of at most ``size`` configurations grown from Hartree-Fock."""
    compact = CompactHamiltonian.from_molecular(ham)
    seed = hf_tokens(ham.n_orbitals, ham.n_alpha, ham.n_beta).unsqueeze(0)
    return selected_ci(compact, seed, threshold, size).energy


def hamiltonian_for(spec: MoleculeSpec, orbitals: str, threshold: float, progress: bool = False,
                    ) -> tuple[MolecularHamiltonian, dict]:
    """The Hamiltonian of ``spec`` in the ``orbitals`` asked for ("canonical", "localized", or "auto":
    the rule of the module docstring) and what the result should record of the choice. An FCIDUMP's
    orbitals are used as given. A sector of a single determinant is refused (InputError): its energy
    is Hartree-Fock's, with nothing for a wavefunction to learn."""
    if spec.fcidump is not None or orbitals != "auto":
        chosen = "canonical" if spec.fcidump is not None else orbitals
        return _more_than_one_determinant(build_hamiltonian(dataclasses.replace(spec, orbitals=chosen))), {"orbitals": chosen}
    hams = {o: _more_than_one_determinant(build_hamiltonian(dataclasses.replace(spec, orbitals=o)))
            for o in ("canonical", "localized")}
    energies = {o: probe_energy(h, threshold) for o, h in hams.items()}
    chosen = "localized" if energies["localized"] < energies["canonical"] - PROBE_MARGIN else "canonical"
    if progress and chosen == "localized":  # canonical orbitals are what a run works in unless said
        print(f"orbitals: {chosen} (selected-CI sets of {PROBE_SIZE}: canonical {energies['canonical']:.6f} Ha, "
              f"localized {energies['localized']:.6f} Ha)", file=sys.stderr, flush=True)
    return hams[chosen], {"orbitals": chosen, **{f"e_probe_{o}": e for o, e in energies.items()}}


def _more_than_one_determinant(ham: MolecularHamiltonian) -> MolecularHamiltonian:
    """``ham``, or InputError when its N_alpha/N_beta sector holds a single determinant."""
    if sector_dim(ham.n_orbitals, ham.n_alpha, ham.n_beta) < 2:
        raise InputError(f"{ham.description}: {ham.n_alpha}a+{ham.n_beta}b electrons in {ham.n_orbitals} orbitals "
                         "make a single determinant, whose energy is Hartree-Fock's; there is nothing for VMC to "
                         "optimise (nnqs exact gives it)")
    return ham
