"""Configurations as packed integer keys, for deduplication and lookup.

Tokens follow :mod:`nnqs.vmc.configurations` (``token = n_alpha + 2 * n_beta``). Packed keys: 31 orbitals per int64 word, ``word[w] = sum_p token[31 w + p] * 4**p``
(at most 4**31 - 1 < 2**63), so any number of orbitals packs into
``ceil(n / 31)`` words and equal configurations have equal keys.
"""
from __future__ import annotations

import torch

ORBITALS_PER_WORD = 31


def n_words(n_orbitals: int) -> int:
    return -(-n_orbitals // ORBITALS_PER_WORD)


def orbital_weights(n_orbitals: int, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per orbital: its word index ``(n,)`` and its place value ``4**(p mod 31)`` ``(n,)``, int64."""
    p = torch.arange(n_orbitals, device=device)
    return p // ORBITALS_PER_WORD, torch.pow(4, p % ORBITALS_PER_WORD)


def pack(tokens: torch.Tensor) -> torch.Tensor:
    """``(B, n)`` tokens -> ``(B, W)`` int64 keys."""
    b, n = tokens.shape
    w = n_words(n)
    padded = torch.zeros(b, w * ORBITALS_PER_WORD, dtype=torch.long, device=tokens.device)
    padded[:, :n] = tokens
    place = torch.pow(4, torch.arange(ORBITALS_PER_WORD, device=tokens.device))
    return (padded.view(b, w, ORBITALS_PER_WORD) * place).sum(-1)


def unpack(keys: torch.Tensor, n_orbitals: int) -> torch.Tensor:
    """``(B, W)`` keys -> ``(B, n)`` int64 tokens (inverse of :func:`pack`)."""
    shifts = 2 * torch.arange(ORBITALS_PER_WORD, device=keys.device)
    tokens = (keys.unsqueeze(-1) >> shifts) & 3  # (B, W, 31)
    return tokens.reshape(keys.shape[0], keys.shape[1] * ORBITALS_PER_WORD)[:, :n_orbitals]  # also for 0 keys


def unique_keys(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted unique rows of ``(K, W)`` keys and the inverse map ``(K,)``."""
    if keys.shape[1] == 1:
        uniq, inverse = torch.unique(keys[:, 0], sorted=True, return_inverse=True)
        return uniq.unsqueeze(1), inverse
    return torch.unique(keys, dim=0, sorted=True, return_inverse=True)


def lookup(table: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Row index of each query in ``table`` (sorted unique ``(T, W)`` keys), or -1 if absent."""
    if table.shape[0] == 0:
        return torch.full((queries.shape[0],), -1, dtype=torch.long, device=queries.device)
    if table.shape[1] == 1:
        t, q = table[:, 0], queries[:, 0]
        pos = torch.searchsorted(t, q).clamp_(max=t.shape[0] - 1)
        return torch.where(t[pos] == q, pos, torch.full_like(pos, -1))
    both, inverse = unique_keys(torch.cat([table, queries]))
    # Each unique row's position in the table (or -1), then read it off for the queries.
    slot = torch.full((both.shape[0],), -1, dtype=torch.long, device=table.device)
    slot[inverse[: table.shape[0]]] = torch.arange(table.shape[0], device=table.device)
    return slot[inverse[table.shape[0]:]]
