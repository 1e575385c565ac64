"""A selected-CI vector grown by Hamiltonian connectivity (CIPSI-like): the network's teacher.

Start from the Hartree-Fock determinant; each round diagonalise H on the set, then add every
outside configuration a whose first-order amplitude |<a|H|c>| / |E - H[a, a]| is at least
``threshold``, largest first, up to ``max_size``. Stops when nothing is added. The vector is
a variational state in its own right (its energy is an upper bound), but what it is for here
is a target for the supervised pretraining of the network (:mod:`nnqs.vmc.pretrain`): it
carries the quadruple excitations, with their signs, that sampling never finds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nnqs.vmc.compact_hamiltonian import CompactHamiltonian
from nnqs.vmc.keys import unpack
from nnqs.vmc.selection import external_space, set_hamiltonian


@dataclass
class SelectedCI:
    """``configs`` ``(M, n)``, their coefficients ``(M,)`` float64 (normalised) and the energy (Hartree)."""

    configs: torch.Tensor
    coefficients: torch.Tensor
    energy: float
    rounds: int


def lowest_eigenpair(ham: CompactHamiltonian, configs: torch.Tensor, v0: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Lowest eigenvalue and eigenvector of H on ``configs`` ``(M, n)``."""
    import scipy.sparse.linalg as sla

    h = set_hamiltonian(ham, configs)
    if h.shape[0] <= 200:
        w, v = np.linalg.eigh(h.toarray())
        return float(w[0]), v[:, 0]
    w, v = sla.eigsh(h, k=1, which="SA", v0=v0, tol=1e-10)
    return float(w[0]), v[:, 0]


def selected_ci(
    ham: CompactHamiltonian, seed: torch.Tensor, threshold: float = 1e-4, max_size: int = 4096, max_rounds: int = 12,
) -> SelectedCI:
    """Grow a set from ``seed`` ``(S, n)`` configurations (see module docstring) -> :class:`SelectedCI`."""
    configs = seed
    energy, vec = lowest_eigenpair(ham, configs)
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        keys, numerator = external_space(ham, configs, torch.as_tensor(vec))
        if keys.shape[0] == 0 or len(configs) >= max_size:
            break
        outside = unpack(keys, configs.shape[1])
        first_order = (numerator.abs() / (ham.diagonal(outside) - energy).abs().clamp(min=1e-8))
        chosen = torch.nonzero(first_order >= threshold).squeeze(1)
        if len(chosen) == 0:
            break
        chosen = chosen[torch.argsort(first_order[chosen], descending=True)][: max_size - len(configs)]
        configs = torch.cat([configs, outside[chosen]])
        v0 = np.concatenate([vec, np.zeros(len(chosen))])
        energy, vec = lowest_eigenpair(ham, configs, v0)
    sign = 1.0 if vec[0] >= 0 else -1.0
    return SelectedCI(configs, torch.as_tensor(sign * vec, dtype=torch.float64), energy, rounds)
