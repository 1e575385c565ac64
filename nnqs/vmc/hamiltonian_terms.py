"""Single and double excitations of a batch, vectorised: key deltas, signs, matrix elements.

Helpers of :meth:`nnqs.vmc.compact_hamiltonian.CompactHamiltonian.connections`. Each returns
a list of ``(key_delta (B, K, W) int64, element (B, K) float64)`` blocks. Signs
are the Jordan-Wigner parities of the ordered operator products on
``|x> = prod_{q ascending} a+_q |vac>``: ``below[b, q]`` counts the occupied
spin-orbitals of sample b before spin-orbital q.
"""
from __future__ import annotations

import torch


def _key_delta(ham, moves: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """Packed-key change ``(B, K, W)`` of token changes ``[(spatial orbital (B, K), delta), ...]``."""
    words = []
    for w in range(ham.n_words):
        total = 0
        for orb, delta in moves:
            term = ham.place[orb] * delta
            total = total + (term if ham.n_words == 1 else term * (ham.word[orb] == w))
        words.append(total)
    return torch.stack(words, dim=-1)


def _sign(parity: torch.Tensor) -> torch.Tensor:
    return 1.0 - 2.0 * (parity & 1).double()


def _at(below: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``below[b, q[b, k]]`` -> (B, K)."""
    return below.gather(1, q)


def single_terms(ham, tokens, order_a, order_b, below) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """a+_A a_I for each spin: element h_ia + sum_k n_k (ia|kk) - sum_{k same spin} n_k (ik|ka)."""
    n = ham.n_orbitals
    n_tot = ((tokens & 1) + (tokens >> 1)).double()
    coulomb = n_tot @ ham.single_j.T  # (B, n*n)
    blocks = []
    for spin, order, n_occ, table in ((0, order_a, ham.n_alpha, ham.singles_a), (1, order_b, ham.n_beta, ham.singles_b)):
        if table.numel() == 0:
            continue
        i = order[:, table[:, 0]]
        a = order[:, n_occ + table[:, 1]]
        n_spin = ((tokens >> spin) & 1).double()
        fock = ham.h1e.reshape(1, -1) + coulomb - n_spin @ ham.single_k.T  # (B, n*n)
        element = fock.gather(1, i * n + a)
        so_i, so_a = 2 * i + spin, 2 * a + spin
        parity = _at(below, so_i) + _at(below, so_a) - (so_i < so_a).long()
        blocks.append((_key_delta(ham, [(i, -(1 << spin)), (a, 1 << spin)]), _sign(parity) * element))
    return blocks


def _double_parity(below, si, sj, sa, sb) -> torch.Tensor:
    """Parity of a+_A a+_B a_J a_I on |x> (spin-orbital indices, each (B, K))."""
    p = _at(below, si)
    p = p + _at(below, sj) - (si < sj).long()
    p = p + _at(below, sb) - (si < sb).long() - (sj < sb).long()
    return p + _at(below, sa) - (si < sa).long() - (sj < sa).long() + (sb < sa).long()


def _eri(ham, p, q, r, s) -> torch.Tensor:
    n = ham.n_orbitals
    return ham.eri_flat[((p * n + q) * n + r) * n + s]


def double_terms(ham, order_a, order_b, below) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """a+_A a+_B a_J a_I: same spin <AB||IJ> = (ai|bj) - (aj|bi); opposite spin (ai|bj)."""
    blocks = []
    for spin, order, n_occ, table in ((0, order_a, ham.n_alpha, ham.doubles_aa), (1, order_b, ham.n_beta, ham.doubles_bb)):
        if table.numel() == 0:
            continue
        i, j = order[:, table[:, 0]], order[:, table[:, 1]]
        a, b = order[:, n_occ + table[:, 2]], order[:, n_occ + table[:, 3]]
        element = _eri(ham, a, i, b, j) - _eri(ham, a, j, b, i)
        parity = _double_parity(below, 2 * i + spin, 2 * j + spin, 2 * a + spin, 2 * b + spin)
        d = 1 << spin
        blocks.append((_key_delta(ham, [(i, -d), (j, -d), (a, d), (b, d)]), _sign(parity) * element))
    table = ham.doubles_ab
    if table.numel():
        i, j = order_a[:, table[:, 0]], order_b[:, table[:, 1]]
        a, b = order_a[:, ham.n_alpha + table[:, 2]], order_b[:, ham.n_beta + table[:, 3]]
        element = _eri(ham, a, i, b, j)
        parity = _double_parity(below, 2 * i, 2 * j + 1, 2 * a, 2 * b + 1)
        blocks.append((_key_delta(ham, [(i, -1), (j, -2), (a, 1), (b, 2)]), _sign(parity) * element))
    return blocks
