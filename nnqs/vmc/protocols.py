"""The contracts between the VMC parts, stated as :class:`typing.Protocol`.

* :class:`SamplerModel` -- what :func:`nnqs.vmc.sampler.sample_unique` drives: sizes, a
  device, a KV cache and the next-orbital conditional. The Transformer wavefunction is one;
  any autoregressive model over the 4 orbital states that keeps the sector is another.
* :class:`ConnectedHamiltonian` -- what :func:`nnqs.vmc.local_energy.local_energy` needs
  of a Hamiltonian: the one primitive "configurations connected to a batch, with matrix
  elements" padded to a fixed ``n_connected`` per row.

Both are ``runtime_checkable`` (``isinstance`` checks the members exist, not their
signatures); tests/vmc/test_protocols.py runs the contract over every implementation.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from nnqs.nn.cache import AttentionCache
from nnqs.vmc.compact_hamiltonian import Connections


@runtime_checkable
class SamplerModel(Protocol):
    """An autoregressive model over ``n_orbitals`` tokens (states 0..3) in the
    ``(n_alpha, n_beta)`` sector, as the unique-prefix sampler uses it.

    Contract: ``next_log_conditional`` ``(B, 4)`` is ``log P(x_i = s | prefix)``; its exp
    sums to 1 over the states that can still reach the sector and is exactly 0 (log
    ``-inf``) on the others. With a cache from ``new_cache`` holding the ``i`` prefix
    positions it returns the same values as without one (and appends position ``i``).
    """

    n_orbitals: int
    n_alpha: int
    n_beta: int

    @property
    def device(self) -> torch.device:
        """Where prefixes, counts and the cache live."""
        ...

    def new_cache(self, branching: bool = False) -> AttentionCache:
        """An empty cache; ``branching=True`` asks for one made for pruning/branching rows."""
        ...

    def next_log_conditional(
        self, prefix: torch.Tensor, n_up: torch.Tensor, n_dn: torch.Tensor, cache: AttentionCache | None = None
    ) -> torch.Tensor:
        """``log P(x_i | prefix)`` ``(B, 4)`` for ``prefix`` ``(B, i)`` long with ``n_up``/``n_dn``
        ``(B,)`` alpha/beta electrons in it; ``cache`` holds positions ``0..i-1`` when given."""
        ...


@runtime_checkable
class ConnectedHamiltonian(Protocol):
    """A Hamiltonian as the local energy sees it (Hartree, float64 matrix elements)."""

    n_orbitals: int

    @property
    def n_connected(self) -> int:
        """``K``: connected configurations listed per row by :meth:`connections`."""
        ...

    def connections(self, tokens: torch.Tensor) -> Connections:
        """For ``(B, n)`` tokens: packed keys ``(B, K, W)`` of the x' != x, their elements
        ``H[x, x']`` ``(B, K)`` (zeros allowed: they are dropped) and ``H[x, x]`` ``(B,)``."""
        ...
