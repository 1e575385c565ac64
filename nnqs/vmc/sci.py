"""A selected-CI vector grown by Hamiltonian connectivity (CIPSI-like): the network's teacher.

Start from the Hartree-Fock determinant; each round diagonalise H on the set, then add the
outside configurations a whose first-order amplitude |<a|H|c>| / |E - H[a, a]| is at least
``threshold``, largest first: at most as many as the set already holds (at least
``MIN_GROWTH``), so the set at most doubles per round, up to ``max_size``. Stops when nothing is
added, or when a round adds less than 1% of the set. Doubling rather than filling the cap in one round matters where the Hartree-Fock
vector is a poor guide: on N2/6-31G at 2.2 Angstrom a set of 4,096 is 19.9 mHa above DMRG
grown by doubling and 49.2 mHa filled from the third round's vector (benchmarks/RESULTS.md).
The vector is a variational state in its own right (its energy is an upper bound), but what it is for here
is a target for the supervised pretraining of the network (:mod:`nnqs.vmc.pretrain`): it
carries the quadruple excitations, with their signs, that sampling never finds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.selection import CoreHamiltonian, external_chunks, external_space, matrix_eigenpairs

MIN_GROWTH = 16  # configurations a round may add however small the set
# A round that adds fewer than this fraction of the set ends the growth: on H10 at 1.5 Angstrom the rounds
# after 34,515 configurations added 58 and 3 at about 35 s each, and moved the energy by 0.3 microhartree.
STALL_FRACTION = 0.01


@dataclass
class SelectedCI:
    """``configs`` ``(M, n)``, their coefficients ``(M,)`` float64 (normalised) and the energy (Hartree)."""

    configs: torch.Tensor
    coefficients: torch.Tensor
    energy: float
    rounds: int


def selected_ci(
    ham: CompactHamiltonian, seed: torch.Tensor, threshold: float = 1e-4, max_size: int = 4096, max_rounds: int = 40,
    roots: int = 3, on_round: Callable[[int, int, float], None] | None = None,
) -> SelectedCI:
    """Grow a set from ``seed`` ``(S, n)`` configurations (see module docstring) -> :class:`SelectedCI`.

    The set grows by the first-order amplitudes of its ``roots`` lowest eigenvectors, not the
    lowest alone: at stretched bonds the lowest state of a small set can be of another spin
    than the ground state (N2 at 2.2 Angstrom: a quintet 12.9 mHa above the singlet), and a
    set grown only around it never describes the true ground state. ``on_round(round, size,
    energy)`` is called after each round (progress).
    """
    configs = seed
    h = CoreHamiltonian(ham, configs)  # H on the set, grown round by round (only the new rows enumerated)
    energies, vectors = matrix_eigenpairs(h.matrix, roots)
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        if len(configs) >= max_size:
            break
        chosen = _first_order_additions(ham, configs, energies, vectors, threshold)
        if len(chosen) == 0:
            break
        room = min(max_size - len(configs), max(len(configs), MIN_GROWTH))
        added = min(room, len(chosen))
        configs = torch.cat([configs, chosen[:room]])
        h = CoreHamiltonian(ham, configs, h)
        energies, vectors = matrix_eigenpairs(h.matrix, roots)
        if on_round is not None:
            on_round(rounds, len(configs), float(energies[0]))
        if added < STALL_FRACTION * len(configs):  # the set has stopped growing: another round buys nothing
            break
    vec = vectors[:, 0]
    sign = 1.0 if vec[0] >= 0 else -1.0
    coefficients = torch.as_tensor(sign * vec, dtype=torch.float64, device=configs.device)
    return SelectedCI(configs, coefficients, float(energies[0]), rounds)


def _first_order_additions(
    ham: CompactHamiltonian, configs: torch.Tensor, energies: np.ndarray, vectors: np.ndarray, threshold: float,
) -> torch.Tensor:
    """Outside configurations whose first-order amplitude in any of the vectors is >= ``threshold``,
    largest first ``(A, n)`` (the numerators of all the vectors from one pass over the connections)."""
    keys, numerators = external_space(ham, configs, torch.as_tensor(vectors, device=configs.device))
    chosen, amplitudes = [configs[:0]], [torch.zeros(0, dtype=torch.float64, device=configs.device)]
    for outside, part, h_aa in external_chunks(ham, keys, numerators, configs.shape[1], configs.device):
        gaps = h_aa.unsqueeze(1) - torch.as_tensor(energies, device=configs.device)
        best = (part.abs() / gaps.abs().clamp(min=1e-8)).amax(1)
        passing = best >= threshold
        chosen.append(outside[passing]), amplitudes.append(best[passing])
    best = torch.cat(amplitudes)
    return torch.cat(chosen)[torch.argsort(best, descending=True)]
