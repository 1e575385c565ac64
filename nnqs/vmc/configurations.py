"""Electron configurations as token sequences: the one place the convention is written.

A configuration of ``n`` spatial orbitals is a length-``n`` sequence of tokens,
one per spatial orbital, each in ``0..3``::

    state = n_alpha + 2 * n_beta      0 empty, 1 alpha, 2 beta, 3 doubly occupied

As qubits (Jordan–Wigner, OpenFermion order) it is ``2n`` bits: spin-orbital
``2p`` is spatial orbital ``p`` with spin alpha, ``2p + 1`` the same orbital
with spin beta. :func:`tokens_to_occupations` and :func:`occupations_to_tokens`
convert between the two.

The particle-number sector is enforced orbital by orbital: at orbital ``i``,
with ``a`` alpha and ``b`` beta electrons already placed and ``r = n - i - 1``
orbitals left after ``i``, state ``(sa, sb)`` is allowed iff ``a + sa <= N_alpha``
and ``N_alpha - (a + sa) <= r``, and likewise for beta. Every allowed prefix can
still be completed, so an autoregressive model that puts probability 0 on the
disallowed states is normalised over exactly the ``C(n, N_alpha) * C(n, N_beta)``
configurations of the sector.
"""
from __future__ import annotations

import torch

N_STATES = 4  # tokens 0..3 per spatial orbital
STATE_ALPHA = torch.tensor([0, 1, 0, 1])  # alpha electrons of each state
STATE_BETA = torch.tensor([0, 0, 1, 1])  # beta electrons of each state


def tokens_to_occupations(configs: torch.Tensor, dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    """Token configurations ``(B, n)`` in 0..3 -> spin-orbital occupations ``(B, 2n)``.

    Column ``2p`` is orbital ``p`` alpha, ``2p + 1`` orbital ``p`` beta (OpenFermion order).
    """
    alpha = configs & 1
    beta = (configs >> 1) & 1
    return torch.stack([alpha, beta], dim=-1).flatten(-2).to(dtype)


def occupations_to_tokens(occupations: torch.Tensor) -> torch.Tensor:
    """Spin-orbital occupations ``(B, 2n)`` (0/1, any integer or bool dtype) -> tokens ``(B, n)`` long."""
    occ = occupations.long()
    return occ[..., 0::2] + 2 * occ[..., 1::2]


def hf_tokens(n_orbitals: int, n_alpha: int, n_beta: int) -> torch.Tensor:
    """The Hartree–Fock determinant ``(n,)`` long: lowest ``n_beta`` orbitals doubly occupied,
    the next ``n_alpha - n_beta`` singly occupied (alpha if ``n_alpha >= n_beta``, else beta)."""
    hf = torch.zeros(n_orbitals, dtype=torch.long)
    hf[: max(n_alpha, n_beta)] = 1 if n_alpha >= n_beta else 2
    hf[: min(n_alpha, n_beta)] = 3
    return hf


def allowed_states_table(n_orbitals: int, n_alpha: int, n_beta: int) -> torch.Tensor:
    """Lookup table ``(n, N_alpha + 2, N_beta + 2, 4)`` bool, indexed ``[i, a, b, state]``.

    True iff ``state`` is allowed at orbital ``i`` after ``a`` alpha and ``b`` beta
    electrons were placed on orbitals ``< i``. Index ``N + 1`` stands for "already
    too many" (all states disallowed); clamp counts to it with :func:`clamp_counts`.
    """
    i = torch.arange(n_orbitals).view(-1, 1, 1, 1)
    a = torch.arange(n_alpha + 2).view(1, -1, 1, 1)
    b = torch.arange(n_beta + 2).view(1, 1, -1, 1)
    left = n_orbitals - i - 1
    a_new = a + STATE_ALPHA.view(1, 1, 1, -1)
    b_new = b + STATE_BETA.view(1, 1, 1, -1)
    ok_a = (a_new <= n_alpha) & (n_alpha - a_new <= left)
    ok_b = (b_new <= n_beta) & (n_beta - b_new <= left)
    return ok_a & ok_b


def electrons_before(configs: torch.Tensor, n_alpha: int, n_beta: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Alpha and beta electrons on orbitals before each position, each ``(B, n)`` long,
    clamped to ``N + 1`` so they index :func:`allowed_states_table` safely."""
    alpha = configs & 1
    beta = (configs >> 1) & 1
    a = (alpha.cumsum(-1) - alpha).clamp(max=n_alpha + 1)
    b = (beta.cumsum(-1) - beta).clamp(max=n_beta + 1)
    return a, b


def in_sector(configs: torch.Tensor, n_alpha: int, n_beta: int) -> torch.Tensor:
    """``(B,)`` bool: the configuration has exactly ``N_alpha`` alpha and ``N_beta`` beta electrons."""
    return ((configs & 1).sum(-1) == n_alpha) & (((configs >> 1) & 1).sum(-1) == n_beta)


def sector_size(n_orbitals: int, n_alpha: int, n_beta: int) -> int:
    """Number of configurations in the sector, ``C(n, N_alpha) * C(n, N_beta)``."""
    from math import comb

    return comb(n_orbitals, n_alpha) * comb(n_orbitals, n_beta)


def all_configurations(n_orbitals: int) -> torch.Tensor:
    """Every token configuration ``(4**n, n)`` long, lexicographic (first orbital slowest)."""
    codes = torch.arange(N_STATES**n_orbitals)
    powers = N_STATES ** torch.arange(n_orbitals - 1, -1, -1)
    return (codes.unsqueeze(1) // powers) % N_STATES
