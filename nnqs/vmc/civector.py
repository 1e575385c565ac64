"""The network's state as a PySCF CI vector, and back: the bridge to PySCF's RDM and spin routines.

Conventions (written once, here). A configuration is one token per spatial orbital,
``n_alpha + 2 n_beta`` (:mod:`nnqs.vmc.configurations`); its basis state is the Jordan-Wigner one on
the interleaved spin-orbitals ``2p`` (alpha), ``2p + 1`` (beta), ``prod_{P ascending} a+_P |vac>``.
PySCF's ``direct_spin1`` vector ``c[I_a, I_b]`` holds the state ``(prod_alpha a+) (prod_beta a+) |vac>``,
the alpha string first, each string's bit p for orbital p (``cistring.str2addr``). Moving every alpha
operator left past the beta operators of lower orbitals gives the sign between the two:
``(-1)^(sum_q n_alpha(q) * #{p < q : n_beta(p)})``.
"""
from __future__ import annotations

import numpy as np
import torch


def spin_strings(configs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Alpha and beta occupation strings ``(M,)`` int64 (bit p: orbital p) of ``configs`` ``(M, n)``."""
    tokens = configs.cpu().numpy().astype(np.int64)
    place = np.left_shift(np.int64(1), np.arange(tokens.shape[1], dtype=np.int64))
    return ((tokens & 1) * place).sum(1), ((tokens >> 1) * place).sum(1)


def reorder_sign(configs: torch.Tensor) -> np.ndarray:
    """``(M,)`` +-1: the PySCF basis state of each configuration as a multiple of its Jordan-Wigner one."""
    tokens = configs.cpu().numpy().astype(np.int64)
    alpha, beta = tokens & 1, tokens >> 1
    beta_below = np.cumsum(beta, axis=1) - beta  # beta electrons in orbitals p < q
    return np.where((alpha * beta_below).sum(1) % 2 == 1, -1.0, 1.0)


def to_pyscf(configs: torch.Tensor, amplitudes: np.ndarray, n_orbitals: int, nelec: tuple[int, int]) -> np.ndarray:
    """The vector with ``amplitudes`` ``(M,)`` (real) on ``configs`` ``(M, n)`` as PySCF's ``(n_a, n_b)``
    CI array (zero elsewhere)."""
    from pyscf.fci import cistring

    alpha, beta = spin_strings(configs)
    rows = cistring.strs2addr(n_orbitals, nelec[0], alpha)
    cols = cistring.strs2addr(n_orbitals, nelec[1], beta)
    out = np.zeros((cistring.num_strings(n_orbitals, nelec[0]), cistring.num_strings(n_orbitals, nelec[1])))
    out[rows, cols] = np.asarray(amplitudes, dtype=np.float64) * reorder_sign(configs)
    return out
